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
// It is a line from an anchor (a TSC value and its time) whose slope is
// fitted at each Refresh over the whole time since the first sample: at
// the first Refresh (the first drain), however soon, and then whenever
// the clock's age has doubled, up to once a second. A record drained at
// time T lies at most T from the first sample, where a slope fitted over
// T is off by the samples' own error over T: so its time is off by about
// that error (tens of ns), and no calibration need hold the threads.
// Past the first, a Refresh moves the anchor to the line's present point,
// so that the times it gives never jump (one thread's events stay in
// order), and aims the new slope to meet the real clock by the next: the
// line follows CLOCK_MONOTONIC to well under a microsecond a second with
// the TSC invariant (constant_tsc, nonstop_tsc). For one goroutine at a
// time.
type Clock struct {
	now         func() int64
	first       [2]uint64 // the first sample: TSC, time
	anchor      [2]uint64 // the line's anchor: TSC, time
	perTSC      float64   // nanoseconds per TSC tick
	rough       float64   // perTSC over roughOver, for Ticks
	fitted      bool      // perTSC fitted by a Refresh, or the CPU's own
	born        time.Time
	lastRefresh time.Time
}

// roughOver is how long NewClock measures the rough slope over, which
// only bounds ages (Ticks) and stands in for the fitted one until the
// first Refresh.
const roughOver = 50 * time.Microsecond

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

// NewClock starts a clock on the TSC. It does not sleep to calibrate:
// the threads are held meanwhile, and a sleep held them 17 ms on x86-64
// (120-230 ms under arm64's emulation). A counter whose frequency the CPU
// says (arm64) needs no fit: Refresh follows the real clock's own drift,
// once a second.
func NewClock(now func() int64) (*Clock, error) {
	c := &Clock{now: now, born: time.Now()}
	tsc0, ns0 := c.sample()
	c.first, c.anchor = [2]uint64{tsc0, ns0}, [2]uint64{tsc0, ns0}
	c.lastRefresh = c.born
	if hz := tscHz(); hz != 0 {
		c.perTSC, c.rough, c.fitted = 1e9/float64(hz), 1e9/float64(hz), true
		c.born = c.born.Add(-time.Second) // (every Refresh a second apart)
		return c, nil
	}
	for start := time.Now(); ; {
		t1, n1 := c.sample()
		if time.Since(start) < roughOver {
			continue
		}
		if t1 <= tsc0 || n1 <= ns0 {
			return nil, errors.New("the TSC does not advance with the clock")
		}
		c.perTSC = float64(n1-ns0) / float64(t1-tsc0)
		c.rough = c.perTSC
		return c, nil
	}
}

// Refresh fits the line again when due (the first time at once, then
// when the clock's age has doubled, at most once a second), bending it
// toward the real clock without a jump.
func (c *Clock) Refresh() {
	now := time.Now()
	if c.fitted && now.Sub(c.lastRefresh) < min(time.Second, c.lastRefresh.Sub(c.born)) {
		return
	}
	t, n := c.sample()
	if t <= c.first[0] || n <= c.first[1] || t <= c.anchor[0] {
		return
	}
	c.lastRefresh = now
	long := float64(n-c.first[1]) / float64(t-c.first[0])
	if !c.fitted {
		// No time has been given yet: the line is the fit itself.
		c.anchor, c.perTSC, c.fitted = c.first, long, true
		return
	}
	here := c.Time(t)
	// Over the ticks to the next Refresh, make up the line's error now.
	ticks := float64(min(time.Second, now.Sub(c.born))) / long
	slope := long - float64(here-int64(n))/ticks
	if slope <= long/2 || slope >= long*2 {
		slope = long
	}
	c.anchor, c.perTSC = [2]uint64{t, uint64(here)}, slope
}

// Time is tsc, a stamp of the past, on the tracer's clock.
func (c *Clock) Time(tsc uint64) int64 { return c.Line().Time(tsc) }

// Line is the line Time follows now.
func (c *Clock) Line() Line {
	if !c.fitted {
		c.Refresh() // (the first records drained at a stop)
	}
	return Line{TSC: c.anchor[0], NS: c.anchor[1], PerTSC: c.perTSC}
}

// Ticks is about how many TSC ticks d takes (by the rough slope: its
// callers bound ages).
func (c *Clock) Ticks(d time.Duration) uint64 { return uint64(float64(d) / c.rough) }

// Duration is about how long n ticks are.
func (c *Clock) Duration(n uint64) time.Duration { return time.Duration(float64(n) * c.rough) }

// Stamp is the counter now, as a record made now would be stamped.
func (c *Clock) Stamp() uint64 { return rdtsc() }
