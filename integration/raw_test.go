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
	"syscall"
	"testing"
	"time"
)

// TestRawRecordMatchesLive: probe record of a function_graph takes the
// tracee's records raw and probe report decodes them (probe/raw.go);
// what it reports is what the live trace shows: each thread's calls, in
// order and nested alike, with the same returns lost (rawmix: functions
// recorded in the tracee and one that stops the thread, tail calls from
// each kind into the other, a longjmp over calls in flight, three
// threads), and the notes of returns lost. The program computes what it
// computes untraced (it checks its sums).
func TestRawRecordMatchesLive(t *testing.T) {
	t.Parallel()
	exe := builtOnce(t, "rawmix", filepath.Join("testdata", "raw", "rawmix.c"), "-O2", "-g", "-pthread")
	args := []string{exe, "3", "40"}
	want := runCmd(t, nil, exe, args[1:]...)
	if want.code != 0 || want.stdout != "rawmix ok 3 40\n" {
		t.Fatalf("rawmix untraced: %v", want)
	}
	dir := t.TempDir()
	live := filepath.Join(dir, "live")
	r := probe(t, append([]string{"run", "-v", "--tracer", "function_graph", "-o", live, "--"}, args...)...)
	if r.code != 0 || r.stdout != want.stdout || !regexp.MustCompile(` in-process, [1-9]\d* stop the thread`).MatchString(r.stderr) {
		t.Fatalf("probe run -v: %v\nwant the program's output and functions that stop the thread (trapper)", r)
	}
	rec := filepath.Join(dir, "rec")
	// -v says the recording is raw (x86-64 only).
	raw := "probe: recorded raw: the records as the tracee makes them, decoded by probe report\n"
	if r := probe(t, append([]string{"record", "-v", "--tracer", "function_graph", "-o", rec, "--"}, args...)...); r.code != 0 || r.stdout != want.stdout ||
		strings.HasSuffix(r.stderr, raw) != (runtime.GOARCH != "arm64") || strings.Count(r.stderr, raw) > 1 {
		t.Fatalf("probe record -v: %v\nwant the program's output, and on x86-64 last on stderr %q", r, raw)
	}
	report := filepath.Join(dir, "report")
	if r := probe(t, "report", "-o", report, rec); r.code != 0 || r.stderr != "" {
		t.Fatalf("probe report: %v", r)
	}
	wantRaw(t, rec)
	liveThreads, liveNotes := graphThreads(t, live)
	repThreads, repNotes := graphThreads(t, report)
	if !slices.EqualFunc(liveThreads, repThreads, slices.Equal) {
		t.Errorf("the threads' calls differ:\nlive\n%s\nreported\n%s", strings.Join(slices.Concat(liveThreads...), "\n"), strings.Join(slices.Concat(repThreads...), "\n"))
	}
	if !slices.Equal(liveNotes, repNotes) || len(liveNotes) == 0 {
		t.Errorf("notes: live %q, reported %q", liveNotes, repNotes)
	}
}

// graphThreads reads a function_graph trace: each thread's lines without
// their CPU, task and duration columns (its calls, nested), sorted by
// length then content (which thread ran first varies), and its notes.
func graphThreads(t *testing.T, path string) (threads [][]string, notes []string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	line := regexp.MustCompile(`^ *\d+\) +\S+-(\d+) +\|[^|]*\|(.*)$`)
	byTid := map[string][]string{}
	for _, l := range strings.Split(string(data), "\n") {
		if m := line.FindStringSubmatch(l); m != nil {
			byTid[m[1]] = append(byTid[m[1]], m[2])
		} else if strings.HasPrefix(l, "# ") && !strings.HasPrefix(l, "# tracer") && !strings.HasPrefix(l, "# CPU") && !strings.HasPrefix(l, "# |") {
			notes = append(notes, l)
		}
	}
	return sortedThreads(byTid), notes
}

// sortedThreads is each thread's lines, sorted by length then content
// (which thread ran first varies).
func sortedThreads(byTid map[string][]string) [][]string {
	var threads [][]string
	for _, lines := range byTid {
		threads = append(threads, lines)
	}
	slices.SortFunc(threads, func(a, b []string) int {
		if len(a) != len(b) {
			return len(a) - len(b)
		}
		return slices.Compare(a, b)
	})
	return threads
}

// TestRawRecordAttachCycles: probe record attached to a running program
// (rawmix for ever, its threads checking each round's sum), taken raw,
// stopped by Ctrl-C, eight times: the program runs on right after each,
// and each recording reports decoded, its calls in progress at the
// detach said. (kill -9: TestKill9TailChain.)
func TestRawRecordAttachCycles(t *testing.T) {
	t.Parallel()
	exe := builtOnce(t, "rawmix", filepath.Join("testdata", "raw", "rawmix.c"), "-O2", "-g", "-pthread")
	prog := startBg(t, nil, exe, "2", "0")
	prog.waitStdout(t, "ready\n", 10*time.Second)
	dir := t.TempDir()
	for i := range 8 {
		rec := filepath.Join(dir, fmt.Sprintf("rec%d", i))
		p := startProbe(t, "record", "--tracer", "function_graph", "-o", rec, strconv.Itoa(prog.pid()))
		// Records coming: attached, the tracer running.
		deadline := time.Now().Add(10 * time.Second)
		for fi, err := os.Stat(rec); err != nil || fi.Size() < 64<<10; fi, err = os.Stat(rec) {
			if time.Now().After(deadline) || p.exited() {
				t.Fatalf("cycle %d: no records coming: %v", i, p.res)
			}
			time.Sleep(10 * time.Millisecond)
		}
		p.signal(t, syscall.SIGINT)
		r := p.wait(t, 20*time.Second)
		time.Sleep(50 * time.Millisecond) // (time to die of a return gone wrong)
		if prog.exited() {
			t.Fatalf("cycle %d: the program ended: %v\nprobe: %v", i, prog.res, r)
		}
		if r.code != 0 || r.stderr != "" {
			t.Fatalf("cycle %d: probe record: %v", i, r)
		}
		wantRaw(t, rec)
		if info := mustProbe(t, "report", "--info", rec).stdout; !strings.Contains(info, "calls in progress at the detach") {
			t.Errorf("cycle %d: probe report --info: want the calls in progress said; got\n%s", i, info)
		}
	}
	prog.signal(t, syscall.SIGTERM)
	if r := prog.wait(t, 10*time.Second); r.stderr != "" {
		t.Errorf("rawmix: %v", r)
	}
}

// wantRaw checks that every record of recording rec was taken raw (on
// x86-64; on arm64 none is: the detach needs the tracer's frames).
func wantRaw(t *testing.T, rec string) {
	t.Helper()
	info := mustProbe(t, "report", "--info", rec).stdout
	m := regexp.MustCompile(`(?m)^# records: +(\d+) \(whole\).*\n# raw: +(\d+) of them`).FindStringSubmatch(info)
	if runtime.GOARCH == "arm64" {
		if m != nil || !strings.Contains(info, "(whole)") {
			t.Errorf("probe report --info: want a whole recording, none of it raw (arm64); got\n%s", info)
		}
		return
	}
	if m == nil || m[1] != m[2] {
		t.Errorf("probe report --info: want every record decoded from the tracee's; got\n%s", info)
	}
}

// TestRawRecordProbes: entry probes whose hits are only printed are
// recorded raw too, alone or with function_graph (probe/raw.go): their
// fetch-args (registers, an expression) and filters compiled again from
// their text by probe report, their hits as the live trace shows them,
// thread by thread, among the calls where there are calls; a probe at a
// function that stops the thread (trapper) is printed live into the
// same recording, in its place. A probe that counts, or reads what only
// the process knows (:symbol), makes the recording decoded live, as
// before, and right.
func TestRawRecordProbes(t *testing.T) {
	t.Parallel()
	exe := builtOnce(t, "rawmix", filepath.Join("testdata", "raw", "rawmix.c"), "-O2", "-g", "-pthread")
	args := []string{exe, "3", "40"}
	probes := []string{"p:leaf x=%di:s64", "p:sw x=%di:s64 y=x&7 if y < 4", "p:trapper x=%di:s64 half=x/2"}
	dir := t.TempDir()
	raw := "probe: recorded raw: the records as the tracee makes them, decoded by probe report\n"
	for _, tc := range []struct {
		name  string
		extra []string // before the probes
		raw   bool
	}{
		{"probes", nil, true},
		{"graph", []string{"--tracer", "function_graph"}, true},
		{"symbol", []string{"p:work2 r=%ip:symbol"}, false},
	} {
		live, rec, report := filepath.Join(dir, tc.name+".live"), filepath.Join(dir, tc.name+".rec"), filepath.Join(dir, tc.name+".report")
		list := append(append([]string{}, tc.extra...), probes...)
		if r := probe(t, append(append([]string{"run", "-o", live}, list...), append([]string{"--"}, args...)...)...); r.code != 0 {
			t.Fatalf("%s: probe run: %v", tc.name, r)
		}
		r := probe(t, append(append([]string{"record", "-v", "-o", rec}, list...), append([]string{"--"}, args...)...)...)
		if wantRaw := tc.raw && runtime.GOARCH != "arm64"; r.code != 0 || strings.HasSuffix(r.stderr, raw) != wantRaw {
			t.Fatalf("%s: probe record -v: %v\nwant raw %v", tc.name, r, wantRaw)
		}
		mustProbe(t, "report", "-o", report, rec)
		liveThreads, repThreads := probeThreads(t, live), probeThreads(t, report)
		if tc.extra != nil && tc.extra[0] == "--tracer" {
			liveThreads, _ = graphThreads(t, live)
			repThreads, _ = graphThreads(t, report)
		}
		if len(liveThreads) < 3 || !slices.EqualFunc(liveThreads, repThreads, slices.Equal) {
			t.Errorf("%s: the threads' lines differ:\nlive\n%s\nreported\n%s", tc.name, strings.Join(slices.Concat(liveThreads...), "\n"), strings.Join(slices.Concat(repThreads...), "\n"))
		}
		// Each thread: 40 rounds of trapper, sw and leaf's hits, the
		// filter keeping sw's of x&7 < 4.
		if n := strings.Count(strings.Join(liveThreads[len(liveThreads)-1], "\n"), "p_trapper_0: "); n != 40 {
			t.Errorf("%s: %d hits of trapper in a thread, want 40", tc.name, n)
		}
		if info := mustProbe(t, "report", "--info", rec).stdout; strings.Contains(info, "# raw:") != (tc.raw && runtime.GOARCH != "arm64") {
			t.Errorf("%s: probe report --info:\n%s", tc.name, info)
		}
	}
}

// probeThreads reads a trace of probes' lines: each thread's events
// without their CPU and time, threads sorted.
func probeThreads(t *testing.T, path string) [][]string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	line := regexp.MustCompile(`^ *\S+-(\d+) +\[\d+\] +[\d.]+: (.*)$`)
	byTid := map[string][]string{}
	for _, l := range strings.Split(string(data), "\n") {
		if m := line.FindStringSubmatch(l); m != nil {
			byTid[m[1]] = append(byTid[m[1]], m[2])
		}
	}
	return sortedThreads(byTid)
}

// TestRawRecordReturns: return probes whose returns the tracee hooks are
// recorded raw too, alone, with entry probes and under function_graph:
// probe report decodes them to the live trace's lines, thread by thread
// (their $retval, and where each call returned to, described by the
// modules' tables the recording keeps), with the same notes of returns
// lost (ret longjmp: 7 calls of dive a round never return). calls.c's
// one(), N calls: N returns, each $retval the one the program computed,
// in order. A return probe whose returns the tracer hooks at a stop
// makes the recording decoded live.
func TestRawRecordReturns(t *testing.T) {
	t.Parallel()
	ret := retBin(t)
	calls := builtOnce(t, "pipeline-calls", filepath.Join("testdata", "pipeline", "calls.c"), "-O2", "-g")
	rawmix := builtOnce(t, "rawmix", filepath.Join("testdata", "raw", "rawmix.c"), "-O2", "-g", "-pthread")
	const n = 20000
	graph := []string{"--tracer", "function_graph", "--filter", "outer", "--filter", "inner", "--filter", "dive"}
	dir := t.TempDir()
	for _, tc := range []struct {
		name  string
		trace []string
		cmd   []string
		lost  string // the note of returns lost, if any
		live  bool   // decoded live (not raw)
	}{
		{"returns", []string{"r:outer $retval", "r:inner $retval"}, []string{ret, "threads", "3", "200"}, "", false},
		{"entries", []string{"p:outer a=%di", "r:outer $retval", "r:inner $retval:s64"}, []string{ret, "threads", "3", "200"}, "", false},
		{"graph", append(slices.Clone(graph), "r:outer $retval", "p:inner x=%di"), []string{ret, "threads", "3", "200"}, "", false},
		{"longjmp", []string{"r:dive $retval", "r:outer $retval"}, []string{ret, "longjmp", "50"}, "# 350 returns lost", false},
		{"longjmp-graph", append(slices.Clone(graph), "r:dive $retval", "r:outer $retval"), []string{ret, "longjmp", "50"}, "# 350 returns lost", false},
		{"count", []string{"p:one a=%di b=%si", "r:one $retval"}, []string{calls, strconv.Itoa(n)}, "", false},
		// A return the tracer hooks at a stop (trapper's entry stops the
		// thread): decoded live, and right.
		{"trapper", []string{"r:trapper $retval", "r:leaf $retval"}, []string{rawmix, "3", "40"}, "", true},
	} {
		live, rec, report := filepath.Join(dir, tc.name+".live"), filepath.Join(dir, tc.name+".rec"), filepath.Join(dir, tc.name+".report")
		want := runCmd(t, nil, tc.cmd[0], tc.cmd[1:]...)
		if r := probe(t, slices.Concat([]string{"run", "-o", live}, tc.trace, []string{"--"}, tc.cmd)...); r.code != want.code || r.stdout != want.stdout {
			t.Fatalf("%s: probe run: %v\nwant %v", tc.name, r, want)
		}
		r := probe(t, slices.Concat([]string{"record", "-v", "-o", rec}, tc.trace, []string{"--"}, tc.cmd)...)
		raw := "probe: recorded raw: the records as the tracee makes them, decoded by probe report\n"
		if r.code != want.code || r.stdout != want.stdout || strings.HasSuffix(r.stderr, raw) != (runtime.GOARCH != "arm64" && !tc.live) {
			t.Fatalf("%s: probe record -v: %v\nwant the program's output, and on x86-64 last on stderr %q (decoded live: %v)", tc.name, r, raw, tc.live)
		}
		if r := probe(t, "report", "-o", report, rec); r.code != 0 || r.stderr != "" {
			t.Fatalf("%s: probe report: %v", tc.name, r)
		}
		if !tc.live {
			wantRaw(t, rec)
		}
		liveThreads, repThreads := probeThreads(t, live), probeThreads(t, report)
		liveNotes, repNotes := traceNotes(t, live), traceNotes(t, report)
		if tc.trace[0] == "--tracer" {
			liveThreads, liveNotes = graphThreads(t, live)
			repThreads, repNotes = graphThreads(t, report)
		}
		if len(liveThreads) == 0 || !slices.EqualFunc(liveThreads, repThreads, slices.Equal) {
			t.Errorf("%s: the threads' lines differ:\nlive\n%s\nreported\n%s", tc.name, strings.Join(slices.Concat(liveThreads...), "\n"), strings.Join(slices.Concat(repThreads...), "\n"))
		}
		if !slices.Equal(liveNotes, repNotes) || (tc.lost != "") != strings.Contains(strings.Join(repNotes, "\n")+"\n", tc.lost+" ") {
			t.Errorf("%s: notes: live %q, reported %q; want %q", tc.name, liveNotes, repNotes, tc.lost)
		}
		if tc.name != "count" {
			continue
		}
		// one(s, i) returns s*3 + (i^7); the program keeps its low 24 bits.
		var rets []string
		for _, l := range repThreads[0] {
			if _, v, ok := strings.Cut(l, "r_one_0: (main+"); ok {
				if _, v, ok = strings.Cut(v, " <- one) arg1="); ok {
					rets = append(rets, v)
				}
			}
		}
		s := int64(0)
		for i := range int64(n) {
			r := s*3 + (i ^ 7)
			if i >= int64(len(rets)) || rets[i] != fmt.Sprintf("0x%x", r) {
				t.Fatalf("count: %d returns of one(), the %dth %q, want 0x%x", len(rets), i, rets[min(i, int64(len(rets)-1))], r)
			}
			s = r & 0xffffff
		}
		if len(rets) != n {
			t.Fatalf("count: %d returns of one(), want %d", len(rets), n)
		}
	}
}

// traceNotes is a trace's notes: its comment lines but the header's.
func traceNotes(t *testing.T, path string) []string {
	t.Helper()
	var notes []string
	for _, l := range readLines(t, path) {
		if strings.HasPrefix(l, "# ") && !strings.HasPrefix(l, "# tracer") && !strings.Contains(l, "TASK-PID") {
			notes = append(notes, l)
		}
	}
	return notes
}
