package integration

import (
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// reportCalls is probe report's function_graph calls of a recording, one
// line each ("main() {", "  top();"...), with args given to the report.
func reportCalls(t *testing.T, rec string, args ...string) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "report")
	mustProbe(t, append(append([]string{"report", "-o", out}, args...), rec)...)
	var calls []string
	for _, c := range graphColumn(t, out) {
		calls = append(calls, strings.TrimPrefix(c, "  "))
	}
	return strings.Join(calls, "\n")
}

// TestReportViews: uftrace's after-the-fact views of one recording of
// "shape 2 3 0" (main -> top twice -> mid 3 times -> leaf twice;
// main -> recurse 4 deep): selections by function (a filter closing up
// the depths over what it drops, notrace hiding what is under, a graph
// function showing only what is inside), by depth, by time and by
// thread; the call graph; the summary.
func TestReportViews(t *testing.T) {
	t.Parallel()
	exe := tracerBin(t, "shape_O0_pie")
	rec := filepath.Join(t.TempDir(), "trace.bin")
	mustProbe(t, "record", "-o", rec, "--tracer", "function_graph", "--", exe, "2", "3", "0")

	mids := strings.Repeat("mid();\n", 6)
	tops := "top() {\n" + strings.Repeat("  mid() {\n    leaf();\n    leaf();\n  }\n", 3) + "}"
	recurse := "recurse() {\n  recurse() {\n    recurse() {\n      recurse();\n    }\n  }\n}"
	indent := func(s string) string { return "  " + strings.ReplaceAll(s, "\n", "\n  ") }
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--filter", "mid"}, strings.TrimSuffix(mids, "\n")},
		{[]string{"--filter", "main", "--filter", "leaf"}, "main() {\n" + strings.Repeat("  leaf();\n", 12) + "}"},
		{[]string{"--notrace", "top"}, "main() {\n" + indent(recurse) + "\n}"},
		{[]string{"--graph-function", "recurse"}, recurse},
		{[]string{"--graph-function", "top", "--depth", "2"}, "top() {\n  mid();\n  mid();\n  mid();\n}\ntop() {\n  mid();\n  mid();\n  mid();\n}"},
		{[]string{"--depth", "1"}, "main();"},
		{[]string{"--max-depth", "2"}, "main() {\n  top();\n  top();\n  recurse();\n}"},
	} {
		if got := reportCalls(t, rec, c.args...); got != c.want {
			t.Errorf("report %q:\n%s\nwant\n%s", c.args, got, c.want)
		}
	}
	full := reportCalls(t, rec)
	if want := "main() {\n" + indent(tops) + "\n" + indent(tops) + "\n" + indent(recurse) + "\n}"; full != want {
		t.Fatalf("report:\n%s\nwant\n%s", full, want)
	}

	// --time-range from the second top's entry on: main, entered
	// before, is left out, the rest closes up to depth 0.
	js := filepath.Join(t.TempDir(), "trace.json")
	mustProbe(t, "report", "--format", "json", "-o", js, rec)
	var tops2 []int64
	for _, e := range readJSONLines(t, js) {
		if e.Event == "func_entry" && e.Func == "top" {
			tops2 = append(tops2, e.Time)
		}
	}
	if len(tops2) != 2 {
		t.Fatalf("%d entries of top in the JSON, want 2", len(tops2))
	}
	from := fmt.Sprintf("%d.%09d~", tops2[1]/1e9, tops2[1]%1e9)
	if got, want := reportCalls(t, rec, "--time-range", from), tops+"\n"+recurse; got != want {
		t.Errorf("report --time-range %s:\n%s\nwant\n%s", from, got, want)
	}
	// The same, up to the first top's entry, as a time since the start:
	// main alone (its first record starts the clock).
	if got := reportCalls(t, rec, "--time-range", "~0ns", "--depth", "1"); got != "main();" {
		t.Errorf("report --time-range ~0ns: %q, want main alone", got)
	}

	// The call graph, times aside.
	graph := mustProbe(t, "report", "--format", "graph", rec).stdout
	graph = regexp.MustCompile(`(?m)^ +[0-9]+\.[0-9]{3} (us|ms| s) :`).ReplaceAllString(graph, "TIME :")
	wantGraph := `# Function Call Graph for 'shape_O0_pie'
========== FUNCTION CALL GRAPH ==========
# TOTAL TIME   FUNCTION
TIME : (1) shape_O0_pie
TIME : (1) main
TIME :  +-(2) top
TIME :  | (6) mid
TIME :  | (12) leaf
             :  |
TIME :  +-(1) recurse
TIME :    (1) recurse
TIME :    (1) recurse
TIME :    (1) recurse
`
	if graph != wantGraph {
		t.Errorf("report --format graph:\n%s\nwant\n%s", graph, wantGraph)
	}
	// Live, the same graph.
	g := filepath.Join(t.TempDir(), "g")
	live := mustProbe(t, "run", "--tracer", "function_graph", "--format", "graph", "-o", g, "--", exe, "2", "3", "0")
	liveGraph := regexp.MustCompile(`(?m)^ +[0-9]+\.[0-9]{3} (us|ms| s) :`).ReplaceAllString(readFile(t, g), "TIME :")
	if live.stdout != "top=60 recurse=6 jumps=0\n" || liveGraph != wantGraph {
		t.Errorf("shape under --format graph: %v\n%s", live, liveGraph)
	}

	// uftrace's report: the profile tracer's table of the recording,
	// whole and selected; the self times add up to main's, the whole.
	for _, c := range []struct {
		args []string
		want string
	}{
		{nil, "leaf 12, main 1, mid 6, recurse 4, top 2"},
		{[]string{"--filter", "mid"}, "mid 6"},
		{[]string{"--graph-function", "recurse"}, "recurse 4"},
	} {
		table := mustProbe(t, append(append([]string{"report", "--format", "profile"}, c.args...), rec)...).stdout
		hits, total, self := profileRows(t, table)
		if got := strings.Join(hits, ", "); got != c.want {
			t.Errorf("report --format profile %q: hits %s, want %s\n%s", c.args, got, c.want, table)
		}
		if c.args == nil && (self < total["main"]-3 || self > total["main"]+3) {
			t.Errorf("report --format profile: the self times add up to %d ns, main took %d ns\n%s", self, total["main"], table)
		}
	}

	info := mustProbe(t, "report", "--info", rec).stdout
	for _, want := range []string{
		"# command:       " + exe + " 2 3 0\n",
		"# tracers:       function_graph\n",
		"# records:       50 (whole): 25 entries, 25 returns, 0 returns lost, 0 probe events\n",
		"# threads:       1: shape_O0_pie-",
		"# functions:     5: leaf 12, mid 6, recurse 4, top 2, main 1\n",
		"(launched)\n",
	} {
		if !strings.Contains(info, want) {
			t.Errorf("report --info has no %q:\n%s", want, info)
		}
	}
}

// TestReportThreads: --tid keeps one thread's calls of a recording of
// four.
func TestReportThreads(t *testing.T) {
	t.Parallel()
	exe := tracerBin(t, "threads")
	rec := filepath.Join(t.TempDir(), "trace.bin")
	mustProbe(t, "record", "-o", rec, "--tracer", "function_graph", "--filter", "worker,step,twig", "--", exe, "2")
	js := filepath.Join(t.TempDir(), "all.json")
	mustProbe(t, "report", "--format", "json", "-o", js, rec)
	tids := map[int]int{}
	for _, e := range readJSONLines(t, js) {
		if e.Event == "func_entry" {
			tids[e.Tid]++
		}
	}
	if len(tids) != 4 {
		t.Fatalf("calls of %d threads, want 4: %v", len(tids), tids)
	}
	for tid, n := range tids {
		one := filepath.Join(t.TempDir(), "one.json")
		mustProbe(t, "report", "--format", "json", "-o", one, "--tid", strconv.Itoa(tid), rec)
		got := 0
		for _, e := range readJSONLines(t, one) {
			if e.Event == "func_entry" {
				if e.Tid != tid {
					t.Fatalf("--tid %d: an entry of thread %d", tid, e.Tid)
				}
				got++
			}
		}
		if got != n || n != 1+2+4 {
			t.Errorf("--tid %d: %d entries, want %d (1 worker, 2 steps, 4 twigs)", tid, got, n)
		}
	}
}

// TestReportNames: C++ template arguments are elided in a report, as
// uftrace shows them, and kept with --full-names.
func TestReportNames(t *testing.T) {
	t.Parallel()
	exe := tracerBin(t, "tmpl")
	rec := filepath.Join(t.TempDir(), "trace.bin")
	mustProbe(t, "record", "-o", rec, "--tracer", "function_graph", "--filter", "Box*", "--filter", "lookup*", "--", exe)
	if got, want := reportCalls(t, rec), "lookup<...>();\nBox<...>::get();\nBox<...>::operator<();\nBox<...>::get();"; got != want {
		t.Errorf("report:\n%s\nwant\n%s", got, want)
	}
	want := "lookup<int, Box<int> >();\nBox<int>::get();\nBox<std::pair<int, long> >::operator<();\nBox<std::pair<int, long> >::get();"
	if got := reportCalls(t, rec, "--full-names"); got != want {
		t.Errorf("report --full-names:\n%s\nwant\n%s", got, want)
	}
	// A name as the report shows it selects (every function it stands
	// for), as a full one does (its own).
	for glob, want := range map[string]string{"Box<...>::get": "Box<...>::get();\nBox<...>::get();", "Box<int>::get": "Box<...>::get();"} {
		if got := reportCalls(t, rec, "--filter", glob); got != want {
			t.Errorf("report --filter %q: %q, want %q", glob, got, want)
		}
	}
}

// TestReportBadInput: a bad selection is refused with exit status 2 and
// one line naming it.
func TestReportBadInput(t *testing.T) {
	t.Parallel()
	exe := tracerBin(t, "shape_O0_pie")
	dir := t.TempDir()
	rec := filepath.Join(dir, "trace.bin")
	mustProbe(t, "record", "-o", rec, "--tracer", "function_graph", "--", exe, "1", "1", "0")
	fn := filepath.Join(dir, "function.bin")
	mustProbe(t, "record", "-o", fn, "--tracer", "function", "--", exe, "1", "1", "0")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--tid", "x1", rec}, `"x1"`},
		{[]string{"--time-range", "soon", rec}, `"soon"`},
		{[]string{"--time-range", "12x~", rec}, `"12x"`},
		{[]string{"--depth", "-1", rec}, "-1"},
		{[]string{"--info", "--format", "json", rec}, "--info"},
		{[]string{"--format", "graph", fn}, "--format graph"},
		{[]string{"--format", "profile", fn}, "--format profile"},
		{[]string{"--filter", "nosuch", rec}, `"nosuch"`},
		{[]string{"--notrace", "lea*", "--graph-function", "nosuch*", rec}, `"nosuch*"`},
		{[]string{"--tid", "99999999", rec}, "99999999"},
		{[]string{"--time-range", "2s~1s", rec}, "--time-range"},
		{[]string{"--depth", "deep", rec}, `--depth "deep"`},
		{[]string{rec, fn}, fn},
	} {
		r := probe(t, append([]string{"report"}, c.args...)...)
		if r.code != 2 || !strings.Contains(oneLine(t, r), c.want) || r.stdout != "" {
			t.Errorf("report %q: want exit 2 and one line naming %s, got\n%v", c.args, c.want, r)
		}
	}
}

// profileRows reads the profile tracer's table: "FUNC HITS" for each
// function, sorted; each one's time, ns; the self times added up.
func profileRows(t *testing.T, table string) (hits []string, total map[string]int64, self int64) {
	t.Helper()
	ns := func(us string) int64 {
		whole, frac, _ := strings.Cut(us, ".")
		w, _ := strconv.ParseInt(whole, 10, 64)
		f, _ := strconv.ParseInt((frac + "000")[:3], 10, 64)
		return w*1000 + f
	}
	total = map[string]int64{}
	row := regexp.MustCompile(`(?m)^  (\S+) +(\d+)    ([0-9.]+) us +[0-9.]+ us +[0-9.]+ us +([0-9.]+) us *$`)
	for _, m := range row.FindAllStringSubmatch(table, -1) {
		hits = append(hits, m[1]+" "+m[2])
		total[m[1]] = ns(m[3])
		self += ns(m[4])
	}
	if !strings.HasPrefix(table, "# tracer: profile\n") {
		t.Errorf("not a profile table:\n%s", table)
	}
	slices.Sort(hits)
	return hits, total, self
}
