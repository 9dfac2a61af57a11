package tracee

import "testing"

func TestGapsNear(t *testing.T) {
	maps := []mapping{
		{start: 0x555555554000, end: 0x555555559000, exec: true},
		{start: 0x555555559000, end: 0x55555555a000},
		{start: 0x7ffff7dc0000, end: 0x7ffff7f00000, exec: true},
		{start: 0x7ffffffde000, end: 0x7ffffffff000},
	}
	got := gapsNear(maps, 0x555555554000, 0x40000)
	if len(got) == 0 {
		t.Fatal("no gap")
	}
	// Nearest: right above the program's data, clear of it by the guard
	// (below it the range would start 0x40000 further away).
	if want := uint64(0x55555555a000 + 16*pageSize); got[0] != want {
		t.Errorf("first candidate %#x, want %#x", got[0], want)
	}
	for _, a := range got {
		if a%pageSize != 0 {
			t.Errorf("%#x not page aligned", a)
		}
		for _, m := range maps {
			if a < m.end && a+0x40000 > m.start {
				t.Errorf("%#x overlaps %#x-%#x", a, m.start, m.end)
			}
		}
	}
	// A request larger than every gap but the top one lands above.
	if got := gapsNear([]mapping{{start: 0x10000 + 16*pageSize, end: 0x7ffffffff000 - 0x100000}}, 0x20000, 0x1000); len(got) != 1 || got[0] < 0x7ffffffff000-0x100000 {
		t.Errorf("got %#x, want one candidate in the top gap", got)
	}
}
