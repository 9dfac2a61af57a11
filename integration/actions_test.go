package integration

import (
	"fmt"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
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
		{"p:leaf n=%di:s64 => sum:nosuch", `"sum:nosuch"`},
		{"p:leaf => avg:duration", `"avg:duration"`},
		{"p:leaf n=%di:s64 => max:n:nosuch", `"max:n:nosuch"`},
		{"p:leaf n=%di:s64 => hist:n:key=nosuch", `"hist:n:key=nosuch"`},
		{`p:leaf n=%di:s64 => printf("%d %d\n", n)`, `"printf(\"%d %d\\n\", n)"`},
		{`p:leaf n=%di:s64 => printf("%d\n", nosuch)`, `nosuch is not a field`},
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

// valueRows returns the rows "label value" of an aggregate's table (sum,
// avg, min, max) whose title line starts with "# title".
func valueRows(t *testing.T, out, title string) map[string]int64 {
	t.Helper()
	rowRe := regexp.MustCompile(`^(.+?)\s+(-?\d+)$`)
	var rows map[string]int64
	for _, line := range strings.Split(out, "\n") {
		switch {
		case strings.HasPrefix(line, "# "+title):
			rows = map[string]int64{}
		case rows != nil:
			m := rowRe.FindStringSubmatch(line)
			if m == nil || strings.HasPrefix(line, "#") {
				return rows
			}
			var n int64
			fmt.Sscan(m[2], &n)
			rows[m[1]] = n
		}
	}
	if rows == nil {
		t.Fatalf("no table %q in:\n%s", title, out)
	}
	return rows
}

// TestActionAggregates: sum, avg, min and max of a field or a return's
// duration, whole or by key, histograms by key, and the user stack as a
// key, checked against the calls actions.c makes.
func TestActionAggregates(t *testing.T) {
	r := runActions(t, true,
		"p:sized size=%di:s64 => sum:size avg:size min:size max:size hist:size:linear=50:key=comm",
		"p:top n=%di:s64 => sum:n:n max:n:comm",
		"p:leaf => count:stack",
		"r:leaf r=$retval:s64 => max:r min:duration:comm")
	var sum int64
	for _, s := range actionSizes {
		sum += s
	}
	for _, c := range []struct {
		title string
		want  int64
	}{
		{"sum:size of probe/p_sized_0: 13 values, 1 key", sum},
		{"avg:size of probe/p_sized_0: 13 values, 1 key", sum / int64(len(actionSizes))},
		{"min:size of probe/p_sized_0: 13 values, 1 key", 1},
		{"max:size of probe/p_sized_0: 13 values, 1 key", 100},
		{"max:r of probe/r_leaf_0: 5 values, 1 key", 3 * 4},
	} {
		if got := valueRows(t, r.stdout, c.title); len(got) != 1 || got["total"] != c.want {
			t.Errorf("%s: %v, want total %d", c.title, got, c.want)
		}
	}
	byN := valueRows(t, r.stdout, "sum:n:n of probe/p_top_0: 5 values, 5 keys")
	if fmt.Sprint(byN) != "map[n=0:0 n=1:1 n=2:2 n=3:3 n=4:4]" {
		t.Errorf("sum:n:n: %v", byN)
	}
	comm := filepath.Base(actionsBin(t, true))
	if got := valueRows(t, r.stdout, "max:n:comm of probe/p_top_0: 5 values, 1 key"); fmt.Sprint(got) != fmt.Sprintf("map[comm=%s:4]", comm) {
		t.Errorf("max:n:comm: %v", got)
	}
	if got := valueRows(t, r.stdout, "min:duration:comm of probe/r_leaf_0: 5 values, 1 key"); got["comm="+comm] <= 0 {
		t.Errorf("min:duration:comm: %v, want a positive duration", got)
	}
	linear := map[string]int{}
	for _, s := range actionSizes {
		linear[fmt.Sprintf("[%d, %d)", s/50*50, s/50*50+50)]++
	}
	sameRows(t, "hist:size:linear=50:key=comm", tableRows(t, r.stdout,
		fmt.Sprintf("hist:size:linear=50:key=comm of probe/p_sized_0, comm=%s (linear, step 50): 13 values, sum %d", comm, sum)), linear)
	// The stack from main: the C library's frames above it vary.
	stacks := tableRows(t, r.stdout, "count:stack of probe/p_leaf_0: 5 hits, 1 key")
	for k, n := range stacks {
		if !strings.HasSuffix(k, ";main;top;mid;leaf") || !strings.HasPrefix(k, "stack=") || n != topCalls {
			t.Errorf("count:stack: %q %d, want a stack ending main;top;mid;leaf, %d hits", k, n, topCalls)
		}
	}
}

// TestActionIntervalClear: with --interval-clear each interval's table
// holds that interval's hits alone (bpftrace's print, then clear): the
// intervals' and the final table's add up to the program's calls,
// exactly, none lost between a table's print and its clearing, and no
// table holds them all.
func TestActionIntervalClear(t *testing.T) {
	t.Parallel()
	const calls = 200000
	r := probe(t, "run", "--interval", "50ms", "--interval-clear", "p:work => count", "--", seqBin(t), "paced", strconv.Itoa(calls))
	if r.code != 0 {
		t.Fatalf("probe run: %v", r)
	}
	tables := regexp.MustCompile(`(?m)^# count of probe/p_work_0: (\d+) hits`).FindAllStringSubmatch(r.stdout, -1)
	intervals := strings.Count(r.stdout, "# interval ")
	sum := 0
	for _, m := range tables {
		n, _ := strconv.Atoi(m[1])
		if n == calls {
			t.Errorf("a table of all %d calls: not cleared", calls)
		}
		sum += n
	}
	if intervals < 2 || len(tables) < 2 || sum != calls {
		t.Errorf("%d intervals, %d tables adding up to %d hits, want 2 or more of each and %d:\n%s", intervals, len(tables), sum, calls, limit(r.stdout))
	}
}

// TestActionInterval: --interval prints every table while the trace goes
// on, adding up, and the final tables after.
func TestActionInterval(t *testing.T) {
	t.Parallel()
	p := startPiped(t, nil, seqBin(t), "loop", "1")
	p.waitStdout(t, "ready\n", 10*time.Second)
	r := probe(t, "attach", "--duration", "1s", "--interval", "200ms", strconv.Itoa(p.pid()), "p:work who=%di:s64 => count max:who")
	if r.code != 0 {
		t.Fatalf("probe attach: %v", r)
	}
	counts := regexp.MustCompile(`(?m)^# interval (\d+): .*\n# count of probe/p_work_0: (\d+) hits`).FindAllStringSubmatch(r.stdout, -1)
	if len(counts) < 3 {
		t.Fatalf("%d interval tables in 1s at 200ms, want 3 or more:\n%s", len(counts), limit(r.stdout))
	}
	last := 0
	for i, m := range counts {
		n, _ := strconv.Atoi(m[2])
		if m[1] != strconv.Itoa(i+1) || n < last {
			t.Errorf("interval %s: %d hits after %d: the tables are numbered in order and add up", m[1], n, last)
		}
		last = n
	}
	final := tableRows(t, r.stdout[strings.LastIndex(r.stdout, "# interval"):], "count of probe/p_work_0:")
	if !strings.Contains(r.stdout, "# max:who of probe/p_work_0:") || final["total"] < last {
		t.Errorf("no final tables, or fewer hits than the last interval's %d:\n%s", last, limit(r.stdout))
	}
	p.in.Close()
	p.wait(t, cmdTimeout)
}

// TestActionPrintf: printf prints its format, as bpftrace's does, at
// every hit and nothing else of the event: entry fields, a return's
// value, comm, in the order of the calls, in-process and stopping; it
// follows tracing off and on; in JSON its lines are comments.
func TestActionPrintf(t *testing.T) {
	comm := filepath.Base(actionsBin(t, false))
	var want []string
	for _, s := range actionSizes {
		want = append(want, fmt.Sprintf("sized %3d|%#x by %s", s, s, comm))
	}
	for i := range topCalls {
		want = append(want, fmt.Sprintf("top -> %d", 9*i))
	}
	for _, i := range []int{0, 1, 2, 6, 7, 8, 9} {
		want = append(want, fmt.Sprintf("tick %d", i))
	}
	probes := []string{
		`p:sized size=%di:s64 => printf("sized %3ld|%#lx by %s\n", size, size, comm)`,
		`r:top $retval:s64 => printf("top -> %d\n", arg1)`,
		`p:tick i=%di:u64 => printf("tick %u\n", i)`, "p:off => traceoff", "p:on => traceon",
	}
	for _, mode := range [][]string{nil, {"--no-inprocess"}} {
		r := runActions(t, false, append(mode, probes...)...)
		var got []string
		for _, l := range strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n") {
			if !strings.HasPrefix(l, "#") {
				got = append(got, l)
			}
		}
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("%v: printed\n%s\nwant\n%s", mode, strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	}
	r := runActions(t, false, "--format", "json", `p:sized size=%di:s64 => printf("%d\n", size)`)
	if n := strings.Count(r.stdout, `{"comment":"100"}`); n != 3 || strings.Contains(r.stdout, `"event"`) {
		t.Errorf("json: %d comments of 100, want 3, and no events:\n%s", n, r.stdout)
	}
}

// TestFetchArgArithmetic: fetch-args worked out from others (issue 39:
// bpftrace's arithmetic) are fields like any other: shown, filtered on,
// counted by, printed; a return's as well; in-process and stopping.
func TestFetchArgArithmetic(t *testing.T) {
	for _, mode := range [][]string{nil, {"--no-inprocess"}} {
		r := runActions(t, false, append(mode,
			"p:sized size=%di:s64 dbl=size*2 if dbl > 100 => count:dbl",
			`r:top r=$retval:s64 n=r/9 rem=r-n*9 => printf("%d %d\n", n, rem)`,
			"p:tick i=%di:u64 sq=i*i-(i<<1):s64 if i < 3")...)
		sameRows(t, "count:dbl", tableRows(t, r.stdout, "count:dbl of probe/p_sized_0: 5 hits, 3 keys"),
			map[string]int{"dbl=110": 1, "dbl=178": 1, "dbl=200": 3})
		var printed []string
		for _, l := range strings.Split(r.stdout, "\n") {
			if regexp.MustCompile(`^\d+ \d+$`).MatchString(l) {
				printed = append(printed, l)
			}
		}
		if strings.Join(printed, ",") != "0 0,1 0,2 0,3 0,4 0" {
			t.Errorf("%v: r/9 and r-n*9 printed %q", mode, printed)
		}
		var ticks []string
		for _, m := range regexp.MustCompile(`p_tick_0: \(tick\+0x0/0x[0-9a-f]+\) i=(\d+) sq=(-?\d+)`).FindAllStringSubmatch(r.stdout, -1) {
			ticks = append(ticks, m[1]+":"+m[2])
		}
		if strings.Join(ticks, ",") != "0:0,1:-1,2:0" {
			t.Errorf("%v: ticks %q, want i*i-(i<<1) of 0, 1, 2", mode, ticks)
		}
	}
}

// TestActionMarks: latency between two probes, as bpftrace's
// @start[tid] = nsecs: top marks its thread's time, and each leaf it
// calls reads the time since, in a histogram and printf, in-process and
// stopping; a mark read that no probe makes is bad input.
func TestActionMarks(t *testing.T) {
	for _, mode := range [][]string{nil, {"--no-inprocess"}} {
		r := runActions(t, false, append(mode, "p:top => mark:t0",
			`p:leaf n=%di:s64 => hist:@t0 printf("leaf %d %d\n", n, @t0)`)...)
		var since []int
		for _, m := range regexp.MustCompile(`(?m)^leaf (\d+) (-?\d+)$`).FindAllStringSubmatch(r.stdout, -1) {
			ns, _ := strconv.Atoi(m[2])
			if m[1] != strconv.Itoa(len(since)) || ns <= 0 || ns > 1e9 {
				t.Errorf("%v: leaf %s, %s ns after top's entry", mode, m[1], m[2])
			}
			since = append(since, ns)
		}
		if len(since) != topCalls || !strings.Contains(r.stdout, fmt.Sprintf("# hist:@t0 of probe/p_leaf_0 (log2): %d values,", topCalls)) {
			t.Errorf("%v: %d leaf lines, want %d, and their histogram:\n%s", mode, len(since), topCalls, r.stdout)
		}
	}
	// Counted alone (which the tracee could count) and read alone.
	r := runActions(t, false, "p:top => mark:t0 count", "p:leaf => hist:@t0")
	if !strings.Contains(r.stdout, fmt.Sprintf("# hist:@t0 of probe/p_leaf_0 (log2): %d values,", topCalls)) {
		t.Errorf("mark:t0 count, hist:@t0: want %d values:\n%s", topCalls, r.stdout)
	}
	r = probe(t, "run", "p:leaf => hist:@t9", "--", actionsBin(t, false))
	if r.code != 2 || !strings.Contains(r.stderr, `bad action "@t9": no probe marks t9 (give one => mark:t9)`) || r.stdout != "" {
		t.Errorf("an unmarked @t9: %v", r)
	}
}
