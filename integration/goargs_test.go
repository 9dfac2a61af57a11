package integration

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestFuncArgsGo: --args on Go functions (dlv trace's users expect
// them): each call's integer parameter as Go's ABI passed it, read at its
// DWARF place, and its integer result, in the tracee and stopping alike:
// main.work(x) returns leaf(x)+leaf(x+1), leaf(x) 2x+1. Before, a Go
// function showed neither.
func TestFuncArgsGo(t *testing.T) {
	t.Parallel()
	exe := tracerBin(t, "gotrace")
	open := regexp.MustCompile(`\|\s+main\.work\(x=(\d+)\) \{$`)
	closing := regexp.MustCompile(`\|\s+\} /\* main\.work = (\d+) \*/$`)
	leaf := regexp.MustCompile(`\|\s+main\.leaf\(x=(\d+)\); /\* = (\d+) \*/$`)
	for _, engine := range [][]string{nil, {"--no-inprocess"}} {
		// Two goroutines calling work(0..3).
		r := probe(t, append(append([]string{"run"}, engine...), "--tracer", "function_graph", "--args", "--filter", "main.work,main.leaf", "--", exe, "2", "4", "1")...)
		if want := fmt.Sprintf("total=%d ", goTotal(2, 4)); r.code != 3 || !strings.Contains(r.stdout, want) {
			t.Fatalf("%v: want exit status 3 (gotrace's) and %q: %v", engine, want, r)
		}
		works, leaves := map[int]int{}, 0
		pending := map[string]int{} // per goroutine's lane, the open work's x
		for _, l := range strings.Split(r.stdout, "\n") {
			lane := strings.Fields(l + " x x")[1]
			if m := open.FindStringSubmatch(l); m != nil {
				x, _ := strconv.Atoi(m[1])
				pending[lane] = x
			} else if m := closing.FindStringSubmatch(l); m != nil {
				x, ok := pending[lane]
				if v, _ := strconv.Atoi(m[1]); !ok || v != 4*x+4 {
					t.Errorf("%v: work(%d) = %s, want %d: %q", engine, x, m[1], 4*x+4, l)
				}
				works[x]++
				delete(pending, lane)
			} else if m := leaf.FindStringSubmatch(l); m != nil {
				x, _ := strconv.Atoi(m[1])
				if v, _ := strconv.Atoi(m[2]); v != 2*x+1 {
					t.Errorf("%v: leaf(%d) = %d, want %d", engine, x, v, 2*x+1)
				}
				leaves++
			}
		}
		if len(works) != 4 || works[0] != 2 || works[3] != 2 || leaves != 16 {
			t.Errorf("%v: work's calls by x %v, %d of leaf, want 2 of each x from 0 to 3 and 16:\n%s", engine, works, leaves, r.stdout)
		}
	}
}
