package probe

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/probedbg/probe/fetch"
)

// The function tracer through the library: exact event counts, well
// nested per lane, filters applied at entry, bad globs refused.

func TestTraceFunctionsGraph(t *testing.T) {
	bin := buildTraced(t)
	tr, output := launch(t, bin, "50")
	var entries, returns, lost int
	depth := map[int64]int{}
	counts := map[string]int{}
	var nestErr error
	info, err := tr.TraceFunctions(FuncTraceOptions{
		Returns: true,
		Handler: func(ev *FuncEvent) {
			switch ev.Kind {
			case FuncEntry:
				if ev.Depth != depth[ev.Lane] && nestErr == nil {
					nestErr = errors.New("entry " + ev.Func + " at the wrong depth")
				}
				depth[ev.Lane]++
				entries++
				counts[ev.Func]++
			case FuncReturn, FuncLost:
				depth[ev.Lane]--
				if ev.Depth != depth[ev.Lane] && nestErr == nil {
					nestErr = errors.New("return of " + ev.Func + " at the wrong depth")
				}
				if ev.Kind == FuncReturn {
					returns++
					if ev.Time < ev.EntryTime {
						nestErr = errors.New("return before its entry")
					}
				} else {
					lost++
				}
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	// main, work, other: the crt glue is not the program's.
	if info.Functions != 3 {
		t.Errorf("traced %d functions, want 3 (skipped %v)", info.Functions, info.Skipped)
	}
	tr.Start()
	if _, err := tr.Wait(); err != nil {
		t.Fatal(err)
	}
	if nestErr != nil {
		t.Error(nestErr)
	}
	if want := map[string]int{"main": 1, "work": 50, "other": 50}; !equalCounts(counts, want) {
		t.Errorf("entries %v, want %v", counts, want)
	}
	if entries != 101 || returns != 101 || lost != 0 || tr.Stats().LostReturns != 0 {
		t.Errorf("entries %d returns %d lost %d (counted %d), want 101 101 0", entries, returns, lost, tr.Stats().LostReturns)
	}
	if got, want := output(), untraced(t, bin, "50"); got != want {
		t.Errorf("output %q, want %q", got, want)
	}
}

func TestTraceFunctionsFilters(t *testing.T) {
	bin := buildTraced(t)
	for _, tc := range []struct {
		name string
		opts FuncTraceOptions
		want map[string]int
	}{
		{"filter", FuncTraceOptions{Filter: []string{"wo*,oth*"}}, map[string]int{"work": 20, "other": 20}},
		{"notrace", FuncTraceOptions{Notrace: []string{"work"}}, map[string]int{"main": 1, "other": 20}},
		{"graph-function", FuncTraceOptions{Returns: true, Filter: []string{"work"}, GraphFunction: []string{"main"}}, map[string]int{"main": 1, "work": 20}},
		{"max-depth", FuncTraceOptions{Returns: true, MaxDepth: 1}, map[string]int{"main": 1}},
		{"notrace graph", FuncTraceOptions{Returns: true, Notrace: []string{"main"}}, map[string]int{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr, output := launch(t, bin, "20")
			counts := map[string]int{}
			tc.opts.Handler = func(ev *FuncEvent) {
				if ev.Kind == FuncEntry {
					counts[ev.Func]++
				}
			}
			if _, err := tr.TraceFunctions(tc.opts); err != nil {
				t.Fatal(err)
			}
			tr.Start()
			tr.Wait()
			if !equalCounts(counts, tc.want) {
				t.Errorf("entries %v, want %v", counts, tc.want)
			}
			output()
		})
	}
}

func TestTraceFunctionsBadGlob(t *testing.T) {
	bin := buildTraced(t)
	tr, _ := launch(t, bin, "1")
	for _, opts := range []FuncTraceOptions{
		{Filter: []string{"nomatch*"}},
		{Filter: []string{"nosuchlib:*"}},
		{Filter: []string{"[bad"}},
		{Returns: true, GraphFunction: []string{"nomatch"}},
	} {
		if _, err := tr.TraceFunctions(opts); !errors.Is(err, fetch.ErrBadInput) {
			t.Errorf("%+v: got %v, want bad input", opts, err)
		}
	}
	// Nothing was left behind: the tracer can still start.
	if _, err := tr.TraceFunctions(FuncTraceOptions{Filter: []string{"work"}}); err != nil {
		t.Fatal(err)
	}
}

func equalCounts(a, b map[string]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range b {
		if a[k] != v {
			return false
		}
	}
	return true
}

// TestStopTracingFunctions switches tracers on a running process: main's
// return, hijacked by the first function_graph, is in flight across the
// switch and must still come home; the second tracer starts its own
// nesting from zero and the program's result is unchanged.
func TestStopTracingFunctions(t *testing.T) {
	bin := buildTraced(t)
	tr, output := launch(t, bin, "300", "1000")
	var mu sync.Mutex
	phase := 1
	counts := [3]map[FuncEventKind]int{{}, {}, {}}
	depths := map[int]bool{}
	handler := func(ev *FuncEvent) {
		mu.Lock()
		defer mu.Unlock()
		counts[phase][ev.Kind]++
		if phase == 2 {
			depths[ev.Depth] = true
		}
	}
	if _, err := tr.TraceFunctions(FuncTraceOptions{Returns: true, Handler: handler}); err != nil {
		t.Fatal(err)
	}
	tr.Start()
	deadline := time.Now().Add(10 * time.Second)
	for {
		mu.Lock()
		n := counts[1][FuncEntry]
		mu.Unlock()
		if n >= 20 || time.Now().After(deadline) {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := tr.StopTracingFunctions(); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	phase = 0 // nothing may arrive while no tracer runs
	mu.Unlock()
	time.Sleep(50 * time.Millisecond)
	if err := tr.StopTracingFunctions(); err != nil { // a second stop does nothing
		t.Fatal(err)
	}
	mu.Lock()
	phase = 2
	mu.Unlock()
	info, err := tr.TraceFunctions(FuncTraceOptions{Returns: true, Filter: []string{"work,other"}, Handler: handler})
	if err != nil {
		t.Fatal(err)
	}
	if info.Functions != 2 {
		t.Errorf("second tracer traced %d functions, want 2", info.Functions)
	}
	status, err := tr.Wait()
	if err != nil {
		t.Fatal(err)
	}
	if !status.Exited || status.Code != 0 {
		t.Fatalf("status %+v", status)
	}
	if got, want := output(), untraced(t, bin, "300"); got != want {
		t.Errorf("output %q, want %q", got, want)
	}
	if len(counts[0]) != 0 {
		t.Errorf("events while no tracer ran: %v", counts[0])
	}
	// main's entry was seen, its return (after the switch) was not.
	if c := counts[1]; c[FuncEntry] < 20 || c[FuncReturn] != c[FuncEntry]-1 && c[FuncReturn] != c[FuncEntry]-2 || c[FuncLost] != 0 {
		t.Errorf("first tracer: %v, want entries >= 20 and every return but main's (and perhaps one call in flight)", c)
	}
	if c := counts[2]; c[FuncEntry] == 0 || c[FuncReturn] != c[FuncEntry] || c[FuncLost] != 0 {
		t.Errorf("second tracer: %v, want entries each with its return", c)
	}
	if len(depths) != 1 || !depths[0] {
		t.Errorf("second tracer depths %v, want only 0: main's old frame is not its", depths)
	}
	if lost := tr.Stats().LostReturns; lost != 0 {
		t.Errorf("%d lost returns", lost)
	}
}

// The function tracer's sites are patched in batches (batch.go,
// optimizeAll): on 60 functions, a few accesses of the tracee's memory
// in all, not several for each function's jmp and detour; and every
// call is still seen once.
func TestTraceFunctionsBatched(t *testing.T) {
	const n = 60
	var src strings.Builder
	src.WriteString("#include <stdio.h>\nvolatile long g;\n")
	for i := range n {
		fmt.Fprintf(&src, "__attribute__((noinline)) long f%d(long x) { g += x; return g * %d; }\n", i, i+1)
	}
	src.WriteString("int main(void) {\n\tlong s = 0;\n")
	for i := range n {
		fmt.Fprintf(&src, "\ts += f%d(%d);\n", i, i)
	}
	src.WriteString("\tprintf(\"s=%ld\\n\", s);\n\treturn 0;\n}\n")
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "many.c"), []byte(src.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "many")
	if out, err := exec.Command("gcc", "-O2", "-o", bin, filepath.Join(dir, "many.c")).CombinedOutput(); err != nil {
		t.Fatalf("gcc: %v\n%s", err, out)
	}
	tr, output := launch(t, bin)
	counts := map[string]int{}
	returns := 0
	info, err := tr.TraceFunctions(FuncTraceOptions{
		Returns: true,
		Handler: func(ev *FuncEvent) {
			switch ev.Kind {
			case FuncEntry:
				counts[ev.Func]++
			case FuncReturn:
				returns++
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if info.Functions != n+1 {
		t.Errorf("traced %d functions, want %d (skipped %v)", info.Functions, n+1, info.Skipped)
	}
	tr.Start()
	if _, err := tr.Wait(); err != nil {
		t.Fatal(err)
	}
	want := map[string]int{"main": 1}
	for i := range n {
		want[fmt.Sprintf("f%d", i)] = 1
	}
	if !equalCounts(counts, want) || returns != n+1 {
		t.Errorf("entries %v, %d returns; want each function once", counts, returns)
	}
	if got, want := output(), untraced(t, bin); got != want {
		t.Errorf("output %q, want %q", got, want)
	}
	st := tr.Stats()
	if st.JumpOptimized < n {
		t.Fatalf("%d sites jump-optimised, want at least %d", st.JumpOptimized, n)
	}
	// Unbatched it was three accesses a jmp (read, detour, jmp) and two
	// a breakpoint, ~300 here.
	if st.MemAccesses > n {
		t.Errorf("%d accesses of the tracee's memory for %d jumps, want at most %d", st.MemAccesses, st.JumpOptimized, n)
	}
	t.Logf("%d jumps, %d memory accesses", st.JumpOptimized, st.MemAccesses)
}

// TestTraceFunctionsPlannedAhead: the detours of the function tracer's
// sites are planned on another thread from the moment they are hooked,
// not all at Start; Start takes those plans and places the jumps.
func TestTraceFunctionsPlannedAhead(t *testing.T) {
	bin := buildTraced(t)
	tr, output := launch(t, bin, "5")
	entries := 0
	info, err := tr.TraceFunctions(FuncTraceOptions{
		Returns: true,
		Handler: func(ev *FuncEvent) {
			if ev.Kind == FuncEntry {
				entries++
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	var ahead int
	tr.do(func(int) error {
		for _, q := range tr.jumps.ahead {
			ahead += len(q.sites)
		}
		return nil
	})
	if ahead != info.Functions {
		t.Errorf("%d sites planned ahead of Start, want the %d functions'", ahead, info.Functions)
	}
	tr.Start()
	if _, err := tr.Wait(); err != nil {
		t.Fatal(err)
	}
	if st := tr.Stats(); st.JumpOptimized != info.Functions || entries != 11 {
		t.Errorf("%d jumps for %d functions, %d entries; want a jump each and 11 entries", st.JumpOptimized, info.Functions, entries)
	}
	if got, want := output(), untraced(t, bin, "5"); got != want {
		t.Errorf("output %q, want %q", got, want)
	}
}
