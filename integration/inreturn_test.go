package integration

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// The tests of returns hooked in the tracee (probe/inreturn.go): return
// probes and function_graph whose entries record in-process hook the
// return there too, and the trampoline records it. ret.c's modes make
// returns that a wrong hook would send astray: threads, longjmp, a fork
// three calls deep.

func retBin(t *testing.T) string {
	t.Helper()
	// -O0: every call stays a call, and every entry takes a jmp.
	return builtOnce(t, "ret", filepath.Join("testdata", "inprocess", "ret.c"), "-O0", "-g", "-Wall", "-pthread")
}

// runRet runs probe run -v with args on ret, checks that ret printed and
// exited as untraced and that every probe named in inProcess records
// in-process, and returns the trace.
func runRet(t *testing.T, args []string, inProcess []string, retArgs ...string) string {
	t.Helper()
	exe := retBin(t)
	want := runCmd(t, nil, exe, retArgs...)
	out := filepath.Join(t.TempDir(), "trace")
	r := probe(t, append(append(append([]string{"run", "-v", "-o", out}, args...), "--", exe), retArgs...)...)
	if r.code != want.code || r.stdout != want.stdout {
		t.Fatalf("probe %v -- ret %v: %v\nwant exit %d and stdout %q", args, retArgs, r, want.code, want.stdout)
	}
	for _, p := range inProcess {
		want := "probe: probe/" + p + ": in-process\n"
		if strings.HasPrefix(p, "probe: ") {
			want = p // a whole line of -v
		}
		if !strings.Contains(r.stderr, want) {
			t.Fatalf("probe %v: want %q on stderr:\n%s", args, want, r.stderr)
		}
	}
	trace, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	return string(trace)
}

// TestInProcessReturnsExact: 8 threads x 100,002 calls (outer and the two
// inner calls it makes), entry and return probes: every call's entry
// and return recorded, none lost at the default ring size, each return
// value the one its call computed, in each thread's order; and the same
// under function_graph.
func TestInProcessReturnsExact(t *testing.T) {
	t.Parallel()
	const threads = 8
	iters := map[string]int{"amd64": 33334, "arm64": 1000}[runtime.GOARCH] // (TCG)
	n := fmt.Sprint(iters)
	trace := runRet(t, []string{"p:outer a=%di", "r:outer $retval", "r:inner $retval"},
		[]string{"p_outer_0", "r_outer_0", "r_inner_0"}, "threads", "8", n)
	if strings.Contains(trace, "lost") {
		t.Fatalf("lost records:\n%s", grepLines(trace, "lost"))
	}
	type state struct {
		a      int64
		inners int
	}
	per := map[string]*state{}
	counts := map[string]int{}
	// By hand, a line at a time: a million events, read under -race.
	for line := range strings.SplitSeq(trace, "\n") {
		f := strings.Fields(line)
		if len(f) < 6 || strings.HasPrefix(line, "#") {
			continue
		}
		task, name, arg := f[0], strings.TrimSuffix(f[3], ":"), f[len(f)-1]
		counts[name]++
		st := per[task]
		if st == nil {
			st = &state{a: -1}
			per[task] = st
		}
		_, val, _ := strings.Cut(arg, "=")
		v, err := strconv.ParseInt(strings.TrimPrefix(val, "0x"), 16, 64)
		if err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		switch name {
		case "p_outer_0":
			st.a, st.inners = v, 0
		case "r_inner_0":
			if want := 3*(st.a+int64(st.inners)) + 1; v != want {
				t.Fatalf("%s: inner returned %d after outer(%d), want %d: %s", task, v, st.a, want, line)
			}
			st.inners++
		case "r_outer_0":
			if want := 6*st.a + 5; v != want || st.inners != 2 {
				t.Fatalf("%s: outer(%d) returned %d after %d inner returns, want %d after 2: %s", task, st.a, v, st.inners, want, line)
			}
		}
	}
	if counts["p_outer_0"] != threads*iters || counts["r_outer_0"] != threads*iters || counts["r_inner_0"] != 2*threads*iters || len(per) != threads {
		t.Fatalf("%v of %d threads, want %d entries and returns of outer and %d of inner, of %d threads", counts, len(per), threads*iters, 2*threads*iters, threads)
	}

	graph := runRet(t, []string{"--tracer", "function_graph", "--filter", "outer", "--filter", "inner"},
		[]string{"probe: function tracer: 2 functions in-process\n"}, "threads", "8", n)
	if strings.Contains(graph, "lost") {
		t.Fatalf("function_graph lost:\n%s", grepLines(graph, "lost"))
	}
	// (A leaf's entry the printer had to let go before its return came
	// shows as "inner() {" and "}".)
	if o, i := strings.Count(graph, "outer() {"), strings.Count(graph, "inner()"); o != threads*iters || i != 2*threads*iters {
		t.Fatalf("function_graph: %d outer() {, %d inner(), want %d and %d", o, i, threads*iters, 2*threads*iters)
	}
}

// TestInProcessReturnsLongjmp: dive(6) longjmps back to main from seven
// calls deep, 50 times: the frames it skips are dropped as the next
// entry and return find them below sp, reported lost, and every return
// still goes home (ret prints what it prints untraced).
func TestInProcessReturnsLongjmp(t *testing.T) {
	t.Parallel()
	const n = 50
	trace := runRet(t, []string{"r:dive $retval", "r:outer $retval"}, []string{"r_dive_0", "r_outer_0"}, "longjmp", fmt.Sprint(n))
	counts := countByName(traceEvents(trace))
	wantNote := fmt.Sprintf("# %d returns lost (calls that never returned: longjmp, an exception, a stack not switched back to, a thread gone)", 7*n)
	if counts["r_dive_0"] != 0 || counts["r_outer_0"] != n || !strings.Contains(trace, wantNote) {
		t.Fatalf("%v, want 0 returns of dive and %d of outer, and %q in\n%s", counts, n, wantNote, grepLines(trace, "#"))
	}
	graph := runRet(t, []string{"--tracer", "function_graph", "--filter", "dive", "--filter", "outer", "--filter", "inner"}, nil, "longjmp", fmt.Sprint(n))
	if l, o := strings.Count(graph, "} /* dive: return lost */"), strings.Count(graph, "outer() {"); l != 7*n || o != n {
		t.Fatalf("function_graph: %d dive frames lost and %d outer calls, want %d and %d", l, o, 7*n, n)
	}
}

// TestInProcessReturnsFork: fork() three calls deep in hooked spawn():
// the child's copy of the stack holds the parent's hooked returns, which
// go back before it runs; it returns through them untraced (10, as it

// TestInProcessReturnsTailTrap: a call hooked in the tracee (mid) tail-
// calls a function that stops the thread (spin: its loop back into its
// first bytes takes no jmp; on arm64, its first word is a br), whose return the tracer hooks over the
// tracee's trampoline; then outer, hooked in the tracee too, tail-calls
// last. Before, the tracer sent spin's return straight home, past the
// tracee's trampoline, which kept mid's frame: outer's tail call found it
// on top and was not hooked, and every last() was reported lost (as in
// Debian's sqlite3 and openssl). And a chain through one slot: first,
// hooked in the tracee, tail-calls spin_on, which stops and tail-calls
// then, hooked in the tracee: its hook finds the tracer's trampoline in
// the slot and drops first's frame, so that return goes straight home
// (sent to the tracee's trampoline, the program found no frame there and
// stopped: sqlite3 with a table made no output). Now every call returns,
// and the function_graph trace is the one a stop at every call gives.
func TestInProcessReturnsTailTrap(t *testing.T) {
	t.Parallel()
	exe := builtOnce(t, "tailtrap", filepath.Join("testdata", "inprocess", "tailtrap.c"), "-O2", "-g", "-Wall")
	const n = 100
	base := runCmd(t, nil, exe, fmt.Sprint(n))
	var traces []string
	for _, flag := range []string{"-v", "--no-inprocess"} {
		out := filepath.Join(t.TempDir(), "trace")
		r := probe(t, "run", "-v", flag, "-o", out, "--tracer", "function_graph", "--filter", "outer,mid,spin,last,first,spin_on,then", "--", exe, fmt.Sprint(n))
		paths := "function tracer: 5 functions in-process, 2 stop the thread (no jump fits: a branch lands inside the jump: 2)\n" +
			"probe: function tracer: these stop the thread: spin, spin_on (no jump fits: a branch lands inside the jump)\n"
		switch {
		case flag == "-v" && runtime.GOARCH == "arm64":
			// (spin's and spin_on's first instruction is a register branch.)
			paths = "function tracer: 5 functions in-process, 2 stop the thread (no jump fits: a register branch cannot be covered by the jump: 2)\n" +
				"probe: function tracer: these stop the thread: spin, spin_on (no jump fits: a register branch cannot be covered by the jump)\n"
		case flag == "--no-inprocess" && runtime.GOARCH == "arm64":
			// (No detours but those that record: none is made.)
			paths = "function tracer: 0 functions in-process, 7 stop the thread (--no-inprocess: 7)\n" +
				"probe: function tracer: these stop the thread: first, last, mid, outer, spin, spin_on, then (--no-inprocess)\n"
		case flag == "--no-inprocess":
			paths = "function tracer: 0 functions in-process, 7 stop the thread (--no-inprocess: 5, no jump fits: a branch lands inside the jump: 2)\n" +
				"probe: function tracer: these stop the thread: first, last, mid, outer, then (--no-inprocess); spin, spin_on (no jump fits: a branch lands inside the jump)\n"
		}
		if r.code != 0 || r.stdout != base.stdout || !strings.Contains(r.stderr, paths) {
			t.Fatalf("probe run %s: want exit 0, %q, %q; got %v", flag, base.stdout, paths, r)
		}
		trace, _ := os.ReadFile(out)
		if strings.Contains(string(trace), "lost") {
			t.Fatalf("%s: calls lost:\n%s", flag, limit(string(trace)))
		}
		traces = append(traces, graphShape(t, readTrace(t, out)))
	}
	if traces[0] != traces[1] || strings.Count(traces[0], "outer() {") != n || strings.Count(traces[0], "last();") != n || strings.Count(traces[0], "then();") != n {
		t.Errorf("in-process:\n%s\nstopping:\n%s", limit(traces[0]), limit(traces[1]))
	}
}

// graphShape is the call column of a function_graph trace: each call's
// line, indented by depth, without times, CPUs and threads.
func graphShape(t *testing.T, tf traceFile) string {
	var b strings.Builder
	for _, g := range parseGraph(t, tf.section(t, "function_graph")) {
		b.WriteString(strings.Repeat("  ", g.depth) + g.text + "\n")
	}
	return b.String()
}

// TestInProcessVforkReturns: Debian's make runs each recipe with
// posix_spawn, whose child shares the parent's memory and thread control
// block until its execve: its records in the parent's ring are not
// shown. The kernel lets the parent run again as soon as the child
// execs, before the tracer has seen the exec; the end of the vfork is
// now taken at the parent's own stop for it (PTRACE_EVENT_VFORK_DONE),
// before it runs. Before, the parent's records in between were taken for
// the child's and dropped: 87-188 of 203 returns of child_execute_job
// reported lost, under function_graph. Every call of make's returns
// (but main's and die's, which exit), and make does what it does
// untraced.
func TestInProcessVforkReturns(t *testing.T) {
	t.Parallel()
	make, err := exec.LookPath("make")
	if err != nil {
		t.Fatalf("make: %v", err) // CI builds with it
	}
	dir := t.TempDir()
	const n = 60
	mk := "N := $(shell seq 1 " + fmt.Sprint(n) + ")\nall: $(addprefix out/,$(N))\n\t@cat out/* | md5sum\nout/%: | out\n\t@echo \"item $*\" > $@\nout:\n\t@mkdir -p out\n"
	if err := os.WriteFile(filepath.Join(dir, "Makefile"), []byte(mk), 0o644); err != nil {
		t.Fatal(err)
	}
	base := runCmd(t, nil, make, "-s", "-B", "-C", dir)
	out := filepath.Join(t.TempDir(), "trace")
	r := probe(t, "run", "-v", "-o", out, "--tracer", "function_graph", "--", make, "-s", "-B", "-C", dir)
	if base.code != 0 || r.code != 0 || r.stdout != base.stdout || !strings.Contains(r.stderr, " functions in-process") {
		t.Fatalf("make: %v\nprobe run: %v", base, r)
	}
	trace, _ := os.ReadFile(out)
	if calls := strings.Count(string(trace), "child_execute_job() {"); calls < n {
		t.Fatalf("%d calls of child_execute_job, want at least %d:\n%s", calls, n, limit(string(trace)))
	}
	for _, m := range regexp.MustCompile(`/\* (\w+): return lost \*/`).FindAllStringSubmatch(string(trace), -1) {
		if m[1] != "main" && m[1] != "die" {
			t.Fatalf("%s's return lost:\n%s", m[1], limit(string(trace)))
		}
	}
}

// exits), and the parent's four returns are reported.
func TestInProcessReturnsFork(t *testing.T) {
	t.Parallel()
	trace := runRet(t, []string{"r:spawn $retval"}, []string{"r_spawn_0"}, "fork")
	var got []string
	for _, e := range traceEvents(trace) {
		got = append(got, strings.TrimSpace(e.rest))
	}
	if want := []string{"arg1=0xa", "arg1=0xb", "arg1=0xc", "arg1=0xd"}; strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("returns of spawn %q, want %q (the parent's only)", got, want)
	}

	// With -f the child, in rings of its own that start with a copy of
	// the forking thread's shadow stack, returns through the same four
	// hooked calls, recorded and reported as its own.
	trace = runRet(t, []string{"-f", "r:spawn $retval"}, []string{"r_spawn_0"}, "fork")
	byTid := map[int][]string{}
	var tids []int
	for _, e := range traceEvents(trace) {
		if byTid[e.tid] == nil {
			tids = append(tids, e.tid)
		}
		byTid[e.tid] = append(byTid[e.tid], strings.TrimSpace(e.rest))
	}
	want := map[string]bool{"arg1=0x64 arg1=0x65 arg1=0x66 arg1=0x67": true, "arg1=0xa arg1=0xb arg1=0xc arg1=0xd": true}
	for _, tid := range tids {
		delete(want, strings.Join(byTid[tid], " "))
	}
	if len(tids) != 2 || len(want) != 0 {
		t.Fatalf("-f: returns of spawn by thread %v, missing %v", byTid, want)
	}
}

// TestInProcessReturnsLeafFork: a leaf whose return is hooked in the
// tracee forks by a system call of its own. On arm64 its return address
// is still in x30 then, the trampoline in the child's copy too, and the
// child (not followed) would return into it: it gets the original back
// before it runs, and exits 3 as untraced. The parent's return is
// reported.
func TestInProcessReturnsLeafFork(t *testing.T) {
	t.Parallel()
	trace := runRet(t, []string{"r:leaf_fork $retval"}, []string{"r_leaf_fork_0"}, "leaffork")
	if evs := traceEvents(trace); len(evs) != 1 || evs[0].name != "r_leaf_fork_0" {
		t.Fatalf("want the parent's return of leaf_fork alone:\n%s", trace)
	}
}

// grepLines is the lines of s that contain sub.
func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// traceEvents is the events of a text trace.
func traceEvents(s string) []event {
	_, evs, _ := splitOutput(s)
	return evs
}

// TestInProcessMemoryReads: +OFF(%REG) and strings there are copied by
// the stub (process_vm_readv on its own process), in-process: a struct's
// fields and strings, NULL, an unmapped struct and a string running into
// an unmapped page give (fault), one ending at the page's last byte
// reads whole, exactly as with a stop at each hit, but for a string past
// 256 bytes, which the copy cuts there.
func TestInProcessMemoryReads(t *testing.T) {
	t.Parallel()
	exe := builtOnce(t, "mem", filepath.Join("testdata", "inprocess", "mem.c"), "-O0", "-g", "-Wall")
	want := runCmd(t, nil, exe)
	spec := "p:use a=+0(%di):s64 b=+8(%di):s32 name=+12(%di):string msg=+0(%si):string"
	fields := func(args ...string) []string {
		out := filepath.Join(t.TempDir(), "trace")
		r := probe(t, append(append([]string{"run", "-o", out}, args...), spec, "--", exe)...)
		if r.code != 0 || r.stdout != want.stdout || slices.Contains(args, "-v") && !strings.Contains(r.stderr, "probe/p_use_0: in-process") {
			t.Fatalf("probe %v: %v\nwant exit 0 and %q", args, r, want.stdout)
		}
		trace, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		var lines []string
		for _, e := range traceEvents(string(trace)) {
			lines = append(lines, strings.TrimSpace(e.rest))
		}
		return lines
	}
	stopped := fields("--no-inprocess")
	recorded := fields("-v")
	long := strings.Repeat("x", 599)
	wantStopped := []string{
		`a=40 b=2 name="hello" msg="a message"`,
		`a=(fault) b=(fault) name=(fault) msg="second"`,
		`a=40 b=2 name="hello" msg="` + long + `"`,
		`a=(fault) b=(fault) name=(fault) msg="edge"`,
		`a=40 b=2 name="hello" msg=(fault)`,
		`a=9 b=0 name="" msg="six"`,
	}
	if strings.Join(stopped, "\n") != strings.Join(wantStopped, "\n") {
		t.Fatalf("--no-inprocess:\n%s\nwant\n%s", strings.Join(stopped, "\n"), strings.Join(wantStopped, "\n"))
	}
	wantRecorded := slices.Clone(wantStopped)
	wantRecorded[2] = `a=40 b=2 name="hello" msg="` + long[:256] + `"`
	if strings.Join(recorded, "\n") != strings.Join(wantRecorded, "\n") {
		t.Fatalf("in-process:\n%s\nwant\n%s", strings.Join(recorded, "\n"), strings.Join(wantRecorded, "\n"))
	}
}

// TestInProcessMemoryChains: pointers in memory followed (+0(+32(%di)),
// a string through a pointer, NULL and a pointer into a hole on the
// way), arrays (one running into a hole), globals (@SYM, and a string
// through one) are copied by the stub, a read a level, in-process; the
// fields are a stop's, one by one.
func TestInProcessMemoryChains(t *testing.T) {
	t.Parallel()
	exe := builtOnce(t, "mem", filepath.Join("testdata", "inprocess", "mem.c"), "-O0", "-g", "-Wall")
	want := runCmd(t, nil, exe)
	spec := "p:t/chain use n=+0(+32(%di)):s64 nb=+8(+32(%di)):s32 l=+0(+40(%di)):string arr=+48(%di):s32[4] g=@global:s64 gs=+0(@gname):string"
	var traces [2][]string
	for i, flag := range []string{"--no-inprocess", "-v"} {
		out := filepath.Join(t.TempDir(), "trace")
		r := probe(t, "run", "-o", out, flag, spec, "--", exe)
		if r.code != 0 || r.stdout != want.stdout || flag == "-v" && !strings.Contains(r.stderr, "probe: t/chain: in-process\n") {
			t.Fatalf("probe %s: %v\nwant exit 0, %q and in-process", flag, r, want.stdout)
		}
		trace, _ := os.ReadFile(out)
		for _, e := range traceEvents(string(trace)) {
			traces[i] = append(traces[i], strings.TrimSpace(e.rest))
		}
	}
	if strings.Join(traces[0], "\n") != strings.Join(traces[1], "\n") || len(traces[0]) != 6 {
		t.Fatalf("in-process:\n%s\nwith a stop at each hit:\n%s", strings.Join(traces[1], "\n"), strings.Join(traces[0], "\n"))
	}
	for i, want := range map[int]string{
		0: `n=41 nb=3 l="lbl" arr={1,-2,3,-4} g=77 gs="gee"`,
		1: `n=(fault) nb=(fault) l=(fault) arr={(fault),(fault),(fault),(fault)} g=77 gs="gee"`,
		4: `n=(fault) nb=(fault) l=(fault) arr={1,-2,3,-4} g=77 gs="gee"`,
		5: `n=41 nb=3 l="q" arr={5,6,(fault),(fault)} g=77 gs="gee"`,
	} {
		if traces[1][i] != want {
			t.Errorf("call %d: %s, want %s", i, traces[1][i], want)
		}
	}
}

// TestInProcessRingCollision: a thread whose ring is not the first its
// id picks (another thread's id is equal modulo the rings' count) keeps
// finding its own once that first one is given back: its records stay
// in one ring, and its hooked return finds its frame (collide.c).
func TestInProcessRingCollision(t *testing.T) {
	t.Parallel()
	exe := builtOnce(t, "collide", filepath.Join("testdata", "inprocess", "collide.c"), "-O2", "-g", "-Wall", "-pthread")
	out := filepath.Join(t.TempDir(), "trace")
	r := probe(t, "run", "-v", "-o", out, "p:work x=%di", "r:hooked $retval", "--", exe)
	if r.code != 0 || r.stdout != "hooked=7\n" || !strings.Contains(r.stderr, "probe: probe/r_hooked_0: in-process\n") || !strings.Contains(r.stderr, "probe: probe/p_work_0: in-process\n") {
		t.Fatalf("probe run: %v\nwant exit 0, hooked=7, both probes in-process", r)
	}
	var got []string
	for _, e := range traceEvents(readFile(t, out)) {
		got = append(got, e.name+strings.TrimRight(e.rest, " "))
	}
	if want := []string{"p_work_0 x=0x1", "p_work_0 x=0x5", "r_hooked_0 arg1=0x7"}; strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("events:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestInProcessRingCrowd: 24 threads alive at once whose ids are equal
// modulo the number of rings, as after thread ids wrap around pid_max in
// a process with hundreds of threads, all pick the same ring first. Each
// finds a ring of its own (it took the first 8 threads and lost the
// rest's hits when a thread tried only the 8 rings from the one its id
// picks): every call is recorded at entry and return, on its thread.
func TestInProcessRingCrowd(t *testing.T) {
	t.Parallel()
	exe := builtOnce(t, "crowd", filepath.Join("testdata", "inprocess", "crowd.c"), "-O2", "-g", "-Wall", "-pthread")
	want := runCmd(t, nil, exe)
	out := filepath.Join(t.TempDir(), "trace")
	r := probe(t, "run", "-v", "-o", out, "p:work id=%di i=%si", "r:work $retval", "--", exe)
	if r.code != 0 || r.stdout != want.stdout || !strings.Contains(r.stderr, "probe: probe/p_work_0: in-process\n") || !strings.Contains(r.stderr, "probe: probe/r_work_0: in-process\n") {
		t.Fatalf("probe run: %v\nwant exit 0, %q, both probes in-process", r, want.stdout)
	}
	trace := readFile(t, out)
	if strings.Contains(trace, "lost") {
		t.Errorf("trace says events were lost:\n%s", trace[strings.LastIndex(trace[:strings.Index(trace, "lost")], "\n")+1:])
	}
	idOf := map[int]uint64{} // each thread calls with its own id
	calls := map[uint64]int{}
	var entries, returns int
	for _, e := range traceEvents(trace) {
		var id, i, ret uint64
		switch e.name {
		case "p_work_0":
			if _, err := fmt.Sscanf(e.rest, " id=%v i=%v", &id, &i); err != nil {
				t.Fatalf("%q: %v", e.line, err)
			}
			if was, ok := idOf[e.tid]; ok && was != id {
				t.Fatalf("%q: thread %d called with id %d before", e.line, e.tid, was)
			}
			idOf[e.tid] = id
			calls[id]++
			entries++
		case "r_work_0":
			if _, err := fmt.Sscanf(e.rest, " arg1=%v", &ret); err != nil {
				t.Fatalf("%q: %v", e.line, err)
			}
			if ret/1000 != idOf[e.tid] {
				t.Fatalf("%q: returned on thread %d, which called with id %d", e.line, e.tid, idOf[e.tid])
			}
			returns++
		}
	}
	if entries != 2400 || returns != 2400 || len(calls) != 24 {
		t.Fatalf("%d entries, %d returns, %d threads; want 2400, 2400, 24", entries, returns, len(calls))
	}
	for id, n := range calls {
		if n != 100 {
			t.Errorf("thread with id %d: %d calls, want 100", id, n)
		}
	}
}

// TestInProcessDwarf: DWARF names at the entry of -O2 code that read no
// more than registers and the words at sp (integers, a char, a bool, an
// enum, a pointer's address, a struct on the stack, a seventh argument)
// record in-process and print as a stop prints them; one that needs
// other memory (a string) stops the thread, and -v says why.
func TestInProcessDwarf(t *testing.T) {
	t.Parallel()
	exe := builtOnce(t, "dwarf", filepath.Join("testdata", "inprocess", "dwarf.c"), "-O2", "-g", "-Wall")
	want := runCmd(t, nil, exe)
	specs := []string{"p:scalars i c b k l", "p:byvalue p g", "p:seventh a g", "p:ptr/pointers pointers p"}
	ptr := regexp.MustCompile(`=0x7ff[0-9a-f]+`)
	var traces [2][]string
	for i, flag := range []string{"--no-inprocess", "-v"} {
		out := filepath.Join(t.TempDir(), "trace")
		r := probe(t, append(append([]string{"run", flag, "-o", out}, specs...), "--", exe)...)
		if r.code != 0 || r.stdout != want.stdout {
			t.Fatalf("probe %s: %v\nwant exit 0 and %q", flag, r, want.stdout)
		}
		for _, p := range []string{"probe/p_scalars_0", "probe/p_byvalue_0", "probe/p_seventh_0", "ptr/pointers"} {
			if flag == "-v" && !strings.Contains(r.stderr, "probe: "+p+": in-process\n") {
				t.Errorf("%s: not in-process:\n%s", p, r.stderr)
			}
		}
		for _, e := range traceEvents(readFile(t, out)) {
			traces[i] = append(traces[i], e.name+ptr.ReplaceAllString(e.rest, "=PTR"))
		}
	}
	if strings.Join(traces[0], "\n") != strings.Join(traces[1], "\n") || len(traces[0]) != 12 {
		t.Fatalf("in-process:\n%s\nwith a stop at each hit:\n%s", strings.Join(traces[1], "\n"), strings.Join(traces[0], "\n"))
	}
	for i, want := range map[int]string{
		4: `p_scalars_0 i=0 c='\xc9' b=true k=GREEN l=-100`,
		6: `p_byvalue_0 p=<optimized out> g={x=10,y=20,z=30,w=-1}`,
		7: `p_seventh_0 a=1 g=71`,
		5: `pointers p=PTR`,
	} {
		if traces[1][i] != want {
			t.Errorf("event %d: %s, want %s", i, traces[1][i], want)
		}
	}
	r := probe(t, "run", "-v", "-o", os.DevNull, "p:pointers p s", "--", exe)
	if why := "probe: probe/p_pointers_0: stops the thread (probe/p_pointers_0: s reads a DWARF variable in memory or a floating-point register)\n"; r.code != 0 || !strings.Contains(r.stderr, why) {
		t.Errorf("p:pointers p s: want exit 0 and %q; got %v", why, r)
	}
	// A double and a float in SSE registers: read there at a stop (they
	// read 0 before), and never in-process, where a record has no SSE
	// registers.
	out := filepath.Join(t.TempDir(), "trace")
	r = probe(t, "run", "-v", "-o", out, "p:floats d f", "--", exe)
	if why := "probe: probe/p_floats_0: stops the thread (probe/p_floats_0: d reads a DWARF variable in memory or a floating-point register)\n"; r.code != 0 || !strings.Contains(r.stderr, why) {
		t.Errorf("p:floats d f: want exit 0 and %q; got %v", why, r)
	}
	var fl []string
	for _, e := range traceEvents(readFile(t, out)) {
		fl = append(fl, strings.TrimSpace(e.rest))
	}
	if len(fl) != 3 || fl[1] != "d=1.5 f=-0.25" || fl[2] != "d=3 f=-0.5" {
		t.Errorf("floats: %q, want d=1.5 f=-0.25 and d=3 f=-0.5 in the 2nd and 3rd calls", fl)
	}
}

// TestInProcessStaleMemory: a stub copies memory itself where the
// tracer's table says it is readable; a page unmapped since the table
// was written faults the copy, and the thread goes on at the read's
// system call: (fault), as a stop reads it, the program unharmed (its
// pages are held mapped long enough for the table to list them).
func TestInProcessStaleMemory(t *testing.T) {
	t.Parallel()
	exe := builtOnce(t, "stale", filepath.Join("testdata", "inprocess", "stale.c"), "-O2", "-g", "-Wall", "-pthread")
	const rounds = 20
	out := filepath.Join(t.TempDir(), "trace")
	r := probeEnv(t, []string{"PROBE_DEBUG_JUMPS=1"}, "run", "-v", "-o", out, "p:use v=+0(%di):s64 i=%si:s64", "--", exe, fmt.Sprint(rounds), "30000")
	if r.code != 0 || r.stdout != fmt.Sprintf("rounds=%d\n", rounds) || !strings.Contains(r.stderr, "probe/p_use_0: in-process\n") {
		t.Fatalf("probe run: %v", r)
	}
	if !regexp.MustCompile(`probe: [1-9]\d* copies of memory by stubs faulted and went to the system call\n`).MatchString(r.stderr) {
		t.Errorf("no copy faulted (each page was unmapped after the table listed it):\n%s", r.stderr)
	}
	var got, want []string
	for i := range rounds {
		want = append(want, fmt.Sprintf("v=%d i=%d", 1000+i, i), fmt.Sprintf("v=(fault) i=%d", i))
	}
	for _, e := range traceEvents(readFile(t, out)) {
		got = append(got, strings.TrimSpace(e.rest))
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("fields:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

}
