package integration

import (
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
)

// The actions tracee, built -O2 without frame pointers and without -g:
// only .eh_frame can unwind it.
var (
	actionsOnce sync.Once
	actionsBins map[bool]string // by PIE
	actionsErr  error
)

func actionsBin(t *testing.T, pie bool) string {
	t.Helper()
	actionsOnce.Do(func() {
		actionsBins = map[bool]string{}
		for _, p := range []bool{false, true} {
			out, flags := filepath.Join(binDir, "actions_nopie"), []string{"-fno-pie", "-no-pie"}
			if p {
				out, flags = filepath.Join(binDir, "actions_pie"), []string{"-fPIE", "-pie"}
			}
			args := append([]string{"-O2", "-fomit-frame-pointer", "-Wall", "-o", out, filepath.Join("testdata", "actions.c")}, flags...)
			if actionsErr = build(".", "gcc", args...); actionsErr != nil {
				return
			}
			actionsBins[p] = out
		}
	})
	if actionsErr != nil {
		t.Fatal(actionsErr)
	}
	return actionsBins[pie]
}

// The calls actions.c makes: sized() with these sizes, top(0..4), and
// tick(0..9) with off() before tick(3) and on() before tick(6).
var (
	actionSizes = []int64{1, 2, 3, 5, 8, 13, 21, 34, 55, 89, 100, 100, 100}
	topCalls    = 5
)

func runActions(t *testing.T, pie bool, args ...string) result {
	t.Helper()
	r := probe(t, append(append([]string{"run"}, args...), "--", actionsBin(t, pie))...)
	if r.code != 0 {
		t.Fatalf("probe run: %v", r)
	}
	return r
}

// tableRows returns the rows "label count" of the table whose title line
// starts with "# title".
func tableRows(t *testing.T, out, title string) map[string]int {
	t.Helper()
	rowRe := regexp.MustCompile(`^(.+?)\s+(\d+) \|@*\s*\|$`)
	var rows map[string]int
	for _, line := range strings.Split(out, "\n") {
		switch {
		case strings.HasPrefix(line, "# "+title):
			rows = map[string]int{}
		case rows != nil && strings.HasPrefix(line, "#"):
			return rows
		case rows != nil:
			if m := rowRe.FindStringSubmatch(line); m != nil {
				var n int
				fmt.Sscan(m[2], &n)
				rows[m[1]] = n
			} else if line != "" {
				return rows
			}
		}
	}
	if rows == nil {
		t.Fatalf("no table %q in:\n%s", title, out)
	}
	return rows
}

func sameRows(t *testing.T, what string, got, want map[string]int) {
	t.Helper()
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("%s:\n got %v\nwant %v", what, got, want)
	}
}

func TestActionCountHist(t *testing.T) {
	for _, pie := range []bool{false, true} {
		t.Run(fmt.Sprintf("pie=%v", pie), func(t *testing.T) {
			r := runActions(t, pie,
				"p:sized size=%di:s64 => count:comm count:size hist:size hist:size:linear=50",
				"r:top => hist:duration count")
			if strings.Contains(r.stdout, "p_sized_0: (") || strings.Contains(r.stdout, "r_top_0: (") {
				t.Errorf("events printed without print in their actions:\n%s", r.stdout)
			}
			comm := filepath.Base(actionsBin(t, pie))
			sameRows(t, "count:comm", tableRows(t, r.stdout, "count:comm of probe/p_sized_0: 13 hits, 1 key"),
				map[string]int{"comm=" + comm: len(actionSizes)})
			bySize, log2, linear := map[string]int{}, map[string]int{}, map[string]int{}
			for _, s := range actionSizes {
				bySize[fmt.Sprintf("size=%d", s)]++
				lo := int64(1)
				for lo*2 <= s {
					lo *= 2
				}
				if s == 1 {
					log2["[1]"]++
				} else {
					log2[fmt.Sprintf("[%d, %d)", lo, lo*2)]++
				}
				linear[fmt.Sprintf("[%d, %d)", s/50*50, s/50*50+50)]++
			}
			sameRows(t, "count:size", tableRows(t, r.stdout, "count:size of probe/p_sized_0:"), bySize)
			sameRows(t, "hist:size", tableRows(t, r.stdout, "hist:size of probe/p_sized_0 (log2): 13 values, sum 531"), log2)
			sameRows(t, "hist:size:linear=50", tableRows(t, r.stdout, "hist:size:linear=50 of probe/p_sized_0 (linear, step 50): 13 values, sum 531"), linear)

			total := 0
			for _, n := range tableRows(t, r.stdout, "hist:duration of probe/r_top_0 (log2):") {
				total += n
			}
			if total != topCalls || !strings.Contains(r.stdout, fmt.Sprintf("# hist:duration of probe/r_top_0 (log2): %d values,", topCalls)) {
				t.Errorf("hist:duration counts %d calls, want %d:\n%s", total, topCalls, r.stdout)
			}
			sameRows(t, "count", tableRows(t, r.stdout, "count of probe/r_top_0:"), map[string]int{"total": topCalls})
		})
	}
}

// printedTicks returns the i= values of the p_tick_0 events printed.
func printedTicks(out string) string {
	var got []string
	for _, m := range regexp.MustCompile(`p_tick_0: \(tick\+0x0/0x[0-9a-f]+\) i=(\d+)`).FindAllStringSubmatch(out, -1) {
		got = append(got, m[1])
	}
	return strings.Join(got, ",")
}

func TestActionTraceSwitches(t *testing.T) {
	for _, tc := range []struct {
		name  string
		specs []string
		want  string
	}{
		{"no switch", []string{"p:tick i=%di:s64"}, "0,1,2,3,4,5,6,7,8,9"},
		{"traceoff/traceon", []string{"p:tick i=%di:s64", "p:off => traceoff", "p:on => traceon"}, "0,1,2,6,7,8,9"},
		{"traceoff only", []string{"p:tick i=%di:s64", "p:off => traceoff"}, "0,1,2"},
		{"disable/enable", []string{"p:tick i=%di:s64", "p:off => disable:p_tick_0", "p:on => enable:probe/p_tick_0"}, "0,1,2,6,7,8,9"},
		{"disable keeps counting off", []string{"p:tick i=%di:s64 => print count", "p:off => disable:p_tick_0"}, "0,1,2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := runActions(t, true, tc.specs...)
			if got := printedTicks(r.stdout); got != tc.want {
				t.Errorf("ticks printed %q, want %q:\n%s", got, tc.want, r.stdout)
			}
			if strings.Contains(r.stdout, "p_off_0: (") || strings.Contains(r.stdout, "p_on_0: (") {
				t.Errorf("a switch's own event printed without print:\n%s", r.stdout)
			}
			if tc.name == "disable keeps counting off" {
				sameRows(t, "count", tableRows(t, r.stdout, "count of probe/p_tick_0:"), map[string]int{"total": 3})
			}
		})
	}
}

// stackOf returns the frames printed after the first p_leaf_0 event, as
// function names; graph says the function_graph layout ("/* => f */").
func stackOf(t *testing.T, out string, graph bool) []string {
	t.Helper()
	lines := strings.Split(out, "\n")
	frameRe := regexp.MustCompile(`^ => (\S+)\+0x[0-9a-f]+/0x[0-9a-f]+ \[(\S+)\]$`)
	if graph {
		frameRe = regexp.MustCompile(`\|\s+/\* => (\S+)\+0x[0-9a-f]+/0x[0-9a-f]+ \[(\S+)\] \*/$`)
	}
	for i, l := range lines {
		if !strings.Contains(l, "p_leaf_0: (leaf+0x0/") {
			continue
		}
		var funcs []string
		for _, f := range lines[i+1:] {
			m := frameRe.FindStringSubmatch(f)
			if m == nil {
				break
			}
			funcs = append(funcs, m[1])
		}
		return funcs
	}
	t.Fatalf("no p_leaf_0 event in:\n%s", out)
	return nil
}

func TestActionStacktrace(t *testing.T) {
	for _, tc := range []struct {
		name  string
		args  []string
		graph bool
	}{
		{"plain", []string{"p:leaf => stacktrace"}, false},
		// Return probes on every caller: their return addresses are the
		// trampoline's while leaf runs.
		{"return probes", []string{"r:mid", "r:top", "r:main", "p:leaf => stacktrace"}, false},
		{"function_graph", []string{"--tracer", "function_graph", "p:leaf => stacktrace"}, true},
	} {
		for _, pie := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/pie=%v", tc.name, pie), func(t *testing.T) {
				r := runActions(t, pie, tc.args...)
				got := stackOf(t, r.stdout, tc.graph)
				want := []string{"leaf", "mid", "top", "main"}
				if len(got) < len(want)+1 || strings.Join(got[:len(want)], " <- ") != strings.Join(want, " <- ") {
					t.Fatalf("stack %q, want it to start %q and go on into libc:\n%s", got, want, r.stdout)
				}
				if n := strings.Count(r.stdout, "p_leaf_0: (leaf+0x0/"); n != topCalls {
					t.Errorf("%d p_leaf_0 events, want %d", n, topCalls)
				}
			})
		}
	}
}

func TestActionBadInput(t *testing.T) {
	for _, tc := range []struct{ spec, token string }{
		{"p:leaf => frob", `"frob"`},
		{"p:leaf n=%di:s64 => count:comm,nosuch", `"count:comm,nosuch"`},
		{"p:leaf n=%di:s64 => hist:nosuch", `"hist:nosuch"`},
		{"p:leaf => hist:duration", `"hist:duration"`},
		{"p:leaf n=%di:s64 => hist:n:linear=0", `"hist:n:linear=0"`},
		{"p:leaf n=%di:s64 => hist:n:cubic", `"hist:n:cubic"`},
		{"p:leaf => enable:nosuch", `"enable:nosuch"`},
		{"p:leaf => print:5", `"print:5"`},
	} {
		t.Run(tc.spec, func(t *testing.T) {
			r := probe(t, "run", tc.spec, "--", actionsBin(t, true))
			lines := strings.Split(strings.TrimSpace(r.stderr), "\n")
			if r.code != 2 || len(lines) != 1 || !strings.Contains(lines[0], tc.token) || r.stdout != "" {
				t.Errorf("want exit 2 and one line naming %s, nothing run:\n%v", tc.token, r)
			}
		})
	}
}
