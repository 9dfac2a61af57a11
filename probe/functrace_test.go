package probe

import (
	"errors"
	"testing"
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
	if entries != 101 || returns != 101 || lost != 0 || tr.LostReturns() != 0 {
		t.Errorf("entries %d returns %d lost %d (counted %d), want 101 101 0", entries, returns, lost, tr.LostReturns())
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
		if _, err := tr.TraceFunctions(opts); !errors.Is(err, ErrBadInput) {
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
