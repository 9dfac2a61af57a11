package symbols

import (
	"cmp"
	"slices"
	"sort"
	"testing"

	"github.com/probedbg/probe/singlestep"
)

// TestBranchTargetsParallel: libc's branches swept in parts at once are
// those of the one sweep (sorted, duplicates out).
func TestBranchTargetsParallel(t *testing.T) {
	path := "/lib/x86_64-linux-gnu/libc.so.6"
	m, err := OpenModule(path)
	if err != nil {
		t.Fatalf("glibc at %s: %v", path, err)
	}
	defer m.Close()
	code, err := m.executableCode()
	if err != nil {
		t.Fatal(err)
	}
	entries := m.entryPoints()
	for _, c := range code {
		lo := sort.Search(len(entries), func(i int) bool { return entries[i] >= c.addr })
		hi := sort.Search(len(entries), func(i int) bool { return entries[i] >= c.addr+uint64(len(c.code)) })
		one := singlestep.SweepBranches(c.code, c.addr, entries[lo:hi])
		parts := sweepParallel(c, entries[lo:hi])
		sortByTarget(one)
		sortByTarget(parts)
		slices.SortStableFunc(one, func(a, b singlestep.Branch) int { return cmp.Compare(a.From, b.From) })
		slices.SortStableFunc(parts, func(a, b singlestep.Branch) int { return cmp.Compare(a.From, b.From) })
		one, parts = slices.Compact(one), slices.Compact(parts)
		if !slices.Equal(one, parts) {
			t.Fatalf("%#x, %d bytes: %d branches in one sweep, %d in parts", c.addr, len(c.code), len(one), len(parts))
		}
		t.Logf("%#x, %d bytes: %d branches", c.addr, len(c.code), len(one))
	}
}

// BenchmarkSweepLibc is libc's largest stretch of code swept at once and
// in parts, one a CPU (here: 12.8 and 8.4 ms).
func BenchmarkSweepLibc(b *testing.B) {
	m, err := OpenModule("/lib/x86_64-linux-gnu/libc.so.6")
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close()
	code, err := m.executableCode()
	if err != nil {
		b.Fatal(err)
	}
	entries := m.entryPoints()
	var big codeRange
	for _, c := range code {
		if len(c.code) > len(big.code) {
			big = c
		}
	}
	lo := sort.Search(len(entries), func(i int) bool { return entries[i] >= big.addr })
	hi := sort.Search(len(entries), func(i int) bool { return entries[i] >= big.addr+uint64(len(big.code)) })
	b.Run("one", func(b *testing.B) {
		for b.Loop() {
			singlestep.SweepBranches(big.code, big.addr, entries[lo:hi])
		}
	})
	b.Run("parts", func(b *testing.B) {
		for b.Loop() {
			sweepParallel(big, entries[lo:hi])
		}
	})
}
