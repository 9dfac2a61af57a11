package ring

import (
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func monotonic() int64 {
	var ts unix.Timespec
	unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return ts.Nano()
}

// TestClockFollowsNow: the TSC's times agree with the clock they follow
// to a few microseconds, whether the line is first used at once or later,
// by a drain pass (which refreshes it first) or at a stop (which does
// not); and they never go back.
func TestClockFollowsNow(t *testing.T) {
	if why := InvariantTSC(); why != "" {
		t.Skip(why) // (a CPU the in-process probes refuse too)
	}
	for _, wait := range []time.Duration{0, 10 * time.Millisecond} {
		c, err := NewClock(monotonic)
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(wait)
		last := int64(0)
		for i := range 60 {
			if i%3 != 0 {
				c.Refresh() // (a drain pass's; a stop's drain gives times at once)
			}
			before := monotonic()
			got := c.Time(c.Stamp())
			after := monotonic()
			if got < before-5_000 || got > after+5_000 {
				t.Errorf("wait %v, sample %d: the TSC says %d, the clock %d..%d", wait, i, got, before, after)
			}
			if got < last {
				t.Errorf("wait %v, sample %d: time went back from %d to %d", wait, i, last, got)
			}
			last = got
			time.Sleep(time.Duration(i) * 100 * time.Microsecond)
		}
	}
}
