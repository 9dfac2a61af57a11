package probe

import (
	"testing"
	"time"
)

func TestPassLimit(t *testing.T) {
	for _, c := range []struct {
		limit, n int
		took     time.Duration
		want     int
	}{
		{drainPassMax, drainPassMax, time.Second, drainPassMax / 2}, // slow: halved
		{128, 10, 3 * drainPassTime, 64},                            // never below 64
		{64, 64, time.Second, 64},
		{1024, 1024, drainPassTime / 4, 2048},         // full and quick: doubled
		{drainPassMax, drainPassMax, 0, drainPassMax}, // never above the most
		{1024, 100, drainPassTime / 4, 1024},          // not full: kept
		{1024, 1024, drainPassTime * 3 / 4, 1024},     // full, neither slow nor quick
	} {
		if got := passLimit(c.limit, c.n, c.took); got != c.want {
			t.Errorf("passLimit(%d, %d, %v) = %d, want %d", c.limit, c.n, c.took, got, c.want)
		}
	}
}

// TestRingSizeDefault: a ring is DefaultWaitingRingSize where its thread
// waits for room, DefaultRingSize where it drops, Tuning.RingSize where
// set.
func TestRingSizeDefault(t *testing.T) {
	for _, c := range []struct {
		tuning Tuning
		want   int
	}{
		{Tuning{}, DefaultRingSize},
		{Tuning{WaitForRoom: true}, DefaultWaitingRingSize},
		{Tuning{WaitForRoom: true, RingSize: 64 << 10}, 64 << 10},
		{Tuning{RingSize: 64 << 10}, 64 << 10},
	} {
		if got := (&Tracer{tuning: c.tuning}).ringSize(); got != c.want {
			t.Errorf("%+v: ring of %d bytes, want %d", c.tuning, got, c.want)
		}
	}
	if DefaultWaitingRingSize >= DefaultRingSize {
		t.Errorf("rings of threads that wait (%d) no smaller than of those that drop (%d)", DefaultWaitingRingSize, DefaultRingSize)
	}
}
