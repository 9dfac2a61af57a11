package integration

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// A -pg -mfentry build (a PIE) starts every function with `call
// *__fentry__@GOTPCREL(%rip)`, a call through memory. Its entries were
// refused a jump ("a branch cannot be covered by the jump"), so under the
// function tracer every call stopped the thread: 12.6 s for 438k calls
// where the build without -mfentry took 0.3 s (issue 38). The detour now
// copies the call: the original return address pushed, then a jmp
// through the same pointer.

// fentryBin builds testdata/fentry/fentry.c with -pg -mfentry, and checks
// that fib starts with the call through memory the tests are about.
// (Without sibling calls: gcc would turn one of fib's two calls of itself
// into a loop, and the program's count would not be its calls.)
func fentryBin(t *testing.T) string {
	t.Helper()
	exe := builtOnce(t, "fentry", filepath.Join("testdata", "fentry", "fentry.c"), "-O2", "-g", "-pg", "-mfentry", "-pthread", "-fPIE", "-pie", "-fno-optimize-sibling-calls")
	r := runCmd(t, nil, "objdump", "-d", "--disassemble=fib", exe)
	if !regexp.MustCompile(`<fib>:\n\s*[0-9a-f]+:\s+ff 15 [0-9a-f ]+\s+call\s+\*0x[0-9a-f]+\(%rip\)`).MatchString(r.stdout) {
		t.Fatalf("fentry's fib does not start with call *disp(%%rip): %v", r)
	}
	return exe
}

// TestFentryInProcess: function_graph over the program built with each
// kind of compiler-placed site, -O2 and -O0, records every entry in the
// tracee, draws the graph the stopping path draws, with fib entered as
// often as the program counts, and the program prints what it prints
// untraced and, built -pg, still writes its gmon.out; with a call the
// same call graph as untraced: the function tracer hooks past the call of
// __fentry__, or of plain -pg's mcount after the prologue, either of which
// reads the real caller (hooked before it, the caller was our trampoline,
// outside the program, and gprof lost every arc into a traced function).
func TestFentryInProcess(t *testing.T) {
	t.Parallel()
	src := filepath.Join("testdata", "fentry", "fentry.c")
	const fentry = " (past the call of __fentry__: 2)"
	for _, kind := range []struct {
		name, flags string
		arcs        bool   // gprof's call graph the same traced
		way         string // where -v says fib and work are hooked
	}{
		{"fentry", "", true, fentry}, // fentryBin's: -pg -mfentry, a PIE
		{"fentry-nopie", "-pg -mfentry -fno-pic -no-pie", true, fentry},
		{"fentry-nop", "-pg -mfentry -mnop-mcount -fno-pic -no-pie", false, ""}, // (no call: no arcs)
		{"patchable", "-fpatchable-function-entry=5", false, ""},
		{"fentry-O0", "-O0 -pg -mfentry -fPIE -pie", true, fentry},
	} {
		t.Run(kind.name, func(t *testing.T) {
			t.Parallel()
			exe := ""
			if kind.flags == "" {
				exe = fentryBin(t)
			} else {
				exe = builtOnce(t, "fentry-"+kind.name, src, fentryFlags(strings.Fields(kind.flags)...)...)
			}
			fentryGraphs(t, exe, strings.Contains(kind.flags, "-pg") || kind.flags == "", kind.arcs, kind.way)
		})
	}
}

// TestFentryDetachUnderLoad: four threads of the -mfentry build check
// every result while probe attaches with function_graph, its entries in
// the tracee, and is interrupted (a thread may be anywhere in a detour,
// the copy of the call through memory included) or killed with SIGKILL;
// they find every result right to the end.
func TestFentryDetachUnderLoad(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	detachUnderLoad(t, fentryBin(t), gmonEnv(dir))
}

// gprofNoise is a call graph's indexes and times; gprofCount a call
// count ("3", "3/3", "3+65670").
var (
	gprofNoise = regexp.MustCompile(`\[\d+\]|\d+\.\d+`)
	gprofCount = regexp.MustCompile(`^\d+([/+]\d+)?$`)
)

// gprofArcs is the arcs of gprof's call graph (-q): the lines with a call
// count ("3/3  work [2]", "3+65670  fib [1]") without the times and
// indexes, sorted, each once: which lines and how often a graph shows
// them depends on the profile's time samples (a caller with time of its
// own gets an entry that repeats its arcs).
func gprofArcs(graph string) string {
	var arcs []string
	for _, line := range strings.Split(graph, "\n") {
		f := strings.Fields(gprofNoise.ReplaceAllString(line, ""))
		if len(f) >= 2 && gprofCount.MatchString(f[len(f)-2]) {
			arcs = append(arcs, f[len(f)-2]+" "+f[len(f)-1])
		}
	}
	slices.Sort(arcs)
	return strings.Join(slices.Compact(arcs), "\n")
}

// TestFentryCxx: C++ built with -pg, plain (hooked past mcount) and with
// -mfentry: classes with a virtual call, a template, std::sort with a
// lambda, and an exception thrown through two traced functions (and a
// destructor run on the way) and caught in a third. In-process and
// stopping, the program checks its own results, prints what it prints
// untraced, each function is entered as often as the program counts,
// the two graphs are the same, and gprof's call graph is the untraced
// run's.
func TestFentryCxx(t *testing.T) {
	t.Parallel()
	src, _ := filepath.Abs(filepath.Join("testdata", "fentry", "pgcxx.cc"))
	for _, kind := range []struct{ name, flags string }{
		{"pg", "-O2 -pg -fPIE -pie"},
		{"fentry", "-O2 -pg -mfentry -fPIE -pie"},
		{"pg-O0", "-O0 -pg -no-pie"},
	} {
		t.Run(kind.name, func(t *testing.T) {
			t.Parallel()
			exe := builtOnceBy(t, "pgcxx-"+kind.name, func(exe string) error {
				return build(binDir, "g++", append([]string{"-g", "-Wall", "-o", exe, src}, strings.Fields(kind.flags)...)...)
			})
			cxxGraphs(t, exe)
		})
	}
}

// cxxName is a function_graph line's call of a function, its name
// without the suffix of a clone gcc made (.constprop.0, .isra.0).
var (
	cxxCallRE  = regexp.MustCompile(`^\s*(.*)\(\)( \{|;)$`)
	cxxCloneRE = regexp.MustCompile(`(\.(constprop|isra|part|cold)\.\d+)+$`)
)

func cxxGraphs(t *testing.T, exe string) {
	dir := t.TempDir()
	env := func(run string) []string { return gmonEnv(filepath.Join(dir, run)) }
	for _, run := range []string{"untraced", "-v", "--no-inprocess"} {
		os.Mkdir(filepath.Join(dir, run), 0o755)
	}
	base := runCmd(t, env("untraced"), exe, "3")
	lines := strings.Split(strings.TrimSuffix(base.stdout, "\n"), "\n")
	if base.code != 0 || len(lines) != 11 || !strings.HasSuffix(lines[0], " ok") {
		t.Fatalf("%s 3: %v", exe, base)
	}
	want := map[string]int{}
	for _, l := range lines[1:] {
		i := strings.LastIndexByte(l, ' ')
		n, err := strconv.Atoi(l[i+1:])
		if err != nil || n == 0 {
			t.Fatalf("%s 3: count line %q", exe, l)
		}
		want[l[:i]] = n
	}
	var shapes []string
	for _, mode := range []string{"-v", "--no-inprocess"} {
		out := filepath.Join(dir, "trace"+mode)
		r := probeEnv(t, env(mode), "run", mode, "-o", out, "--tracer", "function_graph", "--filter", "pg::*", "--", exe, "3")
		if r.code != 0 || r.stdout != base.stdout || mode == "-v" && !regexp.MustCompile(`probe: function tracer: \d+ functions in-process`).MatchString(r.stderr) {
			t.Fatalf("probe run %s: want exit 0, %q and the functions in-process on stderr; got %v", mode, base.stdout, r)
		}
		shape := graphShape(t, readTrace(t, out))
		got := map[string]int{}
		for _, l := range strings.Split(shape, "\n") {
			if m := cxxCallRE.FindStringSubmatch(l); m != nil {
				got[cxxCloneRE.ReplaceAllString(m[1], "")]++
			}
		}
		for fn, n := range want {
			if got[fn] != n {
				t.Errorf("probe run %s: %s entered %d times in the trace, the program counts %d", mode, fn, got[fn], n)
			}
		}
		shapes = append(shapes, shape)
	}
	if shapes[0] != shapes[1] {
		t.Errorf("in-process and stopping graphs differ:\n%s\n%s", limit(shapes[0]), limit(shapes[1]))
	}
	graphs := map[string]string{}
	for _, run := range []string{"untraced", "-v", "--no-inprocess"} {
		files, _ := filepath.Glob(filepath.Join(dir, run, "gmon.*"))
		if len(files) != 1 {
			t.Fatalf("run %s: want one gmon.out, got %v", run, files)
		}
		g := runCmd(t, nil, "gprof", "-b", "-q", exe, files[0])
		if g.code != 0 {
			t.Fatalf("gprof: %v", g)
		}
		graphs[run] = gprofArcs(g.stdout)
	}
	if !strings.Contains(graphs["untraced"], "pg::thrower(int)") || graphs["-v"] != graphs["untraced"] || graphs["--no-inprocess"] != graphs["untraced"] {
		t.Errorf("gprof's call graph, untraced:\n%s\nin-process:\n%s\nstopping:\n%s", graphs["untraced"], graphs["-v"], graphs["--no-inprocess"])
	}
}

// TestFentryDlopen: a library built -pg (past mcount) or -pg -mfentry
// (the call through the GOT at its entry) that the program dlopens after
// probe has attached: entry and return probes on its pglib_fib, pending
// until it is loaded, fire as often as the program counts its calls, the
// results right; after the detach, with the library still loaded, its
// code (and the program's) is its file's bytes again.
func TestFentryDlopen(t *testing.T) {
	t.Parallel()
	for _, kind := range []struct{ name, flags string }{
		{"pg", "-pg"},
		{"fentry", "-pg -mfentry"},
	} {
		t.Run(kind.name, func(t *testing.T) {
			t.Parallel()
			host, lib, untraced, calls := pglibHost(t, t.TempDir(), kind.flags)
			h := startHost(t, host, lib, "3")
			ev := filepath.Join(t.TempDir(), "events")
			p := startProbe(t, "attach", "-o", ev, strconv.Itoa(h.cmd.Process.Pid), "p:libpglib:pglib_fib", "r:libpglib:pglib_fib")
			loadUnder(t, h, p, "probe: r_pglib_fib_0 pending until libpglib is loaded\n", untraced.stdout)
			got := map[string]int{}
			for _, e := range eventsIn(t, ev) {
				got[e.name]++
			}
			if want := map[string]int{"p_pglib_fib_0": calls, "r_pglib_fib_0": calls}; !mapsEqual(got, want) {
				t.Errorf("events %v, want %v (the program's count)", got, want)
			}
		})
	}
}
