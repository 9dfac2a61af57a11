package integration

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// Plain -pg calls mcount after the prologue, which reads the function's
// caller where the call left it (x86-64: 8(%rbp); arm64: x30, saved at
// [x29, #8]). The function tracer hooks such a function past that call,
// seeing it through its frame as at its entry: hooked at the entry, the
// caller mcount read was our trampoline, outside the program, and the
// program's gmon.out lost every arc into a traced function (on arm64
// until now: "gmon.out file is missing call-graph data").

// fentryFlags are fentry.c's flags, and more.
func fentryFlags(more ...string) []string {
	return append([]string{"-O2", "-g", "-pthread", "-fno-optimize-sibling-calls"}, more...)
}

// TestPgInProcess: function_graph over fentry.c built plain -pg (PIE and
// not, -O2 and -O0, and with frames over 512 bytes) hooks fib and work
// past the call of mcount, records
// every entry in the tracee, draws the graph the stopping path draws,
// with fib entered as often as the program counts, and the program
// prints what it prints untraced and writes the gmon.out it writes
// untraced: the same arcs, counted as often.
func TestPgInProcess(t *testing.T) {
	t.Parallel()
	src := filepath.Join("testdata", "fentry", "fentry.c")
	for _, kind := range []struct{ name, flags string }{
		{"pg", "-pg -fPIE -pie"},
		{"pg-nopie", "-pg -no-pie"},
		{"pg-O0", "-O0 -pg -no-pie"},
		// Frames over 512 bytes: on arm64 gcc lowers sp first (`sub
		// sp, sp, #640; stp x29, x30, [sp]`; at -O0, 5040 bytes: `mov
		// x12, #5056; sub sp, sp, x12`), hooked at the entry before.
		{"pg-bigframe", "-pg -fPIE -pie -DFRAME_BYTES=600"},
		{"pg-bigframe-O0", "-O0 -pg -no-pie -DFRAME_BYTES=5000"},
	} {
		t.Run(kind.name, func(t *testing.T) {
			t.Parallel()
			exe := builtOnce(t, "fentry-"+kind.name, src, fentryFlags(strings.Fields(kind.flags)...)...)
			fentryGraphs(t, exe, true, true, " (past the call of mcount: 2)")
		})
	}
}

// TestPgHookedWay: -v says where fib and work of the plain -pg build are
// hooked with --args: past the call of mcount on x86-64 (mcount keeps
// the arguments' registers), and at the entry, before it, on arm64
// (_mcount takes x0): there gmon.out loses their arcs, which -v tells.
func TestPgHookedWay(t *testing.T) {
	t.Parallel()
	exe := builtOnce(t, "fentry-pg", filepath.Join("testdata", "fentry", "fentry.c"), fentryFlags("-pg", "-fPIE", "-pie")...)
	way := map[string]string{"amd64": "past the call of mcount: 2", "arm64": "at the entry, before the call of mcount: 2"}[runtime.GOARCH]
	r := probeEnv(t, gmonEnv(t.TempDir()), "run", "-v", "--args", "-o", os.DevNull, "--tracer", "function_graph", "--filter", "fib,work", "--", exe, "1", "5")
	if want := "probe: function tracer: 2 functions in-process (" + way + ")\n"; r.code != 0 || r.stdout != "sum=5 calls=15\n" || !strings.Contains(r.stderr, want) {
		t.Fatalf("probe run -v --args: want exit 0, the program's output and %q on stderr; got %v", want, r)
	}
}

// gmonEnv has the -pg program write its gmon.out into dir
// (gmon.out.PID), not into the test's directory.
func gmonEnv(dir string) []string { return []string{"GMON_OUT_PREFIX=" + filepath.Join(dir, "gmon")} }

// fentryGraphs runs exe untraced, then under function_graph in-process
// and stopping, and compares (gmon: it writes a gmon.out each run; arcs:
// whose arcs, caller, callee and count, must be the untraced run's; way:
// where -v says fib and work are hooked, if not at their first
// instruction).
func fentryGraphs(t *testing.T, exe string, gmon, arcs bool, way string) {
	dir := t.TempDir()
	env := func(run string) []string { return gmonEnv(filepath.Join(dir, run)) }
	for _, run := range []string{"untraced", "-v", "--no-inprocess"} {
		os.Mkdir(filepath.Join(dir, run), 0o755)
	}
	// (Each call stops the thread twice without in-process hooks: a
	// round of fib(20)'s 21,891 calls is minutes under the arm64 guest's
	// emulation.)
	args := map[string][]string{"amd64": {"3"}, "arm64": {"1", "15"}}[runtime.GOARCH]
	base := runCmd(t, env("untraced"), exe, args...)
	m := regexp.MustCompile(`^sum=\d+ calls=(\d+)\n$`).FindStringSubmatch(base.stdout)
	if base.code != 0 || m == nil {
		t.Fatalf("%s %v: %v", exe, args, base)
	}
	calls, _ := strconv.Atoi(m[1])
	var shapes []string
	for _, mode := range []string{"-v", "--no-inprocess"} {
		out := filepath.Join(dir, "trace"+mode)
		run := append([]string{"run", mode, "-o", out, "--ring-size", "65536", "--tracer", "function_graph", "--filter", "fib,work", "--", exe}, args...)
		r := probeEnv(t, env(mode), run...)
		paths := "probe: function tracer: 2 functions in-process" + way + "\n"
		if r.code != 0 || r.stdout != base.stdout || mode == "-v" && !strings.Contains(r.stderr, paths) {
			t.Fatalf("probe run %s: want exit 0, %q and %q on stderr; got %v", mode, base.stdout, paths, r)
		}
		shape := graphShape(t, readTrace(t, out))
		if n := strings.Count(shape, "fib() {") + strings.Count(shape, "fib();"); n != calls {
			t.Errorf("probe run %s: fib entered %d times in the trace, the program counts %d", mode, n, calls)
		}
		shapes = append(shapes, shape)
	}
	if shapes[0] != shapes[1] {
		t.Errorf("in-process and stopping graphs differ:\n%s\n%s", limit(shapes[0]), limit(shapes[1]))
	}
	if !gmon {
		return
	}
	graphs := map[string]string{}
	for _, run := range []string{"untraced", "-v", "--no-inprocess"} {
		files, _ := filepath.Glob(filepath.Join(dir, run, "gmon.*"))
		if len(files) != 1 {
			t.Fatalf("run %s: want one gmon.out, got %v", run, files)
		}
		if arcs {
			graphs[run] = gmonArcs(t, files[0])
		}
	}
	if arcs && (graphs["untraced"] == "" || graphs["-v"] != graphs["untraced"] || graphs["--no-inprocess"] != graphs["untraced"]) {
		t.Errorf("gmon.out's arcs (caller+offset, callee+offset, count), untraced:\n%s\nin-process:\n%s\nstopping:\n%s", graphs["untraced"], graphs["-v"], graphs["--no-inprocess"])
	}
}

// TestPgDetachUnderLoad: four threads of the plain -pg build (and one
// with frames over 512 bytes) check
// every result while probe attaches with function_graph, hooked past the
// call of mcount, through the frame, and is interrupted (a thread may be
// anywhere in a record stub or its hook) or killed with SIGKILL, twenty
// times (eight under the arm64 guest's emulation); the threads find
// every result right to the end.
func TestPgDetachUnderLoad(t *testing.T) {
	t.Parallel()
	for _, kind := range []struct{ name, flags string }{
		{"pg", "-pg -fPIE -pie"},
		{"pg-bigframe", "-pg -fPIE -pie -DFRAME_BYTES=600"},
	} {
		t.Run(kind.name, func(t *testing.T) {
			t.Parallel()
			exe := builtOnce(t, "fentry-"+kind.name, filepath.Join("testdata", "fentry", "fentry.c"), fentryFlags(strings.Fields(kind.flags)...)...)
			detachUnderLoadN(t, map[string]int{"amd64": 20, "arm64": 8}[runtime.GOARCH], exe, gmonEnv(t.TempDir()))
		})
	}
}

// gmonArcs is the call graph arcs of gmon.out file path, one line each:
// caller and callee as offsets from the start of the profiled text (its
// histogram's low_pc: a PIE's is 0 or where it was loaded), and the
// count; sorted.
// glibc writes a header ("gmon", a version, 12 spare bytes), then
// records, each a tag byte: 0 a histogram (low_pc, high_pc, a 4-byte
// bin count, rate, 15+1 bytes of dimension, then 2-byte bins), 1 an arc
// (from_pc, self_pc, a 4-byte count), 2 basic-block counts (none here).
func gmonArcs(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) < 20 || string(b[:4]) != "gmon" {
		t.Fatalf("%s: not a gmon.out file", path)
	}
	le := binary.LittleEndian
	var low uint64
	hist := false
	var arcs []string
	for b = b[20:]; len(b) > 0; {
		switch tag := b[0]; {
		case tag == 0 && len(b) >= 41:
			low, hist = le.Uint64(b[1:]), true
			b = b[min(len(b), 41+2*int(le.Uint32(b[17:]))):]
		case tag == 1 && len(b) >= 21:
			from, self, n := le.Uint64(b[1:]), le.Uint64(b[9:]), le.Uint32(b[17:])
			arcs = append(arcs, fmt.Sprintf("%#x %#x %d", from-low, self-low, n))
			b = b[21:]
		default:
			t.Fatalf("%s: record %d with %d bytes left", path, tag, len(b))
		}
	}
	if !hist {
		t.Fatalf("%s: no histogram", path)
	}
	slices.Sort(arcs)
	return strings.Join(arcs, "\n")
}
