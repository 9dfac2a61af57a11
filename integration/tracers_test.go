package integration

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Tests of the function tracers (--tracer function, function_graph,
// profile, stack and their flags) on tracees of a known call shape under
// testdata/tracers/. What a trace must hold is worked out from the
// program's shape and arguments (a call tree built here, in Go), never
// from probe; timings and CPU numbers are never checked.

// ---------------------------------------------------------------------
// Tracees.

var tracerTracees struct {
	once sync.Once
	err  error
}

// tracerBin returns the path of tracee name, building all of them on first
// use: shape_O0_pie, shape_O0_nopie, threads, idle (C), exc (C++) and
// gotrace (Go).
func tracerBin(t *testing.T, name string) string {
	t.Helper()
	tracerTracees.once.Do(func() { tracerTracees.err = buildTracerTracees() })
	if tracerTracees.err != nil {
		t.Fatalf("building the tracer tracees: %v", tracerTracees.err)
	}
	return filepath.Join(binDir, "tracers", name)
}

func buildTracerTracees() error {
	out := filepath.Join(binDir, "tracers")
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	src, err := filepath.Abs(filepath.Join("testdata", "tracers"))
	if err != nil {
		return err
	}
	gcc := func(name, file string, v variant) error {
		args := append(v.flags(), "-o", filepath.Join(out, name), filepath.Join(src, file))
		return build(out, "gcc", args...)
	}
	for _, v := range []variant{o0pie, o0nopie} {
		if err := gcc("shape_"+v.String(), "shape.c", v); err != nil {
			return err
		}
	}
	if err := gcc("threads", "threads.c", o0pie); err != nil {
		return err
	}
	if err := gcc("idle", "idle.c", o0pie); err != nil {
		return err
	}
	if err := gcc("libcalls", "libcalls.c", o0pie); err != nil {
		return err
	}
	if err := build(out, "g++", "-O0", "-g", "-Wall", "-fPIE", "-pie", "-o", filepath.Join(out, "exc"), filepath.Join(src, "exc.cpp")); err != nil {
		return err
	}
	if err := build(out, "g++", "-O0", "-g", "-Wall", "-fPIE", "-pie", "-o", filepath.Join(out, "tmpl"), filepath.Join(src, "tmpl.cpp")); err != nil {
		return err
	}
	return build(repoRoot, "go", "build", "-o", filepath.Join(out, "gotrace"), "./integration/testdata/tracers/gotrace")
}

// ---------------------------------------------------------------------
// Call trees: what a program does, and what a trace of it must show.

// call is one call a program makes; the tree of them is its shape.
type call struct {
	fn    string
	lost  bool // abandoned by longjmp or an exception: it never returns
	calls []*call
}

func (c *call) add(fn string, calls ...*call) *call {
	k := &call{fn: fn, calls: calls}
	c.calls = append(c.calls, k)
	return k
}

func leafCall(fn string) *call { return &call{fn: fn} }

// shapeTree is the shape of "shape n r j": main -> top n times -> mid 3
// times each -> leaf twice each; main -> recurse, r+1 calls deep; main ->
// jumper j times -> hop -> hop -> hop, the three hops lost to a longjmp.
func shapeTree(n, r, j int) *call {
	m := &call{fn: "main"}
	for range n {
		top := m.add("top")
		for range 3 {
			top.add("mid", leafCall("leaf"), leafCall("leaf"))
		}
	}
	c := m.add("recurse")
	for range r {
		c = c.add("recurse")
	}
	for range j {
		h := m.add("jumper")
		for range 3 {
			h = h.add("hop")
			h.lost = true
		}
	}
	return m
}

// graphView is what function_graph shows of a call tree under the
// tracer's flags.
type graphView struct {
	filter   []string // --filter: only these are traced (nil: all)
	notrace  []string // --notrace: these and everything below them hidden
	graphFn  string   // --graph-function: only calls inside it
	maxDepth int      // --max-depth (0: no limit)
}

func (v graphView) filtered(fn string) bool { return v.filter == nil || slices.Contains(v.filter, fn) }

// render returns the trace of c as lines of indentation and text,
// " {"-entries, "();"-leaves, "}"-returns and lost returns, and adds the
// returns the tracer loses to *lost: those it shows, and those of calls
// hidden by --notrace.
func (v graphView) render(c *call, lost *int) []string {
	var out []string
	v.walk(c, 0, v.graphFn == "", &out, lost)
	return out
}

func (v graphView) walk(c *call, depth int, inside bool, out *[]string, lost *int) {
	if slices.Contains(v.notrace, c.fn) {
		// Hidden, but its return is still watched to know where the
		// hiding ends: abandoned, that return is lost.
		if c.lost {
			*lost++
		}
		return
	}
	if v.maxDepth > 0 && depth >= v.maxDepth {
		return // and so is everything below
	}
	inside = inside || c.fn == v.graphFn
	if !inside || !v.filtered(c.fn) {
		for _, k := range c.calls {
			v.walk(k, depth, inside, out, lost)
		}
		return
	}
	var kids []string
	for _, k := range c.calls {
		v.walk(k, depth+1, inside, &kids, lost)
	}
	ind := strings.Repeat("  ", depth)
	if len(kids) == 0 && !c.lost {
		*out = append(*out, ind+c.fn+"();")
		return
	}
	*out = append(*out, ind+c.fn+"() {")
	*out = append(*out, kids...)
	if c.lost {
		*lost++
		*out = append(*out, ind+"} /* "+c.fn+": return lost */")
	} else {
		*out = append(*out, ind+"}")
	}
}

// callerCounts is what the function tracer prints of c: "FUNC <-CALLER"
// per traced call, the caller being the calling function whether traced
// or not ("*" for the root's, outside the program's own code).
func callerCounts(c *call, parent string, traced func(string) bool, m map[string]int) map[string]int {
	if traced(c.fn) {
		m[c.fn+" <-"+parent]++
	}
	for _, k := range c.calls {
		callerCounts(k, c.fn, traced, m)
	}
	return m
}

// ---------------------------------------------------------------------
// Trace files.

// traceFile is a file written by probe run -o with tracers: one section
// per "# tracer: NAME" line, and the notes ("# N ...") at the end.
type traceFile struct {
	path     string
	sections map[string][]string // by tracer name: its lines after "# tracer: NAME"
	order    []string            // the tracer names in file order
	notes    []string            // "# 6 returns lost (...)", without "# "
}

var noteRE = regexp.MustCompile(`^# (\d+ .*)$`)

func readTrace(t *testing.T, path string) traceFile {
	t.Helper()
	data := readFile(t, path)
	if !strings.HasSuffix(data, "\n") {
		t.Errorf("trace %s does not end with a newline: ...%q", path, data[max(0, len(data)-100):])
	}
	tf := traceFile{path: path, sections: map[string][]string{}}
	cur := ""
	for i, l := range strings.Split(strings.TrimSuffix(data, "\n"), "\n") {
		if name, ok := strings.CutPrefix(l, "# tracer: "); ok {
			if _, dup := tf.sections[name]; dup {
				t.Fatalf("trace %s: two sections %q", path, name)
			}
			cur = name
			tf.order = append(tf.order, name)
			tf.sections[name] = []string{}
			continue
		}
		if m := noteRE.FindStringSubmatch(l); m != nil {
			tf.notes = append(tf.notes, m[1])
			continue
		}
		if cur == "" {
			t.Fatalf("trace %s: line %d %q comes before any \"# tracer:\" line", path, i+1, l)
		}
		tf.sections[cur] = append(tf.sections[cur], l)
	}
	return tf
}

func (tf traceFile) section(t *testing.T, name string) []string {
	t.Helper()
	s, ok := tf.sections[name]
	if !ok {
		t.Fatalf("trace %s has no \"# tracer: %s\" section (sections: %q)", tf.path, name, tf.order)
	}
	return s
}

const lostText = "returns lost (calls that never returned: longjmp, an exception, a stack not switched back to, a thread gone)"

// wantNotes checks the notes at the end of the trace: the returns lost
// (none when lost is 0), and no other note unless others is set.
func (tf traceFile) wantNotes(t *testing.T, lost int, others bool) {
	t.Helper()
	var want []string
	if lost > 0 {
		want = append(want, fmt.Sprintf("%d %s", lost, lostText))
	}
	var got []string
	for _, n := range tf.notes {
		if others && !strings.HasSuffix(n, lostText) {
			t.Logf("trace note: # %s", n)
			continue
		}
		got = append(got, n)
	}
	if !slices.Equal(got, want) {
		t.Errorf("trace notes %q, want %q (all notes: %q)", got, want, tf.notes)
	}
}

// runTraced runs "probe run -o FILE FLAGS... -- CMD..." and CMD
// untraced, checks that the tracee's stdout, stderr and exit status are
// the same both ways, and returns the trace and the traced run's result.
func runTraced(t *testing.T, flags []string, cmd ...string) (traceFile, result) {
	t.Helper()
	want := runCmd(t, nil, cmd[0], cmd[1:]...)
	ev := filepath.Join(t.TempDir(), "trace")
	args := append([]string{"run", "-o", ev}, flags...)
	args = append(append(args, "--"), cmd...)
	got := probe(t, args...)
	if got.code != want.code || got.stdout != want.stdout || got.stderr != want.stderr {
		t.Fatalf("probe %q:\n%v\nwant the same as untraced:\n%v", args, got, want)
	}
	return readTrace(t, ev), got
}

// ---------------------------------------------------------------------
// function_graph lines.

type graphKind int

const (
	gEntry  graphKind = iota // "f() {"
	gLeaf                    // "f();"
	gExit                    // "}", or "} /* f */" under --graph-time-threshold
	gLost                    // "} /* f: return lost */"
	gSwitch                  // ftrace's context switch block: "A => B"
)

// graphLine is a line of a function_graph trace, its columns parsed.
type graphLine struct {
	line  string
	kind  graphKind
	proc  string // COMM-TID, or COMM-gGOID for a goroutine; for a switch, the one switched to
	from  string // for a switch, the one switched from
	dur   string // the duration column, trimmed
	depth int    // 2 spaces of indentation each
	fn    string // "" for a plain "}"
	text  string // the function column, indentation removed
}

var (
	graphRE   = regexp.MustCompile(`^ *\d+\) +(.+-g?\d+) +\|([^|]*)\|  (.*)$`)
	switchRE  = regexp.MustCompile(`^ *\d+\) +(\S+-g?\d+) +=> +(\S+-g?\d+) *$`)
	dividerRE = regexp.MustCompile(`^ -{42}$`)
	entryRE   = regexp.MustCompile(`^(\S.*)\(\) \{$`)
	leafRE    = regexp.MustCompile(`^(\S.*)\(\);$`)
	lostRE    = regexp.MustCompile(`^\} /\* (\S.*): return lost \*/$`)
	exitRE    = regexp.MustCompile(`^\}(?: /\* (\S.*) \*/)?$`)
)

// parseGraph parses the function_graph section: its header, then graph
// lines and context switch blocks only.
func parseGraph(t *testing.T, section []string) []graphLine {
	t.Helper()
	var gl []graphLine
	bad := 0
	fail := func(i int, why string) {
		if bad++; bad <= 5 {
			t.Errorf("function_graph line %d %q: %s", i+1, section[i], why)
		}
	}
	i := 0
	for i < len(section) && strings.HasPrefix(section[i], "#") {
		i++
	}
	if i != 3 || !strings.HasPrefix(section[1], "# CPU  TASK/PID") {
		t.Errorf("function_graph header: want 3 lines after \"# tracer: function_graph\" (#, # CPU  TASK/PID..., # |...), got %q", section[:i])
	}
	for ; i < len(section); i++ {
		l := section[i]
		if dividerRE.MatchString(l) {
			// A context switch block: divider, "A => B", divider, blank.
			if i+3 >= len(section) || !dividerRE.MatchString(section[i+2]) || section[i+3] != "" {
				fail(i, "not the start of a context switch block (divider, A => B, divider, blank line)")
				continue
			}
			m := switchRE.FindStringSubmatch(section[i+1])
			if m == nil {
				fail(i+1, "not a context switch line CPU) A => B")
				continue
			}
			gl = append(gl, graphLine{line: section[i+1], kind: gSwitch, from: m[1], proc: m[2]})
			i += 3
			continue
		}
		m := graphRE.FindStringSubmatch(l)
		if m == nil {
			fail(i, "not a graph line")
			continue
		}
		g := graphLine{line: l, proc: m[1], dur: strings.TrimSpace(m[2])}
		text := strings.TrimLeft(m[3], " ")
		sp := len(m[3]) - len(text)
		if sp%2 != 0 {
			fail(i, "odd indentation")
		}
		g.depth, g.text = sp/2, text
		if e := entryRE.FindStringSubmatch(text); e != nil {
			g.kind, g.fn = gEntry, e[1]
		} else if e := leafRE.FindStringSubmatch(text); e != nil {
			g.kind, g.fn = gLeaf, e[1]
		} else if e := lostRE.FindStringSubmatch(text); e != nil {
			g.kind, g.fn = gLost, e[1]
		} else if e := exitRE.FindStringSubmatch(text); e != nil {
			g.kind, g.fn = gExit, e[1]
		} else {
			fail(i, "function column is none of \"f() {\", \"f();\", \"}\", \"} /* f */\", \"} /* f: return lost */\"")
			continue
		}
		gl = append(gl, g)
	}
	if bad > 0 {
		t.Fatalf("function_graph: %d bad lines", bad)
	}
	return gl
}

// checkSwitches checks the context switch blocks: each names the thread
// (or goroutine) of the line before it and of the line after it, and one
// stands between two lines exactly when their threads differ.
func checkSwitches(t *testing.T, gl []graphLine) {
	t.Helper()
	errs := 0
	fail := func(format string, args ...any) {
		if errs++; errs <= 5 {
			t.Errorf(format, args...)
		}
	}
	last := ""
	switched := false
	for i, g := range gl {
		if g.kind == gSwitch {
			if last == "" || switched {
				fail("context switch %q follows no line of a thread", g.line)
			} else if g.from != last {
				fail("context switch %q: the line before is of %s", g.line, last)
			}
			if i+1 >= len(gl) || gl[i+1].kind == gSwitch {
				fail("context switch %q is followed by no line of a thread", g.line)
			} else if gl[i+1].proc != g.proc {
				fail("context switch %q: the line after is of %s: %q", g.line, gl[i+1].proc, gl[i+1].line)
			}
			if g.from == g.proc {
				fail("context switch %q from a thread to itself", g.line)
			}
			switched = true
			continue
		}
		if last != "" && !switched && g.proc != last {
			fail("no context switch block between a line of %s and %q", last, g.line)
		}
		last, switched = g.proc, false
	}
	if errs > 5 {
		t.Errorf("... %d context switch errors in all", errs)
	}
}

// byThread returns each thread's (or goroutine's) graph lines in order,
// by the proc column, and the procs in the order of their first line.
func byThread(gl []graphLine) (map[string][]graphLine, []string) {
	m := map[string][]graphLine{}
	var procs []string
	for _, g := range gl {
		if g.kind == gSwitch {
			continue
		}
		if _, ok := m[g.proc]; !ok {
			procs = append(procs, g.proc)
		}
		m[g.proc] = append(m[g.proc], g)
	}
	return m, procs
}

// checkNesting checks one call stack's lines: an entry or a leaf is one
// level deeper than the calls open, every "}" closes the innermost open
// call at that call's depth (a lost return naming it), an entry directly
// followed by its plain return would have been a leaf, and the duration
// column is filled on leaves and returns only. It returns the calls left
// open at the end, outermost first.
func checkNesting(t *testing.T, what string, lines []graphLine) []string {
	t.Helper()
	var open []string
	errs := 0
	fail := func(g graphLine, why string) {
		if errs++; errs <= 5 {
			t.Errorf("%s: %q: %s (open: %q)", what, g.line, why, open[max(0, len(open)-4):])
		}
	}
	for i, g := range lines {
		hasDur := g.kind == gLeaf || g.kind == gExit
		if (g.dur != "") != hasDur {
			fail(g, fmt.Sprintf("duration column %q, want it filled only on leaves and returns", g.dur))
		}
		switch g.kind {
		case gEntry, gLeaf:
			if g.depth != len(open) {
				fail(g, fmt.Sprintf("a call at depth %d with %d calls open", g.depth, len(open)))
			}
			if g.kind == gEntry {
				open = append(open, g.fn)
				if i+1 < len(lines) && lines[i+1].kind == gExit && lines[i+1].fn == "" {
					fail(g, "entry directly followed by its return: should be a leaf \""+g.fn+"();\"")
				}
			}
		case gExit, gLost:
			if len(open) == 0 {
				fail(g, "a return with no call open")
				continue
			}
			if g.depth != len(open)-1 {
				fail(g, fmt.Sprintf("a return at depth %d closing a call at depth %d", g.depth, len(open)-1))
			}
			if g.fn != "" && g.fn != open[len(open)-1] {
				fail(g, fmt.Sprintf("names %s, but the innermost open call is %s", g.fn, open[len(open)-1]))
			}
			open = open[:len(open)-1]
		}
	}
	if errs > 5 {
		t.Errorf("%s: ... %d nesting errors in all", what, errs)
	}
	return open
}

// rendered returns lines as indentation and text, as graphView.render.
func rendered(lines []graphLine) []string {
	out := make([]string, len(lines))
	for i, g := range lines {
		out[i] = strings.Repeat("  ", g.depth) + g.text
	}
	return out
}

// wantGraph checks that got (rendered lines) are exactly want.
func wantGraph(t *testing.T, what string, got, want []string) {
	t.Helper()
	if slices.Equal(got, want) {
		return
	}
	i := 0
	for i < len(got) && i < len(want) && got[i] == want[i] {
		i++
	}
	show := func(ls []string) string {
		lo, hi := max(0, i-5), min(len(ls), i+6)
		var b strings.Builder
		for j := lo; j < hi; j++ {
			mark := "  "
			if j == i {
				mark = "> "
			}
			fmt.Fprintf(&b, "%s%5d |%s\n", mark, j+1, ls[j])
		}
		return b.String()
	}
	t.Errorf("%s: the graph differs from the program's shape at line %d (got %d lines, want %d)\n--- got:\n%s--- want:\n%s",
		what, i+1, len(got), len(want), show(got), show(want))
}

// graphOfOneThread parses a function_graph section of a single-threaded
// tracee, checks its nesting and that it is all one thread's, and returns
// its lines.
func graphOfOneThread(t *testing.T, tf traceFile) []graphLine {
	t.Helper()
	gl := parseGraph(t, tf.section(t, "function_graph"))
	threads, procs := byThread(gl)
	if len(procs) == 0 {
		return nil
	}
	if len(procs) > 1 || len(gl) != len(threads[procs[0]]) {
		t.Fatalf("lines from threads %q and %d context switches, want one thread", procs, len(gl)-len(threads[procs[0]]))
	}
	if open := checkNesting(t, "function_graph", gl); len(open) > 0 {
		t.Errorf("calls never closed: %q", open)
	}
	return gl
}

func countsOf(gl []graphLine) map[string]int {
	m := map[string]int{}
	for _, g := range gl {
		if g.kind == gEntry || g.kind == gLeaf {
			m[g.fn]++
		}
	}
	return m
}

// ---------------------------------------------------------------------
// Tests.

// TestGraphShape: every call of shape under function_graph, exactly as the
// program makes them, longjmp included; the tracee's output and exit
// status are as untraced.
func TestGraphShape(t *testing.T) {
	t.Parallel()
	const n, r, j = 3, 4, 2
	for _, v := range []variant{o0pie, o0nopie} {
		t.Run(v.String(), func(t *testing.T) {
			t.Parallel()
			exe := tracerBin(t, "shape_"+v.String())
			tf, res := runTraced(t, []string{"--tracer", "function_graph"}, exe, "3", "4", "2", "5")
			if want := shapeOut(n, r, j); res.stdout != want || res.code != 5 {
				t.Errorf("tracee stdout %q, exit status %d; want %q, 5", res.stdout, res.code, want)
			}
			if !slices.Equal(tf.order, []string{"function_graph"}) {
				t.Errorf("trace sections %q, want only function_graph", tf.order)
			}
			gl := graphOfOneThread(t, tf)
			if c := graphComm(exe); !strings.HasPrefix(gl[0].proc, c+"-") {
				t.Errorf("proc column %q, want %s-TID", gl[0].proc, c)
			}
			lost := 0
			want := graphView{}.render(shapeTree(n, r, j), &lost)
			wantCounts := map[string]int{"main": 1, "top": n, "mid": 3 * n, "leaf": 6 * n, "recurse": r + 1, "jumper": j, "hop": 3 * j}
			if got := countsOf(gl); !mapsEqual(got, wantCounts) {
				t.Errorf("entries per function %v, want %v", got, wantCounts)
			}
			wantGraph(t, "function_graph", rendered(gl), want)
			if lost != 3*j {
				t.Fatalf("the shape model loses %d returns, want %d", lost, 3*j)
			}
			tf.wantNotes(t, lost, false)
		})
	}
}

// shapeOut is what "shape n r j" prints.
func shapeOut(n, r, j int) string {
	top := 0
	for x := range n {
		top += 12*x + 24 // mid(x)+mid(x+1)+mid(x+2), mid(y) = 4y+4
	}
	return fmt.Sprintf("top=%d recurse=%d jumps=%d\n", top, r*(r+1)/2, 7*j)
}

// graphComm is the comm of exe as function_graph's proc column shows it:
// cut to 7 characters, as ftrace's print_graph_proc does.
func graphComm(exe string) string {
	c := commOf(exe)
	return c[:min(7, len(c))]
}

func mapsEqual(a, b map[string]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// TestGraphFlags: --graph-function, --notrace, --max-depth, --filter and
// --graph-time-threshold select exactly the calls they say.
func TestGraphFlags(t *testing.T) {
	t.Parallel()
	const n, r, j = 2, 3, 2
	for _, tc := range []struct {
		name  string
		flags []string
		view  graphView
	}{
		{"graph-function=mid", []string{"--graph-function", "mid"}, graphView{graphFn: "mid"}},
		{"graph-function=hop", []string{"--graph-function", "hop"}, graphView{graphFn: "hop"}},
		{"notrace=mid", []string{"--notrace", "mid"}, graphView{notrace: []string{"mid"}}},
		{"notrace=hop", []string{"--notrace", "hop"}, graphView{notrace: []string{"hop"}}},
		{"notrace=mi*,recurse", []string{"--notrace", "mi*,recurse"}, graphView{notrace: []string{"mid", "recurse"}}},
		{"max-depth=1", []string{"--max-depth", "1"}, graphView{maxDepth: 1}},
		{"max-depth=2", []string{"--max-depth", "2"}, graphView{maxDepth: 2}},
		{"max-depth=3", []string{"--max-depth", "3"}, graphView{maxDepth: 3}},
		{"filter=top,leaf", []string{"--filter", "top,leaf"}, graphView{filter: []string{"top", "leaf"}}},
		{"filter=main+hop", []string{"--filter", "main", "--filter", "hop"}, graphView{filter: []string{"main", "hop"}}},
		{"graph-function=top+max-depth=2", []string{"--graph-function", "top", "--max-depth", "2"}, graphView{graphFn: "top", maxDepth: 2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			exe := tracerBin(t, "shape_O0_pie")
			flags := append([]string{"--tracer", "function_graph"}, tc.flags...)
			tf, _ := runTraced(t, flags, exe, strconv.Itoa(n), strconv.Itoa(r), strconv.Itoa(j))
			gl := graphOfOneThread(t, tf)
			lost := 0
			want := tc.view.render(shapeTree(n, r, j), &lost)
			wantGraph(t, strings.Join(flags, " "), rendered(gl), want)
			tf.wantNotes(t, lost, false)
		})
	}

	// Under tracing_thresh only returns are printed, "} /* f */" at the
	// call's depth: with 1ns every call that returned.
	t.Run("graph-time-threshold", func(t *testing.T) {
		t.Parallel()
		exe := tracerBin(t, "shape_O0_pie")
		tf, _ := runTraced(t, []string{"--tracer", "function_graph", "--graph-time-threshold", "1ns"}, exe, strconv.Itoa(n), strconv.Itoa(r), strconv.Itoa(j))
		gl := parseGraph(t, tf.section(t, "function_graph"))
		var got []string
		for _, g := range gl {
			if g.kind != gExit || g.fn == "" || g.dur == "" {
				t.Errorf("under --graph-time-threshold, want only \"} /* f */\" lines with a duration, got %q", g.line)
			}
			got = append(got, strings.Repeat("  ", g.depth)+g.text)
		}
		// The returns in the order they happen: post-order of the tree.
		var want []string
		lost := 0
		var post func(c *call, depth int)
		post = func(c *call, depth int) {
			for _, k := range c.calls {
				post(k, depth+1)
			}
			if c.lost {
				lost++
			} else {
				want = append(want, strings.Repeat("  ", depth)+"} /* "+c.fn+" */")
			}
		}
		post(shapeTree(n, r, j), 0)
		wantGraph(t, "--graph-time-threshold 1ns", got, want)
		tf.wantNotes(t, lost, false)
	})
}

var funcLineRE = regexp.MustCompile(`^ *(.+)-(\d+) +\[(\d+)\] +(\d+)\.(\d{6}): (\S+) <-(\S+)$`)

// TestFunctionTracer: one "FUNC <-CALLER" line per call of a traced
// function, the caller being its real caller.
func TestFunctionTracer(t *testing.T) {
	t.Parallel()
	const n, r, j = 3, 4, 2
	all := func(string) bool { return true }
	for _, tc := range []struct {
		name   string
		flags  []string
		traced func(string) bool
	}{
		{"all", nil, all},
		{"filter=leaf", []string{"--filter", "leaf"}, func(fn string) bool { return fn == "leaf" }},
		{"filter=*e*", []string{"--filter", "*e*"}, func(fn string) bool { return strings.Contains(fn, "e") }},
		// Unlike function_graph, the function tracer still traces what a
		// --notrace function calls.
		{"notrace=mid", []string{"--notrace", "mid"}, func(fn string) bool { return fn != "mid" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			exe := tracerBin(t, "shape_O0_pie")
			flags := append([]string{"--tracer", "function"}, tc.flags...)
			tf, _ := runTraced(t, flags, exe, strconv.Itoa(n), strconv.Itoa(r), strconv.Itoa(j))
			if !slices.Equal(tf.order, []string{"function"}) {
				t.Errorf("trace sections %q, want only function", tf.order)
			}
			lines := tf.section(t, "function")
			if len(lines) == 0 || !strings.HasPrefix(lines[0], "#           TASK-PID") {
				t.Fatalf("function trace does not start with the column header: %q", lines[:min(len(lines), 3)])
			}
			got := map[string]int{}
			tids := map[string]bool{}
			for _, l := range lines[1:] {
				m := funcLineRE.FindStringSubmatch(l)
				if m == nil {
					t.Fatalf("not a function tracer line: %q", l)
				}
				if m[1] != commOf(exe) {
					t.Errorf("comm %q, want %q: %q", m[1], commOf(exe), l)
				}
				tids[m[2]] = true
				caller := m[7]
				if m[6] == "main" {
					caller = "*"
				}
				got[m[6]+" <-"+caller]++
			}
			want := callerCounts(shapeTree(n, r, j), "*", tc.traced, map[string]int{})
			if !mapsEqual(got, want) {
				t.Errorf("lines by \"FUNC <-CALLER\":\n %v\nwant\n %v", got, want)
			}
			if len(tids) != 1 {
				t.Errorf("lines of threads %v, want one", tids)
			}
			tf.wantNotes(t, 0, false)
		})
	}
}

// TestGraphException: a C++ exception thrown through two traced frames
// (with destructors run on the way) and caught in a third.
func TestGraphException(t *testing.T) {
	t.Parallel()
	const n = 3
	exe := tracerBin(t, "exc")
	tf, res := runTraced(t, []string{"--tracer", "function_graph"}, exe, strconv.Itoa(n))
	if want := fmt.Sprintf("caught=%d destroyed=%d\n", n*(n-1)/2+100*n, 11*n); res.stdout != want || res.code != 3 {
		t.Errorf("tracee stdout %q, exit status %d; want %q, 3", res.stdout, res.code, want)
	}
	gl := graphOfOneThread(t, tf)
	// main -> catcher -> middle (Guard) -> thrower (Guard) -> throw: the
	// destructors run as the frames unwind, thrower's in thrower's frame,
	// before it is found lost, and middle's after. Names are demangled.
	m := &call{fn: "main"}
	for range n {
		mid := m.add("catcher").add("middle")
		mid.lost = true
		mid.add("Guard::Guard")
		th := mid.add("thrower", leafCall("Guard::Guard"), leafCall("Guard::~Guard"))
		th.lost = true
		mid.add("Guard::~Guard")
	}
	lost := 0
	wantGraph(t, "function_graph", rendered(gl), graphView{}.render(m, &lost))
	tf.wantNotes(t, 2*n, false)
}

// TestDeepRecursion: 10,000 nested calls under the profile and the stack
// tracer at once: every call counted, none lost, the deepest stack is
// every frame of the recursion.
func TestDeepRecursion(t *testing.T) {
	t.Parallel()
	const depth = 10000
	exe := tracerBin(t, "shape_O0_pie")
	tf, res := runTraced(t, []string{"--tracer", "profile,stack", "--filter", "recurse"}, exe, "0", strconv.Itoa(depth), "0")
	if want := shapeOut(0, depth, 0); res.stdout != want {
		t.Errorf("tracee stdout %q, want %q", res.stdout, want)
	}
	if !slices.Equal(tf.order, []string{"profile", "stack"}) {
		t.Errorf("trace sections %q, want profile then stack", tf.order)
	}
	if got, want := parseProfile(t, tf.section(t, "profile")), map[string]int{"recurse": depth + 1}; !mapsEqual(got, want) {
		t.Errorf("profile hits %v, want %v", got, want)
	}
	stacks := parseStack(t, tf.section(t, "stack"))
	if len(stacks) != 1 {
		t.Fatalf("stack reports of %d threads, want 1", len(stacks))
	}
	checkStack(t, stacks[0], depth+1, regexp.MustCompile(`^recurse\+0x[0-9a-f]+/0x[0-9a-f]+$`))
	if stacks[0].rows[0].loc != fmt.Sprintf("recurse+0x0/0x%x", funcSym(t, exe, "recurse").Size) {
		t.Errorf("innermost stack entry at %q, want the entry of recurse", stacks[0].rows[0].loc)
	}
	tf.wantNotes(t, 0, false)
}

// TestStackTracer: the deepest stack of a small run of shape, alone and
// under function_graph.
func TestStackTracer(t *testing.T) {
	t.Parallel()
	exe := tracerBin(t, "shape_O0_pie")
	for _, tracers := range []string{"stack", "function_graph,stack"} {
		t.Run(tracers, func(t *testing.T) {
			t.Parallel()
			tf, _ := runTraced(t, []string{"--tracer", tracers, "--filter", "recurse"}, exe, "1", "5", "1")
			stacks := parseStack(t, tf.section(t, "stack"))
			if len(stacks) != 1 {
				t.Fatalf("stack reports of %d threads, want 1", len(stacks))
			}
			checkStack(t, stacks[0], 6, regexp.MustCompile(`^recurse\+0x[0-9a-f]+/0x[0-9a-f]+$`))
			if tracers != "stack" {
				gl := graphOfOneThread(t, tf)
				lost := 0
				wantGraph(t, "function_graph", rendered(gl), graphView{filter: []string{"recurse"}}.render(shapeTree(1, 5, 1), &lost))
			}
			tf.wantNotes(t, 0, false)
		})
	}
}

var (
	profileRowRE  = regexp.MustCompile(`^  (\S+) +(\d+) +\S+ us +\S+ us +\S+ us +\S+ us *$`)
	stackHeadRE   = regexp.MustCompile(`^#  (.+-\d+): (\d+) bytes$`)
	stackTableRE  = regexp.MustCompile(`^ +Depth +Size +Location +\((\d+) entries\)$`)
	stackRowRE    = regexp.MustCompile(`^ *(\d+)\) +(\d+) +(\d+) +(\S+)$`)
	stackDashesRE = regexp.MustCompile(`^ +-----\s+----\s+--------$`)
)

// parseProfile returns the Hit column of a profile section by function.
func parseProfile(t *testing.T, section []string) map[string]int {
	t.Helper()
	if len(section) < 2 || !strings.HasPrefix(section[0], "  Function ") || !strings.HasPrefix(section[1], "  --------") {
		t.Fatalf("profile does not start with the column header: %q", section[:min(2, len(section))])
	}
	hits := map[string]int{}
	for _, l := range section[2:] {
		m := profileRowRE.FindStringSubmatch(l)
		if m == nil {
			t.Fatalf("not a profile row: %q", l)
		}
		if _, dup := hits[m[1]]; dup {
			t.Errorf("two profile rows for %s", m[1])
		}
		hits[m[1]], _ = strconv.Atoi(m[2])
	}
	return hits
}

// stackReport is one thread's part of the stack tracer's report.
type stackReport struct {
	proc  string
	bytes int
	n     int // the table's "(N entries)"
	rows  []stackRow
}

type stackRow struct {
	index, depth, size int
	loc                string
}

func parseStack(t *testing.T, section []string) []stackReport {
	t.Helper()
	if len(section) == 0 || section[0] != "#" {
		t.Fatalf("stack report does not start with \"#\": %q", section[:min(1, len(section))])
	}
	var rs []stackReport
	for i := 1; i < len(section); i++ {
		l := section[i]
		if m := stackHeadRE.FindStringSubmatch(l); m != nil {
			r := stackReport{proc: m[1]}
			r.bytes, _ = strconv.Atoi(m[2])
			if i+2 >= len(section) {
				t.Fatalf("stack report of %s has no table", r.proc)
			}
			tm := stackTableRE.FindStringSubmatch(section[i+1])
			if tm == nil || !stackDashesRE.MatchString(section[i+2]) {
				t.Fatalf("stack report of %s: want the Depth Size Location table header, got %q", r.proc, section[i+1:i+3])
			}
			r.n, _ = strconv.Atoi(tm[1])
			rs = append(rs, r)
			i += 2
			continue
		}
		m := stackRowRE.FindStringSubmatch(l)
		if m == nil || len(rs) == 0 {
			t.Fatalf("stack report: not a table row: %q", l)
		}
		var row stackRow
		row.index, _ = strconv.Atoi(m[1])
		row.depth, _ = strconv.Atoi(m[2])
		row.size, _ = strconv.Atoi(m[3])
		row.loc = m[4]
		rs[len(rs)-1].rows = append(rs[len(rs)-1].rows, row)
	}
	return rs
}

// checkStack checks one thread's report: entries rows numbered from 0,
// the Depth column strictly decreasing from the thread's total, each
// Size the step to the next Depth (the last one all the rest), every
// location matching loc.
func checkStack(t *testing.T, r stackReport, entries int, loc *regexp.Regexp) {
	t.Helper()
	if r.n != entries || len(r.rows) != entries {
		t.Fatalf("stack of %s: %d rows, \"(%d entries)\", want %d", r.proc, len(r.rows), r.n, entries)
	}
	if r.rows[0].depth != r.bytes {
		t.Errorf("stack of %s: %d bytes, but the first row's Depth is %d", r.proc, r.bytes, r.rows[0].depth)
	}
	errs := 0
	for i, row := range r.rows {
		next := 0
		if i+1 < len(r.rows) {
			next = r.rows[i+1].depth
		}
		var why string
		switch {
		case row.index != i:
			why = fmt.Sprintf("numbered %d", row.index)
		case i+1 < len(r.rows) && next >= row.depth:
			why = fmt.Sprintf("Depth %d not above the next one's, %d", row.depth, next)
		case row.size != row.depth-next:
			why = fmt.Sprintf("Size %d, want Depth minus the next Depth, %d", row.size, row.depth-next)
		case !loc.MatchString(row.loc):
			why = fmt.Sprintf("location %q, want %v", row.loc, loc)
		}
		if why != "" {
			if errs++; errs <= 5 {
				t.Errorf("stack of %s: row %d: %s", r.proc, i, why)
			}
		}
	}
}

// TestGraphThreads: four threads calling at once; each thread's lines are
// its own calls, well nested and complete, and the context switches
// between them are marked.
func TestGraphThreads(t *testing.T) {
	t.Parallel()
	const n = 5
	exe := tracerBin(t, "threads")
	tf, _ := runTraced(t, []string{"--tracer", "function_graph"}, exe, strconv.Itoa(n))
	gl := parseGraph(t, tf.section(t, "function_graph"))
	checkSwitches(t, gl)
	threads, procs := byThread(gl)
	if len(procs) != 5 {
		t.Fatalf("lines of %d threads %q, want 5 (main and 4 workers)", len(procs), procs)
	}
	w := &call{fn: "thread"}
	wk := w.add("worker")
	for range n {
		wk.add("step", leafCall("twig"), leafCall("twig"))
	}
	lost := 0
	wantWorker := graphView{}.render(w, &lost)
	workers := 0
	for _, proc := range procs {
		lines := threads[proc]
		what := "thread " + proc
		if open := checkNesting(t, what, lines); len(open) > 0 {
			t.Errorf("%s: calls never closed: %q", what, open)
		}
		if !strings.HasPrefix(proc, graphComm(exe)+"-") {
			t.Errorf("%s: proc column %q, want %s-TID", what, proc, graphComm(exe))
		}
		if lines[0].fn == "main" {
			wantGraph(t, what+" (main)", rendered(lines), []string{"main();"})
			continue
		}
		workers++
		wantGraph(t, what, rendered(lines), wantWorker)
	}
	if workers != 4 {
		t.Errorf("%d worker threads, want 4", workers)
	}
	tf.wantNotes(t, 0, false)
}

// TestGraphProfileAgree: function_graph and profile on one run count the
// same calls, which are the program's.
func TestGraphProfileAgree(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		bin  string
		args []string
		want map[string]int
		lost int
	}{
		{"shape_O0_pie", []string{"2", "3", "2"}, map[string]int{"main": 1, "top": 2, "mid": 6, "leaf": 12, "recurse": 4, "jumper": 2, "hop": 6}, 6},
		{"threads", []string{"4"}, map[string]int{"main": 1, "thread": 4, "worker": 4, "step": 16, "twig": 32}, 0},
	} {
		t.Run(tc.bin, func(t *testing.T) {
			t.Parallel()
			exe := tracerBin(t, tc.bin)
			tf, _ := runTraced(t, []string{"--tracer", "function_graph,profile"}, append([]string{exe}, tc.args...)...)
			if !slices.Equal(tf.order, []string{"function_graph", "profile"}) {
				t.Errorf("trace sections %q, want function_graph then profile", tf.order)
			}
			graph := countsOf(parseGraph(t, tf.section(t, "function_graph")))
			hits := parseProfile(t, tf.section(t, "profile"))
			if !mapsEqual(graph, hits) {
				t.Errorf("profile hits %v, graph entries %v: want the same", hits, graph)
			}
			if !mapsEqual(graph, tc.want) {
				t.Errorf("graph entries %v, want %v", graph, tc.want)
			}
			tf.wantNotes(t, tc.lost, false)
		})
	}
}

// TestGraphGo: goroutines, a recovered panic, a recursion that grows and
// moves the stack, and GCs, under function_graph. The proc column names
// goroutines (COMM-gGOID), each one call stack wherever it runs: every
// goroutine's calls are exactly the program's.
func TestGraphGo(t *testing.T) {
	t.Parallel()
	const gs, n, depth = 3, 4, 2000
	exe := tracerBin(t, "gotrace")
	tf, res := runTraced(t, []string{"--tracer", "function_graph"}, exe, strconv.Itoa(gs), strconv.Itoa(n), strconv.Itoa(depth))
	if want := fmt.Sprintf("total=%d recovered=%d deep=%d\n", goTotal(gs, n), -gs*(gs-1)/2, goDeep(depth)); res.stdout != want || res.code != 3 {
		t.Errorf("tracee stdout %q, exit status %d; want %q, 3", res.stdout, res.code, want)
	}
	if strings.Contains(res.stderr, "internal error") {
		t.Errorf("probe's stderr: %q", res.stderr)
	}
	gl := parseGraph(t, tf.section(t, "function_graph"))
	checkSwitches(t, gl)
	want := map[string]int{
		"main.main": 1, "main.main.func1": gs, "main.work": gs * n, "main.leaf": 2 * gs * n,
		"main.risky": gs, "main.thrower": gs, "main.risky.func1": gs, "main.deep": depth + 1,
	}
	if got := countsOf(gl); !mapsEqual(got, want) {
		t.Errorf("entries per function %v, want %v", got, want)
	}
	tf.wantNotes(t, gs, true)

	// A goroutine: main.main.func1 -> main.work n times -> main.leaf
	// twice. The main goroutine: main.main -> main.risky -> main.thrower
	// -> the deferred main.risky.func1 (the panic loses thrower), then
	// main.deep; main.main never returns (os.Exit).
	g := &call{fn: "main.main.func1"}
	for range n {
		g.add("main.work", leafCall("main.leaf"), leafCall("main.leaf"))
	}
	lost := 0
	wantG := graphView{}.render(g, &lost)
	m := &call{fn: "main.main"}
	for range gs {
		th := m.add("main.risky").add("main.thrower", leafCall("main.risky.func1"))
		th.lost = true
	}
	c := m.add("main.deep")
	for range depth {
		c = c.add("main.deep")
	}
	wantM := graphView{}.render(m, &lost)
	wantM = wantM[:len(wantM)-1] // main.main's "}"

	goroutines, procs := byThread(gl)
	if len(procs) != gs+1 {
		t.Errorf("lines of %d goroutines %q, want %d", len(procs), procs, gs+1)
	}
	for _, proc := range procs {
		lines := goroutines[proc]
		what := "goroutine " + proc
		open := checkNesting(t, what, lines)
		if !strings.HasPrefix(proc, graphComm(exe)+"-g") {
			t.Errorf("%s: proc column %q, want %s-gGOID", what, proc, graphComm(exe))
		}
		if proc == graphComm(exe)+"-g1" {
			wantGraph(t, what+" (main)", rendered(lines), wantM)
			if !slices.Equal(open, []string{"main.main"}) {
				t.Errorf("%s: calls open at the end %q, want only main.main", what, open)
			}
			continue
		}
		wantGraph(t, what, rendered(lines), wantG)
		if len(open) > 0 {
			t.Errorf("%s: calls never closed: %q", what, open)
		}
	}
}

// goTotal and goDeep are what gotrace computes.
func goTotal(gs, n int) int {
	total := 0
	for range gs {
		for i := range n {
			total += (2*i + 1) + (2*(i+1) + 1)
		}
	}
	return total
}

func goDeep(depth int) int {
	d := 0
	for i := 1; i <= depth; i++ {
		d += i % 256
	}
	return d
}

// startIdle starts the idle tracee and waits until it is ready.
func startIdle(t *testing.T) *bg {
	t.Helper()
	p := startBg(t, nil, tracerBin(t, "idle"))
	p.waitStdout(t, "ready\n", 10*time.Second)
	return p
}

// wantUntraced waits until no thread of pid is traced or stopped.
func wantUntraced(t *testing.T, p *bg) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Second)
	for {
		ok := true
		tids, err := taskIDs(p.pid())
		if err != nil {
			t.Fatalf("pid %d is gone, it should still run: %v", p.pid(), err)
		}
		for _, tid := range tids {
			tp, err1 := tracerPid(p.pid(), tid)
			st, err2 := taskState(p.pid(), tid)
			if err1 != nil || err2 != nil || tp != 0 || st == 't' || st == 'T' {
				ok = false
			}
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("pid %d still traced or stopped:\n%s", p.pid(), threadsReport(p.pid()))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// finishIdle stops idle with SIGUSR1 and checks that it ran correctly.
func finishIdle(t *testing.T, p *bg) {
	t.Helper()
	if p.exited() {
		t.Fatalf("idle died while or after being traced: %v", p.res)
	}
	p.signal(t, syscall.SIGUSR1)
	r := p.wait(t, 10*time.Second)
	if r.code != 0 || r.stdout != "ready\ncalls>0=1 bad=0\n" || r.stderr != "" {
		t.Errorf("idle after tracing: want exit 0 and stdout \"ready\\ncalls>0=1 bad=0\\n\", got\n%v", r)
	}
}

// TestAttachFunctionTracer: attach the function tracer to a running
// process for a second; it goes on unharmed.
func TestAttachFunctionTracer(t *testing.T) {
	t.Parallel()
	p := startIdle(t)
	ev := filepath.Join(t.TempDir(), "trace")
	r := probe(t, "attach", "-o", ev, "--tracer", "function", "--filter", "leaf", "--duration", "1s", strconv.Itoa(p.pid()))
	if r.code != 0 || r.stderr != "" {
		t.Fatalf("probe attach: want exit 0 and no stderr, got\n%v", r)
	}
	if r.elapsed < time.Second {
		t.Errorf("probe attach --duration 1s returned after %v", r.elapsed)
	}
	tf := readTrace(t, ev)
	lines := tf.section(t, "function")
	if len(lines) == 0 || !strings.HasPrefix(lines[0], "#           TASK-PID") {
		t.Fatalf("function trace does not start with the column header: %q", lines[:min(len(lines), 3)])
	}
	for _, l := range lines[1:] {
		m := funcLineRE.FindStringSubmatch(l)
		if m == nil || m[1] != "idle" || m[2] != strconv.Itoa(p.pid()) || m[6] != "leaf" || m[7] != "tick" {
			t.Fatalf("want only lines \"idle-%d ... leaf <-tick\", got %q", p.pid(), l)
		}
	}
	if n := len(lines) - 1; n == 0 {
		t.Errorf("no call of leaf traced in 1s of a loop calling it every millisecond")
	} else {
		t.Logf("%d calls of leaf traced", n)
	}
	tf.wantNotes(t, 0, false)
	wantUntraced(t, p)
	finishIdle(t, p)
}

// TestAttachGraphTracer: the same with function_graph; attached in the
// middle of main's loop, every tick() is nested under no open call; the
// calls in progress at the detach, left open, are counted in a note.
func TestAttachGraphTracer(t *testing.T) {
	t.Parallel()
	p := startIdle(t)
	ev := filepath.Join(t.TempDir(), "trace")
	r := probe(t, "attach", "-o", ev, "--tracer", "function_graph", "--duration", "500ms", strconv.Itoa(p.pid()))
	if r.code != 0 || r.stderr != "" {
		t.Fatalf("probe attach: want exit 0 and no stderr, got\n%v", r)
	}
	tf := readTrace(t, ev)
	gl := parseGraph(t, tf.section(t, "function_graph"))
	// A tick() running when probe attached shows its leaf() alone, one
	// running when it detached its entry alone, or with leaf() entered
	// and not returned; all others are complete.
	var got []string
	for _, g := range gl {
		got = append(got, strings.Repeat("  ", g.depth)+g.text)
	}
	body := strings.Join(got, "\n") + "\n"
	body = strings.TrimPrefix(body, "leaf();\n")
	// The calls left open say how many were in progress at the detach.
	open := 0
	for _, c := range []struct {
		end  string
		open int
	}{{"tick() {\n  leaf();\n", 1}, {"tick() {\n  leaf() {\n", 2}, {"tick() {\n", 1}} {
		if cut, ok := strings.CutSuffix(body, c.end); ok {
			body, open = cut, c.open
			break
		}
	}
	ticks := strings.Count(body, "tick() {\n  leaf();\n}\n")
	if ticks == 0 || body != strings.Repeat("tick() {\n  leaf();\n}\n", ticks) {
		t.Errorf("want tick() { leaf(); } repeated, got:\n%s", limit(body))
	}
	var want []string
	if open > 0 {
		want = []string{fmt.Sprintf("%d calls in progress at the detach (their returns come after it: not in the trace)", open)}
	}
	if !slices.Equal(tf.notes, want) {
		t.Errorf("notes %q, want %q", tf.notes, want)
	}
	wantUntraced(t, p)
	finishIdle(t, p)
}

// TestAttachBrokenPipe: when probe's output is a pipe whose reader goes
// away (probe attach ... | head), the traced process must not pay for
// it: probe detaches and the process goes on.
func TestAttachBrokenPipe(t *testing.T) {
	t.Parallel()
	p := startIdle(t)
	rd, wr, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(probeBin, "attach", "--tracer", "function", "--filter", "leaf", "--duration", "5s", strconv.Itoa(p.pid()))
	var stderr syncBuf
	cmd.Stdout, cmd.Stderr = wr, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	wr.Close()
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-done
	})
	sc := bufio.NewScanner(rd)
	for sc.Scan() && !strings.Contains(sc.Text(), "leaf <-tick") {
	}
	rd.Close() // as head does after its lines
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatalf("probe did not exit within 10s of its output pipe closing")
	}
	t.Logf("probe: exit status %d, stderr %q", exitCode(cmd.ProcessState), stderr.String())
	time.Sleep(100 * time.Millisecond)
	if p.exited() {
		t.Fatalf("the traced process died when probe's output pipe closed: %v", p.res)
	}
	wantUntraced(t, p)
	finishIdle(t, p)
}

// TestTracerBadInput: bad tracer flags are refused with exit status 2 and
// one line naming the bad token, before the tracee runs (run) or with
// the process left as it was (attach).
func TestTracerBadInput(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name     string
		flags    []string
		contains []string
	}{
		{"unknown tracer", []string{"--tracer", "bogus"}, []string{"bogus"}},
		{"unknown tracer in a list", []string{"--tracer", "function_graph,bogus"}, []string{"bogus"}},
		{"filter matching nothing", []string{"--tracer", "function_graph", "--filter", "nomatch*"}, []string{"nomatch*"}},
		{"filter matching nothing, function", []string{"--tracer", "function", "--filter", "leaf,nomatch*"}, []string{"nomatch*"}},
		{"notrace matching nothing", []string{"--tracer", "function_graph", "--notrace", "nomatch*"}, []string{"nomatch*"}},
		{"graph-function matching nothing", []string{"--tracer", "function_graph", "--graph-function", "nomatch*"}, []string{"nomatch*"}},
		{"max-depth with function", []string{"--tracer", "function", "--max-depth", "2"}, []string{"max-depth"}},
		{"function and function_graph", []string{"--tracer", "function,function_graph"}, []string{"function", "function_graph"}},
		{"filter without a tracer", []string{"--filter", "leaf"}, []string{"filter"}},
		{"args without a tracer", []string{"--args"}, []string{"--args"}},
		{"negative max-depth", []string{"--tracer", "function_graph", "--max-depth", "-1"}, []string{"-1"}},
	}
	check := func(t *testing.T, r result, contains []string) {
		t.Helper()
		if r.code != 2 {
			t.Errorf("want exit status 2, got\n%v", r)
		}
		line := oneLine(t, r)
		for _, s := range contains {
			if !strings.Contains(line, s) {
				t.Errorf("stderr %q does not name %q", line, s)
			}
		}
	}
	t.Run("run", func(t *testing.T) {
		t.Parallel()
		exe := tracerBin(t, "shape_O0_pie")
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				args := append(append([]string{"run"}, tc.flags...), "--", exe, "1", "1", "1")
				r := probe(t, args...)
				check(t, r, tc.contains)
				if r.stdout != "" {
					t.Errorf("probe %q: the tracee ran or a trace was written: stdout %q", args, r.stdout)
				}
			})
		}
	})
	t.Run("attach", func(t *testing.T) {
		t.Parallel()
		p := startIdle(t)
		for _, tc := range cases {
			// --duration: should the bad input be taken, probe returns.
			args := append(append([]string{"attach", "--duration", "1s"}, tc.flags...), strconv.Itoa(p.pid()))
			r := probe(t, args...)
			t.Run(tc.name, func(t *testing.T) {
				check(t, r, tc.contains)
				if r.stdout != "" {
					t.Errorf("probe %q: a trace was written: stdout %q", args, r.stdout)
				}
			})
			wantUntraced(t, p)
		}
		finishIdle(t, p)
	})
}

// TestCxxNames: C++ functions are probed by the names the function
// tracers show (demangled, without parameters), free or qualified, with
// or without a module; an overloaded name, which is two functions, is
// refused with their mangled names offered.
func TestCxxNames(t *testing.T) {
	t.Parallel()
	src, _ := filepath.Abs(filepath.Join("testdata", "tracers", "cxxnames.cpp"))
	exe := builtOnceBy(t, "cxxnames", func(exe string) error {
		return build(binDir, "g++", "-O2", "-g", "-Wall", "-o", exe, src)
	})
	out := filepath.Join(t.TempDir(), "trace")
	r := probe(t, "run", "-o", out, "p:twice x=%di", "r:geo::Rect::area $retval", "r:cxxnames:geo::scale $retval", "--", exe, "3")
	if r.code != 0 || r.stdout != "s=34\n" {
		t.Fatalf("probe run: %v", r)
	}
	var got []string
	for _, l := range strings.Split(readFile(t, out), "\n") {
		if i := strings.Index(l, ": "); i >= 0 && !strings.HasPrefix(l, "#") {
			got = append(got, regexp.MustCompile(`\+0x[0-9a-f]+/0x[0-9a-f]+`).ReplaceAllString(l[i+2:], ""))
		}
	}
	want := []string{}
	for i := range 3 {
		want = append(want,
			fmt.Sprintf("p_twice_0: (_Z5twicel) x=0x%x", i),
			fmt.Sprintf("r_geo__Rect__area_0: (main <- _ZNK3geo4Rect4areaEv) arg1=0x%x", 2*i),
			fmt.Sprintf("r_geo__scale_0: (main <- _ZN3geo5scaleEl) arg1=0x%x", 3*i))
	}
	if !slices.Equal(got, want) {
		t.Errorf("events:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	bad := probe(t, "run", "-o", out, "p:over", "--", exe, "3")
	if bad.code != 2 || !strings.Contains(bad.stderr, `unknown symbol "over"`) || !strings.Contains(bad.stderr, "_Z4overl") || !strings.Contains(bad.stderr, "_Z4overd") {
		t.Errorf("p:over (overloaded): want exit 2 naming both mangled names, got %v", bad)
	}
}
