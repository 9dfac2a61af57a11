package integration

import (
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// Programs people run, from Debian's packages, that nobody here wrote:
// sqlite3 (a database: its CLI on libsqlite3.so.0), python3 (an
// interpreter, with threads; its C API exported from the executable) and
// xz (a compression tool on liblzma.so.5, with two worker threads). Each
// runs a deterministic workload under probe, launched (run) and attached
// in the middle of its work (attach, twice, then detached): function_graph
// on a hot set of the functions it exports, and entry and return probes
// on libc. Each must exit 0 with output byte-identical to an untraced run;
// every call entered returns (entry count == return count, each "{" has
// its "}"), and where the input fixes a count, the count is exact.

// sqlScript is n statements, one a line: inserts and queries whose
// results depend only on the statements before them.
func sqlScript(first, n int) []byte {
	var b strings.Builder
	for i := first; i < first+n; i++ {
		switch {
		case i == 0:
			b.WriteString("CREATE TABLE t(id INTEGER PRIMARY KEY, k INTEGER, v TEXT);\n")
		case i%50 == 49:
			fmt.Fprintf(&b, "SELECT count(*), sum(id), min(v), max(k) FROM t WHERE k BETWEEN %d AND %d;\n", i%1000, i%1000+99)
		case i%500 == 250:
			b.WriteString("SELECT k, count(*) FROM t GROUP BY k ORDER BY count(*) DESC, k LIMIT 3;\n")
		default:
			fmt.Fprintf(&b, "INSERT INTO t(k, v) VALUES(%d, 'row%d');\n", i*7919%1000, i)
		}
	}
	return []byte(b.String())
}

// The libc probes every program gets: malloc's entries and returns.
var mallocSpecs = []string{"p:c/malloc libc:malloc size=%di:u64 => count", "r:c/malloc_ret libc:malloc $retval => count"}

func TestRealSqlite3(t *testing.T) {
	sqlite := debianProgram(t, "sqlite3", "sqlite3")
	lib := libraryOf(t, sqlite, "libsqlite3.so.0")
	const statements = 1500
	script := sqlScript(0, statements)
	plain := runStdin(t, script, sqlite, ":memory:")
	if plain.code != 0 || plain.stderr != "" || strings.Count(plain.stdout, "\n") < statements/50 {
		t.Fatalf("sqlite3 untraced:\n%v", plain)
	}
	// The shell asks sqlite3_complete about every line it reads.
	// strlen is an IFUNC: the probe must land on the implementation the
	// resolver picked, not on the resolver, which runs once at load.
	libcSpecs := append([]string{"p:sq/complete libsqlite3:sqlite3_complete => count",
		"r:sq/step libsqlite3:sqlite3_step rc=$retval:s32 => count",
		"p:c/strlen libc:strlen => count", "r:c/strlen_ret libc:strlen => count"}, mallocSpecs...)
	graph := []string{"--tracer", "function_graph", "--filter",
		"libsqlite3:sqlite3_step,libsqlite3:sqlite3_complete,libsqlite3:sqlite3_prepare_v2,libsqlite3:sqlite3_finalize," +
			"libsqlite3:sqlite3_column_*,libsqlite3:sqlite3_value_*,libsqlite3:sqlite3_bind_*"}

	t.Run("run", func(t *testing.T) {
		ev := filepath.Join(t.TempDir(), "events")
		r := runStdin(t, script, probeBin, append(append([]string{"run", "-o", ev}, libcSpecs...), "--", sqlite, ":memory:")...)
		checkRun(t, "sqlite3 under probe run", r, plain.stdout)
		hits, _ := actionTotals(t, ev)
		wantHits(t, "sqlite3", hits, "sq/complete", statements)
		sameHits(t, "sqlite3", hits, "c/malloc", "c/malloc_ret", statements)
		sameHits(t, "sqlite3", hits, "c/strlen", "c/strlen_ret", statements)
		if hits["sq/step"] < statements {
			t.Errorf("sqlite3_step returned %d times for %d statements", hits["sq/step"], statements)
		}

		g := filepath.Join(t.TempDir(), "graph")
		r = runStdin(t, script, probeBin, append(append([]string{"run", "-o", g}, graph...), "--", sqlite, ":memory:")...)
		checkRun(t, "sqlite3 under function_graph", r, plain.stdout)
		sum := readGraph(t, g)
		if sum.calls["sqlite3_complete"] != statements || sum.calls["sqlite3_step"] < statements {
			t.Errorf("function_graph: %d calls of sqlite3_complete (want %d), %d of sqlite3_step (want at least %d)",
				sum.calls["sqlite3_complete"], statements, sum.calls["sqlite3_step"], statements)
		}
	})

	t.Run("attach", func(t *testing.T) {
		const phase = 500 // statements fed in each phase
		f := startPiped(t, nil, sqlite, ":memory:")
		f.feed(t, sqlScript(0, phase))
		s := attachFor(t, f, lib, "sqlite3_complete", sqlScript(phase, phase), libcSpecs...)
		hits, _ := actionTotals(t, s.events)
		wantHits(t, "sqlite3 attached", hits, "sq/complete", phase)
		sameHits(t, "sqlite3 attached", hits, "c/malloc", "c/malloc_ret", phase)
		sameHits(t, "sqlite3 attached", hits, "c/strlen", "c/strlen_ret", phase)
		s = attachFor(t, f, lib, "sqlite3_complete", sqlScript(2*phase, phase), graph...)
		sum := readGraph(t, s.events)
		if sum.calls["sqlite3_complete"] != phase {
			t.Errorf("function_graph attached: %d calls of sqlite3_complete, want %d", sum.calls["sqlite3_complete"], phase)
		}
		f.feed(t, sqlScript(3*phase, statements-3*phase))
		finishFed(t, f, plain.stdout)
	})
}

// pythonScript: for each line N of its input, four threads compute, the
// main thread calls os.getpid() N times (glibc's getpid, no cache) and
// builds a dict; it prints the results.
const pythonScript = `import os, sys, threading
def fib(n): return n if n < 2 else fib(n-1) + fib(n-2)
def work(i, out):
    out[i] = sum(fib(k) for k in range(16)) + sum(x*x for x in range(5000 * (i+1)))
for line in sys.stdin:
    n = int(line)
    out = [0] * 4
    ts = [threading.Thread(target=work, args=(i, out)) for i in range(4)]
    for t in ts: t.start()
    for t in ts: t.join()
    for _ in range(n): os.getpid()
    d = {str(i): i * i for i in range(n)}
    print(n, out, sum(d.values()), sorted(d)[-3:], flush=True)
`

func pythonInput(ns ...int) []byte {
	var b strings.Builder
	for _, n := range ns {
		fmt.Fprintln(&b, n)
	}
	return []byte(b.String())
}

func TestRealPython(t *testing.T) {
	python := debianProgram(t, "python3", "python3")
	script := filepath.Join(t.TempDir(), "work.py")
	if err := os.WriteFile(script, []byte(pythonScript), 0o644); err != nil {
		t.Fatal(err)
	}
	// -I -S: no user site, no environment, no site module: only the script.
	cmd := []string{python, "-I", "-S", script}
	input := pythonInput(300, 500, 700, 100, 200)
	const getpids = 300 + 500 + 700 + 100 + 200
	plain := runStdin(t, input, cmd[0], cmd[1:]...)
	if plain.code != 0 || plain.stderr != "" || strings.Count(plain.stdout, "\n") != 5 {
		t.Fatalf("python untraced:\n%v", plain)
	}
	libcSpecs := append([]string{"p:c/getpid libc:getpid => count"}, mallocSpecs...)
	graph := []string{"--tracer", "function_graph", "--filter", "PyLong_From*,PyObject_Get*,PyDict_Set*,PyThread_*"}
	graphFn := "PyLong_FromLong"

	t.Run("run", func(t *testing.T) {
		ev := filepath.Join(t.TempDir(), "events")
		r := runStdin(t, input, probeBin, append(append([]string{"run", "-o", ev}, libcSpecs...), append([]string{"--"}, cmd...)...)...)
		checkRun(t, "python under probe run", r, plain.stdout)
		hits, _ := actionTotals(t, ev)
		wantHits(t, "python", hits, "c/getpid", getpids)
		sameHits(t, "python", hits, "c/malloc", "c/malloc_ret", 100)

		g := filepath.Join(t.TempDir(), "graph")
		r = runStdin(t, input, probeBin, append(append([]string{"run", "-o", g}, graph...), append([]string{"--"}, cmd...)...)...)
		checkRun(t, "python under function_graph", r, plain.stdout)
		sum := readGraph(t, g)
		if len(sum.threads) < 2 || sum.calls[graphFn] == 0 {
			t.Errorf("function_graph: calls from %d threads, %d of %s; want several threads and some calls", len(sum.threads), sum.calls[graphFn], graphFn)
		}
	})

	t.Run("attach", func(t *testing.T) {
		f := startPiped(t, nil, cmd[0], cmd[1:]...)
		f.feed(t, pythonInput(300))
		s := attachFor(t, f, libcPath, "getpid", pythonInput(500, 700), libcSpecs...)
		hits, _ := actionTotals(t, s.events)
		wantHits(t, "python attached", hits, "c/getpid", 500+700)
		sameHits(t, "python attached", hits, "c/malloc", "c/malloc_ret", 10)
		s = attachFor(t, f, python, graphFn, pythonInput(100), graph...)
		if sum := readGraph(t, s.events); len(sum.threads) < 2 {
			t.Errorf("function_graph attached: calls from %d threads, want the main thread and workers", len(sum.threads))
		}
		f.feed(t, pythonInput(200))
		finishFed(t, f, plain.stdout)
	})
}

// xzInput is n bytes of text with the repetitions compressors look for,
// the same every run.
func xzInput(n int) []byte {
	r := rand.New(rand.NewSource(7))
	words := make([]string, 400)
	for i := range words {
		w := make([]byte, 2+r.Intn(8))
		for j := range w {
			w[j] = byte('a' + r.Intn(10))
		}
		words[i] = string(w)
	}
	b := make([]byte, 0, n+100)
	for len(b) < n {
		b = append(b, words[r.Intn(len(words))]...)
		b = append(b, " \n"[r.Intn(2)*(r.Intn(6)/5)])
	}
	return b[:n]
}

func TestRealXz(t *testing.T) {
	xz := debianProgram(t, "xz", "xz-utils")
	lib := libraryOf(t, xz, "liblzma.so.5")
	// -1: 1 MiB dictionary and 3 MiB blocks, so -T2 puts two threads to
	// work on 6 MiB.
	args := []string{"-1", "-T2", "-c"}
	input := xzInput(6 << 20)
	plain := runStdin(t, input, xz, args...)
	if plain.code != 0 || plain.stderr != "" || len(plain.stdout) == 0 {
		t.Fatalf("xz untraced:\n%v", plain)
	}
	if back := runStdin(t, []byte(plain.stdout), xz, "-d", "-c"); back.code != 0 || back.stdout != string(input) {
		t.Fatalf("xz -d of xz's own output does not give the input back:\n%v", back)
	}
	// xz makes its stdin and stdout non-blocking when they are pipes: a
	// read or write may fail with EAGAIN and be tried again; the bytes
	// are those of the calls that succeed.
	libcSpecs := append([]string{"p:c/read libc:read fd=%di:s32 => count",
		"r:c/read_ret libc:read n=$retval:s64 => count",
		"r:c/read_ok libc:read n=$retval:s64 if n >= 0 => hist:n",
		"p:c/write libc:write fd=%di:s32 => count",
		"r:c/write_ok libc:write n=$retval:s64 if n >= 0 => hist:n",
		"r:c/write_ret libc:write n=$retval:s64 => count"}, mallocSpecs...)
	graph := []string{"--tracer", "function_graph", "--filter", "liblzma:lzma_*"}

	t.Run("run", func(t *testing.T) {
		ev := filepath.Join(t.TempDir(), "events")
		r := runStdin(t, input, probeBin, append(append([]string{"run", "-o", ev}, libcSpecs...), append([]string{"--", xz}, args...)...)...)
		checkRun(t, "xz under probe run", r, plain.stdout)
		hits, sums := actionTotals(t, ev)
		// Every byte in was read, every byte out written, through libc.
		if sums["c/read_ok"] != int64(len(input)) || sums["c/write_ok"] != int64(len(plain.stdout)) {
			t.Errorf("xz: read returned %d bytes in all (input: %d), write %d (output: %d)",
				sums["c/read_ok"], len(input), sums["c/write_ok"], len(plain.stdout))
		}
		sameHits(t, "xz", hits, "c/read", "c/read_ret", len(input)/(1<<16))
		sameHits(t, "xz", hits, "c/write", "c/write_ret", 1)
		sameHits(t, "xz", hits, "c/malloc", "c/malloc_ret", 10)

		g := filepath.Join(t.TempDir(), "graph")
		// (A fault, should one come, is described with the failure:
		// CI saw xz die of SIGSEGV here once, and only once.)
		r = runCmdStdin(t, []string{"PROBE_DEBUG_FAULTS=1"}, input, probeBin, append(append([]string{"run", "-o", g}, graph...), append([]string{"--", xz}, args...)...)...)
		checkRun(t, "xz under function_graph", r, plain.stdout)
		sum := readGraph(t, g)
		if len(sum.threads) < 2 || sum.calls["lzma_code"] == 0 || sum.calls["lzma_crc64"] == 0 {
			t.Errorf("function_graph: calls from %d threads, %d of lzma_code, %d of lzma_crc64; want the workers' too",
				len(sum.threads), sum.calls["lzma_code"], sum.calls["lzma_crc64"])
		}
	})

	// --args on libc's own read and write (DWARF from libc6-dbg): every
	// read from stdin and write to stdout, their results adding up to
	// the input and the output.
	t.Run("args", func(t *testing.T) {
		js := filepath.Join(t.TempDir(), "calls.json")
		r := runStdin(t, input, probeBin, append([]string{"run", "-o", js, "--format", "json", "--tracer", "function_graph", "--args",
			"--filter", "libc:read,libc:write", "--", xz}, args...)...)
		checkRun(t, "xz under function_graph --args", r, plain.stdout)
		var read, written, calls int64
		for _, e := range readJSONLines(t, js) {
			switch {
			case e.Event == "func_entry" && e.Func == "read" && e.Fields["fd"] != 0.0,
				e.Event == "func_entry" && e.Func == "write" && e.Fields["fd"] != 1.0:
				t.Errorf("%s(%v): want fd 0 for reads, 1 for writes", e.Func, e.Fields)
			case e.Event == "func_entry":
				calls++
			case e.Event == "func_exit":
				n, ok := e.Fields["retval"].(float64)
				if !ok {
					t.Fatalf("%s returned %v: no result", e.Func, e.Fields)
				}
				if n >= 0 && e.Func == "read" {
					read += int64(n)
				} else if n >= 0 {
					written += int64(n)
				}
			}
		}
		if read != int64(len(input)) || written != int64(len(plain.stdout)) || calls < int64(len(input)>>16) {
			t.Errorf("%d calls: read returned %d bytes in all (input: %d), write %d (output: %d)", calls, read, len(input), written, len(plain.stdout))
		}
	})

	// --calls on the same: ltrace's lines of its reads and writes.
	t.Run("calls", func(t *testing.T) {
		out := filepath.Join(t.TempDir(), "calls")
		r := runStdin(t, input, probeBin, append([]string{"run", "-o", out, "--calls", "libc:read", "--calls", "libc:write", "--", xz}, args...)...)
		checkRun(t, "xz under --calls", r, plain.stdout)
		// A failed call says its errno: xz reads its standard input
		// without blocking, and polls on EAGAIN. What a read filled is
		// shown as it holds it.
		line := regexp.MustCompile(`^\[pid \d+\] (read|write)\((\d+), (?:0x[0-9a-f]+|"(?:[^"\\]|\\.)*"), (\d+)\)\s+= (-?\d+)( EAGAIN \(Resource temporarily unavailable\))?$`)
		var read, written int64
		for _, l := range strings.Split(strings.TrimSuffix(readFile(t, out), "\n"), "\n") {
			m := line.FindStringSubmatch(l)
			if m == nil {
				t.Fatalf("not a read or write line: %q", l)
			}
			n, _ := strconv.ParseInt(m[4], 10, 64)
			switch {
			case (n == -1) != (m[5] != ""):
				t.Errorf("%q: want an errno with -1 and only then", l)
			case m[1] == "read" && m[2] != "0", m[1] == "write" && m[2] != "1":
				t.Errorf("%q: want reads of fd 0 and writes to fd 1", l)
			case n >= 0 && m[1] == "read":
				read += n
			case n >= 0:
				written += n
			}
		}
		if read != int64(len(input)) || written != int64(len(plain.stdout)) {
			t.Errorf("reads returned %d bytes (input %d), writes %d (output %d)", read, len(input), written, len(plain.stdout))
		}
	})

	t.Run("attach", func(t *testing.T) {
		f := startPiped(t, nil, xz, args...)
		third := len(input) / 3
		f.feed(t, input[:third])
		s := attachFor(t, f, libcPath, "read", input[third:2*third], libcSpecs...)
		hits, sums := actionTotals(t, s.events)
		// xz waited in poll at the attach and the detach: every byte fed
		// meanwhile came through a read seen whole.
		if n := sums["c/read_ok"]; n != int64(third) {
			t.Errorf("xz attached: reads returned %d bytes, %d were fed", n, third)
		}
		sameHits(t, "xz attached", hits, "c/read", "c/read_ret", third/(1<<16))
		sameHits(t, "xz attached", hits, "c/write", "c/write_ret", 0)
		s = attachFor(t, f, lib, "lzma_code", input[2*third:len(input)-1000], graph...)
		if sum := readGraph(t, s.events); sum.calls["lzma_code"] == 0 {
			t.Errorf("function_graph attached: no call of lzma_code")
		}
		f.feed(t, input[len(input)-1000:])
		finishFed(t, f, plain.stdout)
	})
}

// checkRun checks a "probe run" of a real program: exit 0, nothing on
// stderr, the program's output byte-identical to the untraced run's.
func checkRun(t *testing.T, what string, r result, want string) {
	t.Helper()
	if r.code != 0 || r.stderr != "" {
		t.Fatalf("%s: want exit 0 and no stderr, got\n%v", what, r)
	}
	sameOutput(t, what, r.stdout, want)
	t.Logf("%s: %v", what, r.elapsed.Round(1e6))
}

// TestRealPythonEvalLoop: Debian's CPython runs its bytecode in
// _PyEval_EvalFrameDefault, whose ~230 dispatches are computed gotos
// through a table of its labels, two of them with the opcode bounded on
// another path. It records in the tracee (before, it stopped the thread
// at every call: sorting 3,000 items by a Python key took ~0.1 s of
// stops), with as many calls as a stop at each counts, and python's
// output as untraced.
func TestRealPythonEvalLoop(t *testing.T) {
	python := debianProgram(t, "python3", "python3")
	cmd := []string{python, "-I", "-S", "-c", "print(sum(sorted(range(3000), key=lambda x: -x)[:10]))"}
	plain := runCmd(t, nil, cmd[0], cmd[1:]...)
	if plain.code != 0 || plain.stdout != "29945\n" {
		t.Fatalf("python untraced: %v", plain)
	}
	var calls []int
	for _, mode := range []string{"-v", "--no-inprocess"} {
		out := filepath.Join(t.TempDir(), "trace")
		r := probe(t, append([]string{"run", "-v", mode, "-o", out, "--tracer", "function_graph", "--filter", "_PyEval_EvalFrameDefault", "--"}, cmd...)...)
		if r.code != 0 || r.stdout != plain.stdout {
			t.Fatalf("probe run %s: want exit 0 and %q; got %v", mode, plain.stdout, r)
		}
		if mode == "-v" && !strings.Contains(r.stderr, "probe: function tracer: 1 functions in-process\n") {
			t.Fatalf("_PyEval_EvalFrameDefault stops the thread:\n%s", r.stderr)
		}
		n := 0
		for _, g := range parseGraph(t, readTrace(t, out).section(t, "function_graph")) {
			if strings.HasPrefix(g.text, "_PyEval_EvalFrameDefault()") {
				n++
			}
		}
		calls = append(calls, n)
	}
	if calls[0] != calls[1] || calls[0] < 3000 {
		t.Fatalf("calls of _PyEval_EvalFrameDefault: %d in the tracee, %d with a stop at each; want the same, at least 3,000", calls[0], calls[1])
	}
}
