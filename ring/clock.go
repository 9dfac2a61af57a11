package ring

import (
	"bufio"
	"errors"
	"os"
	"runtime"
	"strings"
	"time"
)

// rdtsc reads the time-stamp counter (tsc_amd64.s; on arm64 the
// generic timer, tsc_arm64.s).
func rdtsc() uint64

// tscHz is the counter's frequency where the CPU says it (arm64's
// CNTFRQ_EL0), else 0.
func tscHz() uint64

// Clock turns the TSC values of records into the tracer's clock (now).
// It is a line from an anchor (a TSC value and its time), whose slope is
// calibrated over a few milliseconds at first, then at each Refresh (at
// most once a second) over the whole time since the first sample. A
// Refresh moves the anchor to the line's present point, so that the
// times it gives never jump (one thread's events stay in order), and
// aims the new slope to meet the real clock a second later: the line
// follows CLOCK_MONOTONIC to well under a microsecond a second with the
// TSC invariant (constant_tsc, nonstop_tsc).
type Clock struct {
	now         func() int64
	first       [2]uint64 // the first sample: TSC, time
	anchor      [2]uint64 // the line's anchor: TSC, time
	perTSC      float64   // nanoseconds per TSC tick
	lastRefresh time.Time
}

// InvariantTSC reports why the TSC cannot serve as a clock here, or "".
// arm64's generic timer always can: it counts at a constant rate
// (CNTFRQ_EL0), in every power state, the same on every CPU, and Linux
// lets user space read its virtual count.
func InvariantTSC() string {
	if runtime.GOARCH == "arm64" {
		return ""
	}
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return "cannot read /proc/cpuinfo"
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<16), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "flags") {
			continue
		}
		have := map[string]bool{}
		for _, fl := range strings.Fields(line[strings.IndexByte(line, ':')+1:]) {
			have[fl] = true
		}
		for _, need := range []string{"constant_tsc", "nonstop_tsc", "rdtscp"} {
			if !have[need] {
				return "the CPU has no " + need
			}
		}
		return ""
	}
	return "no CPU flags in /proc/cpuinfo"
}

// sample reads the TSC and now together, from the closest pair of five.
func (c *Clock) sample() (tsc, ns uint64) {
	best := ^uint64(0)
	for range 5 {
		a := rdtsc()
		n := c.now()
		b := rdtsc()
		if b-a < best {
			best, tsc, ns = b-a, a+(b-a)/2, uint64(n)
		}
	}
	return tsc, ns
}

// NewClock calibrates the TSC against now over a few milliseconds; a
// counter whose frequency the CPU says (arm64) needs no calibration:
// the threads are held meanwhile, and under arm64's emulation the sleep
// took 120-230 ms.
func NewClock(now func() int64) (*Clock, error) {
	c := &Clock{now: now}
	tsc0, ns0 := c.sample()
	if hz := tscHz(); hz != 0 {
		c.perTSC = 1e9 / float64(hz)
	} else {
		time.Sleep(5 * time.Millisecond)
		t1, n1 := c.sample()
		if t1 <= tsc0 || n1 <= ns0 {
			return nil, errors.New("the TSC does not advance with the clock")
		}
		c.perTSC = float64(n1-ns0) / float64(t1-tsc0)
	}
	c.first, c.anchor = [2]uint64{tsc0, ns0}, [2]uint64{tsc0, ns0}
	c.lastRefresh = time.Now()
	return c, nil
}

// Refresh takes a new sample, at most once a second, and bends the line
// toward it without a jump.
func (c *Clock) Refresh() {
	if time.Since(c.lastRefresh) < time.Second {
		return
	}
	c.lastRefresh = time.Now()
	t, n := c.sample()
	if t <= c.first[0] || n <= c.first[1] || t <= c.anchor[0] {
		return
	}
	long := float64(n-c.first[1]) / float64(t-c.first[0])
	here := c.Time(t)
	// Over the next second's ticks, make up the line's error now.
	ticks := 1e9 / long
	slope := long - float64(here-int64(n))/ticks
	if slope <= long/2 || slope >= long*2 {
		slope = long
	}
	c.anchor, c.perTSC = [2]uint64{t, uint64(here)}, slope
}

// Time is tsc on the tracer's clock.
func (c *Clock) Time(tsc uint64) int64 {
	d := float64(int64(tsc-c.anchor[0])) * c.perTSC
	return int64(c.anchor[1]) + int64(d)
}

// Ticks is how many TSC ticks d takes.
func (c *Clock) Ticks(d time.Duration) uint64 { return uint64(float64(d) / c.perTSC) }

// Stamp is the counter now, as a record made now would be stamped.
func (c *Clock) Stamp() uint64 { return rdtsc() }
