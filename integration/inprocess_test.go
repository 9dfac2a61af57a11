package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The tests of in-process probes (probe/inproc.go): a probe that only
// reads registers and stack words records in the tracee and never stops
// it. seq.c calls work(who, i) with i counting each caller's calls, so a
// trace shows by itself a record missing, doubled or garbled.

func seqBin(t *testing.T) string {
	t.Helper()
	return builtOnce(t, "seq", filepath.Join("testdata", "inprocess", "seq.c"), "-O2", "-g", "-Wall", "-pthread")
}

// seqCall is one work(who, i) record of a trace.
type seqCall struct {
	tid    int
	who, i int64
}

// seqTrace reads the work() records of a text trace, and its "events
// lost" note's count. (By hand, not with a regexp: a trace has 800,000
// lines, read under -race.)
func seqTrace(t *testing.T, trace string) (calls []seqCall, lost int) {
	t.Helper()
	const lostNote = " events lost in the tracee"
	for line := range strings.SplitSeq(strings.TrimSuffix(trace, "\n"), "\n") {
		if strings.HasPrefix(line, "#") {
			if n, ok := strings.CutPrefix(line, "# "); ok && strings.Contains(n, lostNote) {
				lost, _ = strconv.Atoi(n[:strings.Index(n, lostNote)])
			}
			continue
		}
		c, ok := parseSeqLine(line)
		if !ok {
			t.Fatalf("not a work() record of seq: %q", line)
		}
		calls = append(calls, c)
	}
	return calls, lost
}

// parseSeqLine reads "  seq-TID  [CPU]  TIME: p_work_0: (work+0x0/0xN) a=0xA b=0xB".
func parseSeqLine(line string) (c seqCall, ok bool) {
	f := strings.Fields(line)
	if len(f) != 7 || f[3] != "p_work_0:" || !strings.HasPrefix(f[4], "(work+0x0/0x") {
		return c, false
	}
	task, tid, ok := strings.Cut(f[0], "-")
	a, okA := strings.CutPrefix(f[5], "a=0x")
	b, okB := strings.CutPrefix(f[6], "b=0x")
	if !ok || task != "seq" || !okA || !okB {
		return c, false
	}
	var err [3]error
	c.tid, err[0] = strconv.Atoi(tid)
	c.who, err[1] = strconv.ParseInt(a, 16, 64)
	c.i, err[2] = strconv.ParseInt(b, 16, 64)
	return c, err[0] == nil && err[1] == nil && err[2] == nil
}

// checkSequences checks that each (thread, who)'s calls come in order
// from 0 with no gap, and returns how many each who made.
func checkSequences(t *testing.T, calls []seqCall) map[int64]int64 {
	t.Helper()
	return checkOrder(t, calls, false)
}

// checkOrder checks that each (thread, who)'s calls come in order from 0,
// with no gap unless gaps (records lost, counted apart), and returns how
// many calls each who made as far as the records show.
func checkOrder(t *testing.T, calls []seqCall, gaps bool) map[int64]int64 {
	t.Helper()
	type key struct {
		tid int
		who int64
	}
	next := map[key]int64{}
	whoOf := map[int]int64{}
	for _, c := range calls {
		k := key{c.tid, c.who}
		if c.i != next[k] && (!gaps || c.i < next[k]) {
			t.Fatalf("thread %d: work(%d, %d) after work(%d, %d): a record missing or out of order", c.tid, c.who, c.i, c.who, next[k]-1)
		}
		next[k] = c.i + 1
		if w, ok := whoOf[c.tid]; ok && w != c.who && c.who != 1 {
			t.Fatalf("thread %d calls as %d and %d", c.tid, w, c.who)
		}
		if c.who != 1 {
			whoOf[c.tid] = c.who
		}
	}
	per := map[int64]int64{}
	for k, n := range next {
		per[k.who] += n
	}
	return per
}

// TestInProcessThreads: 8 threads x 100,000 hits (10,000 under arm64's
// emulation), each recorded in the tracee and printed once, in order,
// nothing lost at the default ring size; the program prints what it
// prints untraced. The same probe with --no-inprocess prints the same
// records (but for the time and CPU).
func TestInProcessThreads(t *testing.T) {
	t.Parallel()
	exe := seqBin(t)
	const threads = 8
	n := map[string]int{"amd64": 100000, "arm64": 10000}[runtime.GOARCH]
	base := runCmd(t, nil, exe, "threads", fmt.Sprint(threads), fmt.Sprint(n))
	out := filepath.Join(t.TempDir(), "trace")
	r := probe(t, "run", "-v", "-o", out, "p:work a=%di b=%si", "--", exe, "threads", fmt.Sprint(threads), fmt.Sprint(n))
	if r.code != 0 || r.stdout != base.stdout || !strings.Contains(r.stderr, "probe: probe/p_work_0: in-process\n") {
		t.Fatalf("probe run: want exit 0, the untraced output %q and the probe in-process; got %v", base.stdout, r)
	}
	trace, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	calls, lost := seqTrace(t, string(trace))
	if lost != 0 || len(calls) != threads*n {
		t.Fatalf("%d records and %d lost, want %d and none", len(calls), lost, threads*n)
	}
	per := checkSequences(t, calls)
	for who := range int64(threads) {
		if per[who] != int64(n) {
			t.Errorf("work(%d, ...): %d records, want %d", who, per[who], n)
		}
	}

	// The same records through a stop at each hit.
	const small = "300"
	var traces [2][]string
	for i, flags := range [][]string{nil, {"--no-inprocess"}} {
		out := filepath.Join(t.TempDir(), "trace")
		args := append(append([]string{"run", "-v", "-o", out}, flags...), "p:work a=%di b=%si ret="+entryReturnFetch+":symbol", "--", exe, "threads", "2", small)
		r := probe(t, args...)
		if want := map[bool]string{true: "in-process", false: "stops the thread (--no-inprocess)"}[i == 0]; r.code != 0 || !strings.Contains(r.stderr, "probe/p_work_0: "+want+"\n") {
			t.Fatalf("probe %v: want exit 0 and %q; got %v", args, want, r)
		}
		b, _ := os.ReadFile(out)
		for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			if !strings.HasPrefix(line, "#") {
				// The thread and what follows the time: the record.
				f := strings.Fields(line)
				traces[i] = append(traces[i], strings.Join(f[3:], " "))
			}
		}
		slices.Sort(traces[i])
	}
	if len(traces[0]) != 600 || strings.Join(traces[0], "\n") != strings.Join(traces[1], "\n") {
		t.Fatalf("in-process and trapped records differ:\n%s\n---\n%s", strings.Join(traces[0][:5], "\n"), strings.Join(traces[1][:min(5, len(traces[1]))], "\n"))
	}
	if !strings.Contains(traces[0][0], " ret=caller+0x") {
		t.Errorf("%s at work's entry is its return address into caller; got %q", entryReturnFetch, traces[0][0])
	}
}

// TestInProcessFilterAndActions: the filter and count/hist run on the
// record, as on a stop.
func TestInProcessFilterAndActions(t *testing.T) {
	t.Parallel()
	exe := seqBin(t)
	out := filepath.Join(t.TempDir(), "trace")
	r := probe(t, "run", "-v", "-o", out, "p:work a=%di b=%si if b < 10 && a != 1", "--", exe, "threads", "3", "5000")
	if r.code != 0 || !strings.Contains(r.stderr, "in-process") {
		t.Fatalf("filter: %v", r)
	}
	trace, _ := os.ReadFile(out)
	calls, _ := seqTrace(t, string(trace))
	if len(calls) != 20 {
		t.Fatalf("filter b < 10 && a != 1: %d records, want 20", len(calls))
	}
	// The stub tests the filter: what it rejects makes no record, and
	// rings of 4 KiB lose nothing of 400,000 hits.
	r = probe(t, "run", "-v", "--ring-size", "4", "-o", out, "p:work a=%di b=%si if b >= 99990 && a != 1", "--", exe, "threads", "4", "100000")
	if r.code != 0 || !strings.Contains(r.stderr, "probe/p_work_0: in-process\n") {
		t.Fatalf("filter in the stub: %v", r)
	}
	trace, _ = os.ReadFile(out)
	if calls, lost := seqTrace(t, string(trace)); len(calls) != 30 || lost != 0 {
		t.Fatalf("filter b >= 99990 && a != 1 in 4 KiB rings: %d records and %d lost, want 30 and none", len(calls), lost)
	}
	r = probe(t, "run", "-v", "p:work a=%di => count:a", "--", exe, "threads", "3", "5000")
	if r.code != 0 || !strings.Contains(r.stderr, "in-process") {
		t.Fatalf("count: %v", r)
	}
	for a := range 3 {
		if want := fmt.Sprintf(`(?m)^a=0x%x +5000 \|`, a); !regexp.MustCompile(want).MatchString(r.stdout) {
			t.Errorf("count:a: no %q in\n%s", want, r.stdout)
		}
	}
}

// TestInProcessRingFull: with rings of 4 KiB and --drop, records are
// lost, and counted: those printed and those lost add up to the calls,
// and what is printed is whole. Without --drop (run's default) the
// threads wait for room, and every call is printed, in order.
func TestInProcessRingFull(t *testing.T) {
	t.Parallel()
	exe := seqBin(t)
	const threads, n = 4, 100000
	out := filepath.Join(t.TempDir(), "trace")
	r := probe(t, "run", "--drop", "--ring-size", "4", "-o", out, "p:work a=%di b=%si", "--", exe, "threads", fmt.Sprint(threads), fmt.Sprint(n))
	if r.code != 0 {
		t.Fatalf("probe run: %v", r)
	}
	trace, _ := os.ReadFile(out)
	calls, lost := seqTrace(t, string(trace))
	if lost == 0 || len(calls)+lost != threads*n {
		t.Fatalf("%d records and %d lost, want them to add up to %d, some lost", len(calls), lost, threads*n)
	}
	if !regexp.MustCompile(`# \d+ events lost in the tracee, rings full \(tid \d+: \d+, .*; --no-drop, --ring-size\)`).Match(trace) {
		t.Errorf("no per-thread loss note in the trace's end:\n%s", limit(string(trace[max(0, len(trace)-300):])))
	}

	r = probe(t, "run", "--ring-size", "4", "-o", out, "p:work a=%di b=%si", "--", exe, "threads", fmt.Sprint(threads), fmt.Sprint(n))
	if r.code != 0 {
		t.Fatalf("probe run: %v", r)
	}
	trace, _ = os.ReadFile(out)
	calls, lost = seqTrace(t, string(trace))
	checkOrder(t, calls, false)
	if lost != 0 || len(calls) != threads*n {
		t.Fatalf("waiting for room: %d records and %d lost, want %d and none", len(calls), lost, threads*n)
	}
	if !regexp.MustCompile(`\n# [0-9.hm]+[mµ]?s waited by the threads for room in their rings \(--drop: never, losing events instead\)\n`).Match(trace) {
		t.Errorf("no note of the time waited in the trace's end:\n%s", limit(string(trace[max(0, len(trace)-300):])))
	}
}

// TestInProcessPrefault: a thread's first records write pages of its
// ring never written before, and the first write of a page of shared
// memory faults (~5 us); the drain has the pages ahead of each thread
// mapped for it, and the rings' headers before any record, so that the
// thread takes almost none of those faults. Untraced, seq takes none; a
// traced run without the prefaulting took 2,469 for 200,000 records
// (the pages they filled, and the 512 rings' headers the first record
// looks at), one with it 4-40. The trace holds every call, in order.
// Not in parallel with the other tests: a drain starved of CPU for tens
// of milliseconds maps the pages late.
func TestInProcessPrefault(t *testing.T) {
	exe := seqBin(t)
	const n = 100000
	out := filepath.Join(t.TempDir(), "trace")
	r := probe(t, "run", "-v", "-o", out, "p:work a=%di b=%si", "--", exe, "paced", fmt.Sprint(n))
	m := regexp.MustCompile(`^calls=(\d+) faults=(\d+)\n$`).FindStringSubmatch(r.stdout)
	if r.code != 0 || m == nil || m[1] != fmt.Sprint(n) || !strings.Contains(r.stderr, "in-process") {
		t.Fatalf("probe run: %v", r)
	}
	trace, _ := os.ReadFile(out)
	calls, lost := seqTrace(t, string(trace))
	checkOrder(t, calls, true)
	if len(calls) != n || lost != 0 {
		t.Fatalf("%d records and %d lost, want %d and none", len(calls), lost, n)
	}
	// A record is at least 40 bytes: its header and the two values.
	pages := n * 40 / 4096
	faults, _ := strconv.Atoi(m[2])
	// Without the mapping ahead: every page (1,492 in a run). With it,
	// 13-101 alone; 263 once while go test ran other packages' tests on
	// both CPUs: half the pages tells the two apart with room.
	if faults > pages/2 {
		t.Errorf("the thread took %d page faults recording %d calls (at least %d pages of ring): not mapped ahead of it", faults, n, pages)
	}
	t.Logf("%d page faults, %d pages of records at least", faults, pages)
}

// TestInProcessCloneNoTLS: a thread made by clone without TLS of its own
// reads its parent's thread id where the stubs look for its own: it
// would write its parent's ring, and push its hooked returns on its
// parent's shadow stack, at the same time as the parent. Before, `probe`
// hung at the thread's exit on a record the two had garbled, or the
// program's returns went to the other thread's callers ("returned
// through the in-process trampoline with no frame"). At the clone,
// every probe goes back to stopping the thread, with a note: every call
// of both threads is recorded, as its own thread's, and the program's
// results are right.
func TestInProcessCloneNoTLS(t *testing.T) {
	t.Parallel()
	exe := builtOnce(t, "notls", filepath.Join("testdata", "inprocess", "notls.c"), "-O2", "-g", "-Wall")
	n := map[string]int{"amd64": 20000, "arm64": 300}[runtime.GOARCH] // every probe stops after the clone
	out := filepath.Join(t.TempDir(), "trace")
	r := probe(t, "run", "-o", out, "r:outer $retval", "p:work a=%di b=%si", "--", exe, fmt.Sprint(n))
	if r.code != 0 || r.stdout != "bad=0,0\n" || !strings.Contains(r.stderr, "has no TLS of its own (clone without CLONE_SETTLS): from now on every probe stops the thread") {
		t.Fatalf("probe run: %v", r)
	}
	trace, _ := os.ReadFile(out)
	work := regexp.MustCompile(`(?m)^ *notls-(\d+) .* p_work_0: \(work\+0x0/0x[0-9a-f]+\) a=0x([01]) b=0x([0-9a-f]+)$`).FindAllStringSubmatch(string(trace), -1)
	returns := regexp.MustCompile(`(?m) r_outer_0: \(\w+\+0x[0-9a-f]+/0x[0-9a-f]+ <- outer\) arg1=0x([0-9a-f]+)$`).FindAllStringSubmatch(string(trace), -1)
	if len(work) != 2*n || len(returns) != 2*n {
		t.Fatalf("%d work() entries and %d outer() returns, want %d each:\n%s", len(work), len(returns), 2*n, limit(string(trace)))
	}
	// Each thread's calls in order, under its own thread id.
	next := map[string]int64{}
	tidOf := map[string]string{}
	for _, m := range work {
		tid, who := m[1], m[2]
		i, _ := strconv.ParseInt(m[3], 16, 64)
		if tidOf[who] == "" {
			tidOf[who] = tid
		}
		if tidOf[who] != tid || i != next[who] {
			t.Fatalf("work(%s, %d) by thread %s, want work(%s, %d) by %s", who, i, tid, who, next[who], tidOf[who])
		}
		next[who]++
	}
	if tidOf["0"] == tidOf["1"] {
		t.Errorf("both threads' calls shown as thread %s's", tidOf["0"])
	}
}

// TestInProcessSignals: a signal handler that calls work() lands anywhere,
// inside the record code too; its records and the interrupted thread's
// are each whole and in order, and the records shown and those counted
// lost (rings full) add up to the calls made.
func TestInProcessSignals(t *testing.T) {
	t.Parallel()
	exe := seqBin(t)
	out := filepath.Join(t.TempDir(), "trace")
	// Rings of 1 MiB wrap many times. A drain starved of CPU (a loaded
	// test machine) loses records: every one is counted. (Under arm64's
	// emulation a signal takes long to come: fewer.)
	calls, signals := int64(200000), int64(1000)
	if runtime.GOARCH == "arm64" {
		calls, signals = 5000, 50
	}
	r := probe(t, "run", "-v", "--ring-size", "1024", "-o", out, "p:work a=%di b=%si", "--", exe, "signals", fmt.Sprint(calls), fmt.Sprint(signals))
	m := regexp.MustCompile(`^main=(\d+) handled=(\d+)\n$`).FindStringSubmatch(r.stdout)
	if r.code != 0 || m == nil || !strings.Contains(r.stderr, "in-process") {
		t.Fatalf("probe run: %v", r)
	}
	main, _ := strconv.ParseInt(m[1], 10, 64)
	handled, _ := strconv.ParseInt(m[2], 10, 64)
	trace, _ := os.ReadFile(out)
	records, lost := seqTrace(t, string(trace))
	checkOrder(t, records, true)
	if seen := int64(len(records)); seen+int64(lost) != main+handled || main < calls || handled < signals {
		t.Fatalf("%d records and %d lost, want %d calls (%d of main, at least %d, and %d of the handler, at least %d)", seen, lost, main+handled, main, calls, handled, signals)
	}
	t.Logf("%d calls, %d lost", main+handled, lost)
}

// TestInProcessFork: a forked child runs its original code (not
// followed): only the parent's calls are recorded, and both run as
// untraced. With -f the child is traced too, in-process, into rings of
// its own: its records carry its pid, and its stub's read of memory
// reads the child's (peek's cell is 2 there, 0 in the parent), as a stop
// reads it.
func TestInProcessFork(t *testing.T) {
	t.Parallel()
	exe := seqBin(t)
	base := runCmd(t, nil, exe, "fork", "1000")
	for _, c := range []struct {
		flags []string
		path  string
		child int64
	}{
		{nil, "in-process", 0},
		{[]string{"-f"}, "in-process", 1000},
		{[]string{"-f", "--no-inprocess"}, "stops the thread (--no-inprocess)", 1000},
	} {
		out := filepath.Join(t.TempDir(), "trace")
		args := append(append([]string{"run", "-v", "-o", out}, c.flags...), "p:work a=%di b=%si", "p:peek v=+0(%di):s64", "--", exe, "fork", "1000")
		r := probe(t, args...)
		if r.code != 0 || r.stdout != base.stdout || !strings.Contains(r.stderr, "probe/p_work_0: "+c.path+"\n") || !strings.Contains(r.stderr, "probe/p_peek_0: "+c.path+"\n") {
			t.Fatalf("probe %v: want exit 0, %q and %q; got %v", args, base.stdout, c.path, r)
		}
		trace, _ := os.ReadFile(out)
		var work []string
		peeks := map[string]int{} // tid v=... -> count
		tids := map[int64]string{}
		for _, line := range strings.Split(strings.TrimSpace(string(trace)), "\n") {
			if f := strings.Fields(line); len(f) == 6 && f[3] == "p_peek_0:" {
				_, tid, _ := strings.Cut(f[0], "-")
				peeks[tid+" "+f[5]]++
				continue
			}
			work = append(work, line)
		}
		calls, _ := seqTrace(t, strings.Join(work, "\n")+"\n")
		for _, call := range calls {
			tids[call.who] = strconv.Itoa(call.tid)
		}
		if per := checkSequences(t, calls); per[0] != 1000 || per[2] != c.child {
			t.Fatalf("%v: parent %d records, child %d: want 1000 and %d", c.flags, per[0], per[2], c.child)
		}
		want := map[string]int{tids[0] + " v=0": 1}
		if c.child > 0 {
			want[tids[2]+" v=2"] = 1
		}
		if fmt.Sprint(peeks) != fmt.Sprint(want) {
			t.Errorf("%v: peek's reads by thread %v, want %v", c.flags, peeks, want)
		}
	}
}

// TestInProcessAttach: attached to threads calling work() in a loop,
// detached while they run: what was recorded is handed on whole, each
// thread's calls with no gap and none lost; three times over; then a
// probe killed with SIGKILL leaves in-process probes behind, which the
// program outlives (it has no int3 to die of).
func TestInProcessAttach(t *testing.T) {
	t.Parallel()
	exe := seqBin(t)
	p := startPiped(t, nil, exe, "loop", "4")
	p.waitStdout(t, "ready\n", 10*time.Second)
	for round := range 3 {
		out := filepath.Join(t.TempDir(), "trace")
		pr := startBg(t, nil, probeBin, "attach", "-v", "-o", out, fmt.Sprint(p.pid()), "p:work a=%di b=%si")
		waitStderr(t, pr, "probe/p_work_0: in-process", 20*time.Second)
		time.Sleep(300 * time.Millisecond)
		pr.signal(t, os.Interrupt)
		r := pr.wait(t, cmdTimeout)
		if r.code != 0 || !strings.Contains(r.stderr, "probe/p_work_0: in-process") {
			t.Fatalf("round %d: probe attach: %v", round, r)
		}
		trace, _ := os.ReadFile(out)
		calls, lost := seqTrace(t, string(trace))
		type key struct {
			tid int
			who int64
		}
		first := map[key]int64{}
		for _, c := range calls {
			k := key{c.tid, c.who}
			if f, ok := first[k]; !ok {
				first[k] = c.i
			} else if c.i != f+1 {
				t.Fatalf("round %d: thread %d: work(%d, %d) after work(%d, %d)", round, c.tid, c.who, c.i, c.who, f)
			} else {
				first[k] = c.i
			}
		}
		if lost != 0 || len(first) != 4 || len(calls) < 4000 {
			t.Fatalf("round %d: %d records of %d threads, %d lost: want 4 threads' calls, thousands, none lost", round, len(calls), len(first), lost)
		}
		if p.exited() {
			t.Fatalf("seq died under probe: %v", p.res)
		}
	}
	// Returns hooked in the tracee, and memory copied by the stub,
	// detached while the threads run through the hook, the trampoline
	// and the stub's system call: each goes home.
	hooked := [][]string{{"r:work $retval"}, {"--tracer", "function_graph", "--filter", "work"}, {"p:work ret=+0(%sp):x64"}}
	if runtime.GOARCH == "arm64" {
		hooked = nil // each of them stops the thread there: TestReturnDetachLive's
	}
	for _, spec := range hooked {
		pr := startBg(t, nil, probeBin, append([]string{"attach", "-v", "-o", os.DevNull, fmt.Sprint(p.pid())}, spec...)...)
		waitStderr(t, pr, "probe: ", 20*time.Second) // -v's paths: the probes are in
		time.Sleep(300 * time.Millisecond)
		pr.signal(t, os.Interrupt)
		if r := pr.wait(t, cmdTimeout); r.code != 0 || p.exited() {
			t.Fatalf("probe attach %v: %v; seq exited: %v", spec, r, p.exited())
		}
	}
	// Killed, with returns hooked: the trampoline goes on sending
	// threads home with nobody draining. (arm64 hooks returns with a
	// brk, which would kill the program: there the entry alone.)
	specs, inProcess := []string{"p:work a=%di b=%si", "r:work $retval"}, "probe/r_work_0: in-process"
	if runtime.GOARCH == "arm64" {
		specs, inProcess = specs[:1], "probe/p_work_0: in-process"
	}
	pr := startBg(t, nil, probeBin, append([]string{"attach", "-v", "-o", os.DevNull, fmt.Sprint(p.pid())}, specs...)...)
	waitStderr(t, pr, inProcess, 10*time.Second)
	pr.signal(t, os.Kill)
	pr.wait(t, cmdTimeout)
	time.Sleep(300 * time.Millisecond) // its rings fill, and drop
	p.in.Close()
	if r := p.wait(t, cmdTimeout); r.code != 0 || r.stdout != "ready\nthreads=4\n" {
		t.Fatalf("seq after probe was killed: want exit 0 and its output; got %v", r)
	}
}

// TestInProcessPaths: what cannot be recorded in the tracee stops the
// thread, and -v says why.
func TestInProcessPaths(t *testing.T) {
	t.Parallel()
	exe := seqBin(t)
	for _, c := range []struct {
		spec, why string
	}{
		{"p:work s=+0(%di):string[2]", "probe/p_work_0: s reads an array of strings"},
		{"p:work s=+0(%di):u64[32]", "probe/p_work_0: s reads an array of 256 bytes, more than 255"},
		{"p:work s=+0($stack1):u64", "probe/p_work_0: s reads memory at other than a register or an address"},
		{"p:work a=%di => stacktrace", "probe/p_work_0: its actions need the thread stopped"},

		{"p:work sink", "probe/p_work_0: sink reads a DWARF variable in memory or a floating-point register"},
	} {
		r := probe(t, "run", "-v", "-o", os.DevNull, c.spec, "--", exe, "threads", "1", "3")
		if want := "probe: probe/p_work_0: stops the thread (" + c.why + ")\n"; r.code != 0 || !strings.Contains(r.stderr, want) {
			t.Errorf("%s: want exit 0 and %q; got %v", c.spec, want, r)
		}
	}
	// A return probe at the same entry is hooked in the tracee too;
	// one that reads what a return record does not hold stops both.
	r := probe(t, "run", "-v", "-o", os.DevNull, "p:work a=%di", "r:work", "--", exe, "threads", "1", "3")
	if want := "probe: probe/p_work_0: in-process\nprobe: probe/r_work_0: in-process\n"; r.code != 0 || !strings.Contains(r.stderr, want) {
		t.Errorf("p:work with r:work: want exit 0 and %q; got %v", want, r)
	}
	r = probe(t, "run", "-v", "-o", os.DevNull, "p:work a=%di", "r:work %bx", "--", exe, "threads", "1", "3")
	if want := "probe: probe/p_work_0: stops the thread (probe/r_work_0: reads a register other than %ax, %dx or %sp at a return)\n"; r.code != 0 || !strings.Contains(r.stderr, want) {
		t.Errorf("p:work with r:work %%bx: want exit 0 and %q; got %v", want, r)
	}
	// A bad pointer read faults as before, in-process too.
	r = probe(t, "run", "p:work s=+0(%di):u64", "--", exe, "threads", "1", "3")
	if r.code != 0 || strings.Count(r.stdout, " s=(fault)") != 3 {
		t.Errorf("+0(%%di) with %%di a small number: want 3 (fault)s; got %v", r)
	}
}

// waitStderr waits until p has written s to its standard error.
func waitStderr(t *testing.T, p *bg, s string, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !strings.Contains(p.stderr.String(), s) {
		if p.exited() || time.Now().After(deadline) {
			t.Fatalf("%s did not write %q to stderr within %v: %v", p.desc, s, timeout, p.stderr.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestInProcessRealPython: Debian's python3, its libc's malloc probed
// in-process (a stub near libc, far from the program's own code) and
// stopping: the same count of hits by size, the program's output the same.
func TestInProcessRealPython(t *testing.T) {
	t.Parallel()
	python := debianProgram(t, "python3", "python3")
	script := []string{"-I", "-S", "-c", "import json; print(len(json.dumps(list(range(20000)))))"}
	plain := runCmd(t, []string{"PYTHONHASHSEED=0"}, python, script...)
	var tables [2]string
	for i, flag := range []string{"-v", "--no-inprocess"} {
		out := filepath.Join(t.TempDir(), "trace")
		args := append([]string{"run", "-v", flag, "-o", out, "p:libc:malloc size=%di => count:size", "--", python}, script...)
		r := runCmd(t, []string{"PYTHONHASHSEED=0"}, probeBin, args...)
		want := map[int]string{0: "in-process", 1: "stops the thread (--no-inprocess)"}[i]
		if r.code != 0 || r.stdout != plain.stdout || !strings.Contains(r.stderr, "probe/p_malloc_0: "+want+"\n") {
			t.Fatalf("probe %v: want exit 0, %q and %q; got %v", args, plain.stdout, want, r)
		}
		b, _ := os.ReadFile(out)
		tables[i] = string(b)
	}
	if !strings.Contains(tables[0], "# count:size of probe/p_malloc_0: ") || tables[0] != tables[1] {
		t.Fatalf("in-process and stopping counts differ:\n%s\n---\n%s", limit(tables[0]), limit(tables[1]))
	}
}

// TestInProcessVfork: posix_spawn's children share the parent's memory
// and its thread control block until they exec: their execve, probed in
// libc in-process, lands in the parent thread's ring and is not shown, as
// it is not when the probe stops the thread (a child we do not follow).
func TestInProcessVfork(t *testing.T) {
	t.Parallel()
	exe := builtOnce(t, "spawn", filepath.Join("testdata", "inprocess", "spawn.c"), "-O2", "-g", "-Wall")
	base := runCmd(t, nil, exe)
	for _, flag := range []string{"-v", "--no-inprocess"} {
		out := filepath.Join(t.TempDir(), "trace")
		r := probe(t, "run", "-v", flag, "-o", out, "p:libc:execve", "p:work x=%di", "--", exe)
		inProcess := strings.Contains(r.stderr, "probe/p_execve_0: in-process\n")
		if r.code != 0 || r.stdout != base.stdout || inProcess != (flag == "-v") {
			t.Fatalf("probe run %s: want exit 0, %q, execve in-process: %v; got %v", flag, base.stdout, flag == "-v", r)
		}
		trace, _ := os.ReadFile(out)
		if n := strings.Count(string(trace), " p_execve_0: "); n != 0 {
			t.Errorf("%s: %d execve events of the children, want none:\n%s", flag, n, trace)
		}
		if n := strings.Count(string(trace), " p_work_0: "); n != 3 {
			t.Errorf("%s: %d work events, want 3:\n%s", flag, n, trace)
		}
	}
}

// TestInProcessTimeOrder: two threads take turns calling ping(i) and
// pong(i) (pingpong.c); the trace has their events in that order, with
// times that never go back: the threads' rings are merged by time stamp,
// as the kernel merges its per-CPU buffers, and a stop's hit comes after
// what any thread recorded before it. Each thread's ring alone in turn
// (the order of the slots) would give one thread's events, then the
// other's.
func TestInProcessTimeOrder(t *testing.T) {
	t.Parallel()
	exe := builtOnce(t, "pingpong", filepath.Join("testdata", "inprocess", "pingpong.c"), "-O2", "-g", "-Wall", "-pthread")
	const n = 300
	lineRE := regexp.MustCompile(`^\s*pingpong-(\d+)\s+\[\d{3}\]\s+(\d+\.\d{6}): p_(ping|pong)_0: \((?:ping|pong)\+0x0/0x[0-9a-f]+\) i=(\d+)$`)
	for _, c := range []struct {
		name  string
		specs []string
		paths string
	}{
		{"both in-process", []string{"p:ping i", "p:pong i"}, "probe: probe/p_ping_0: in-process\nprobe: probe/p_pong_0: in-process\n"},
		{"pong stops", []string{"p:ping i", "p:pong i => stacktrace"}, "probe: probe/p_ping_0: in-process\nprobe: probe/p_pong_0: stops the thread (probe/p_pong_0: its actions need the thread stopped)\n"},
	} {
		// (The trace to a file: on the program's stdout, its own line
		// could land in the middle of one of the trace's, once seen
		// splitting a stack's " => " from its frame.)
		out := filepath.Join(t.TempDir(), "trace")
		args := append(append([]string{"run", "-v", "-o", out}, c.specs...), "--", exe, strconv.Itoa(n))
		r := probe(t, args...)
		if r.code != 0 || r.stdout != "sum=0\n" || !strings.Contains(r.stderr, c.paths) {
			t.Fatalf("%s: want exit 0, sum=0 and %q on stderr; got %v", c.name, c.paths, r)
		}
		var events []string
		last := 0.0
		tids := map[string]string{}
		for line := range strings.SplitSeq(readFile(t, out), "\n") {
			if line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, " => ") {
				continue
			}
			m := lineRE.FindStringSubmatch(line)
			if m == nil {
				t.Fatalf("%s: not a ping or pong event: %q", c.name, line)
			}
			if tid, ok := tids[m[3]]; ok && tid != m[1] {
				t.Fatalf("%s: %s from threads %s and %s", c.name, m[3], tid, m[1])
			}
			tids[m[3]] = m[1]
			ts, _ := strconv.ParseFloat(m[2], 64)
			if ts < last {
				t.Fatalf("%s: time goes back at %q (after %.6f)", c.name, line, last)
			}
			last = ts
			events = append(events, m[3]+" "+m[4])
		}
		var want []string
		for i := range n {
			want = append(want, fmt.Sprintf("ping %d", i), fmt.Sprintf("pong %d", i))
		}
		if !slices.Equal(events, want) {
			for i := range min(len(events), len(want)) {
				if events[i] != want[i] {
					t.Fatalf("%s: %d events; the %dth is %q, want %q", c.name, len(events), i, events[i], want[i])
				}
			}
			t.Fatalf("%s: %d events, want %d", c.name, len(events), len(want))
		}
	}
}
