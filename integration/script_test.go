package integration

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Tests of probe scripts (--script): docs/scripts.md's example runs as
// documented, and every kind of invalid script is refused with
// FILE:LINE:COL, exit status 2 and the tracee untouched.

// TestScriptExample runs examples/probes.yaml, docs/scripts.md's example, on
// examples/counter.c as docs/scripts.md says, and checks every line it writes.
func TestScriptExample(t *testing.T) {
	dir := t.TempDir()
	counter := filepath.Join(dir, "counter")
	if err := build(dir, "gcc", "-O2", "-g", "-pthread", "-o", counter, filepath.Join(repoRoot, "examples", "counter.c")); err != nil {
		t.Fatal(err)
	}
	// The script names its output file relative to the working directory.
	ctx, cancel := context.WithTimeout(context.Background(), cmdTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, probeBin, "run", "--script", filepath.Join(repoRoot, "examples", "probes.yaml"), "--", "./counter", "4", "1")
	cmd.Dir = dir
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if err != nil || stdout.String() != "threads=1 calls=4 sum=14 total=6\n" || stderr.String() != "" {
		t.Fatalf("probe run --script examples/probes.yaml -- ./counter 4 1: %v\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
	}
	data, err := os.ReadFile(filepath.Join(dir, "counter.trace"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
	wantHeader := []string{"# tracer: function", "#           TASK-PID     CPU#  TIMESTAMP  FUNCTION"}
	if len(lines) < len(wantHeader) || strings.Join(lines[:2], "\n") != strings.Join(wantHeader, "\n") {
		t.Fatalf("counter.trace: header is not %q:\n%s", wantHeader, data)
	}
	lines = lines[2:]
	// The function tracer's line for worker, then the probes' events in
	// the worker's order, then main's printf.
	callRE := regexp.MustCompile(`^\s*counter-(\d+)\s+\[\d{3}\]\s+\d+\.\d{6}: worker <-start_thread$`)
	m := callRE.FindStringSubmatch(lines[0])
	if m == nil {
		t.Fatalf("counter.trace: first line %q is not the function tracer's line for worker\n%s", lines[0], data)
	}
	worker, _ := strconv.Atoi(m[1])
	workerSym := funcSym(t, counter, "worker")
	type want struct{ name, where, rest string }
	ret := func(sq int) want { return want{"work_done", "worker <- work", fmt.Sprintf(" sq=%d", sq)} }
	entry := func(i int) want { return want{"p_work_0", workLoc(t, counter, 0), fmt.Sprintf(" i=%d", i)} }
	wants := []want{ret(0), ret(1), entry(2), ret(4), entry(3), ret(9)}
	// The return probe's count and histogram close the trace.
	bar := func(n int) string { return "|" + strings.Repeat("@", n) + strings.Repeat(" ", 40-n) + "|" }
	wantTables := []string{
		"# count:comm of probe/work_done: 4 hits, 1 key",
		"comm=counter        4 " + bar(40),
		"# hist:sq:linear=4 of probe/work_done (linear, step 4): 4 values, sum 14",
		"[0, 4)         2 " + bar(40),
		"[4, 8)         1 " + bar(20),
		"[8, 12)        1 " + bar(20),
	}
	evLines := lines[1:]
	if len(evLines) != len(wants)+1+len(wantTables) {
		t.Fatalf("counter.trace: %d lines after the worker's, want %d events and %d table lines\n%s", len(evLines), len(wants)+1, len(wantTables), data)
	}
	if got := strings.Join(evLines[len(wants)+1:], "\n"); got != strings.Join(wantTables, "\n") {
		t.Errorf("counter.trace: the tables are\n%s\nwant\n%s", got, strings.Join(wantTables, "\n"))
	}
	for i, w := range wants {
		e, ok := parseEvent(evLines[i])
		where := e.loc
		if e.retFunc != "" {
			where = e.sym + " <- " + e.retFunc
			if e.size != workerSym.Size {
				t.Errorf("line %q: return into worker of size 0x%x, want 0x%x", evLines[i], e.size, workerSym.Size)
			}
		}
		if !ok || e.tid != worker || e.comm != "counter" || e.name != w.name || where != w.where || e.rest != w.rest {
			t.Errorf("event %d: %q, want counter-%d %s: (%s)%s", i, evLines[i], worker, w.name, w.where, w.rest)
		}
	}
	e, ok := parseEvent(evLines[len(wants)])
	if !ok || e.tid == worker || e.name != "p_printf_0" || e.sym != "printf" || e.off != 0 ||
		e.rest != ` fmt="threads=%d calls=%ld sum=%ld total=%ld\n"` {
		t.Errorf("last event: %q, want main's p_printf_0 with its format", evLines[len(wants)])
	}
}

// TestScriptProfileFormat: a script's output format is any the command
// line takes; format: profile, once refused, prints the profile tracer's
// table of a function_graph trace, as --format profile does.
func TestScriptProfileFormat(t *testing.T) {
	exe := builtOnce(t, "pipeline-calls", filepath.Join("testdata", "pipeline", "calls.c"), "-O2", "-g")
	dir := t.TempDir()
	path := filepath.Join(dir, "profile.yaml")
	if err := os.WriteFile(path, []byte("tracer: function_graph\noutput:\n  format: profile\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	oneRow := regexp.MustCompile(`(?m)^  one +(\d+) `)
	for _, args := range [][]string{{"--script", path}, {"--tracer", "function_graph", "--format", "profile"}} {
		r := probe(t, append(append([]string{"run"}, args...), "--", exe, "100")...)
		m := oneRow.FindStringSubmatch(r.stdout)
		if r.code != 0 || r.stderr != "" || !strings.HasPrefix(r.stdout, "1759382\n# tracer: profile\n") || m == nil || m[1] != "100" {
			t.Errorf("probe run %s: want the profile table with 100 hits of one, got\n%v", strings.Join(args, " "), r)
		}
	}
}

// TestScriptAttach: a script's probes and duration on attach, with -o
// from the command line overriding the script's output file.
func TestScriptAttach(t *testing.T) {
	s := startSpin(t, o0pie, 2, 30*time.Second)
	workers := s.workers(t)
	dir := t.TempDir()
	scriptOut, cliOut := filepath.Join(dir, "script.trace"), filepath.Join(dir, "cli.trace")
	path := filepath.Join(dir, "attach.yaml")
	src := fmt.Sprintf("duration: 1s\nprobes:\n  - at: work\n    actions: [print, count]\noutput: %s\n", scriptOut)
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	w0 := monoMicros(t)
	r := probe(t, "attach", "--script", path, "-o", cliOut, strconv.Itoa(s.pid()))
	w1 := monoMicros(t)
	if r.code != 0 || r.stderr != "" {
		t.Fatalf("probe attach --script: want exit status 0, got\n%v", r)
	}
	if r.elapsed < 900*time.Millisecond || r.elapsed > 10*time.Second {
		t.Errorf("the script's duration: 1s took %v", r.elapsed)
	}
	if _, err := os.Stat(scriptOut); err == nil {
		t.Errorf("the script's output file was written although -o was given")
	}
	waitFree(t, s, nil)
	// The count closes the file: "# count of probe/p_work_0: N hits, 1 key"
	// and one row; N must be the number of events printed.
	data, err := os.ReadFile(cliOut)
	if err != nil {
		t.Fatal(err)
	}
	text := strings.TrimSuffix(string(data), "\n")
	cut := strings.LastIndex(text, "\n# count of probe/p_work_0: ")
	if cut < 0 {
		t.Fatalf("no count table at the end of the trace:\n%s", limit(text))
	}
	var hits int
	table := strings.Split(text[cut+1:], "\n")
	// Hits that came while detaching are only counted in a note after it.
	for len(table) > 2 && strings.HasSuffix(table[len(table)-1], " lost while detaching") {
		table = table[:len(table)-1]
	}
	if n, _ := fmt.Sscanf(table[0], "# count of probe/p_work_0: %d hits, 1 key", &hits); n != 1 || len(table) != 2 ||
		!strings.HasPrefix(table[1], fmt.Sprintf("total %8d |", hits)) {
		t.Errorf("count table:\n%s", strings.Join(table, "\n"))
	}
	if err := os.WriteFile(cliOut, []byte(text[:cut+1]), 0o644); err != nil {
		t.Fatal(err)
	}
	evs := parseEventsFile(t, cliOut)
	if len(evs) != hits {
		t.Errorf("%d events printed, the count says %d hits", len(evs), hits)
	}
	checkAttachEvents(t, evs, workers, window{w0, w1}, "p_work_0", workLoc(t, bin("spin", o0pie), 0))
	if total := s.finish(t); total < len(evs) {
		t.Errorf("spin made %d calls but there are %d events", total, len(evs))
	}
}

// badScripts are invalid scripts for the loop and spin tracees (whose
// work(int i) has a DWARF parameter i) and the exact error of each.
var badScripts = []struct{ name, src, want string }{
	{"syntax", "probes:\n  - at: work\n   args: [i]\n", "3:4: bad YAML: value is not allowed in this context"},
	{"unknown key", "probes:\n  - at: work\n    fetch: [i]\n",
		`3:5: probes[0]: unknown key "fetch" (want "at", "return", "spec", "event", "args", "if", "actions")`},
	{"unknown top key", "probe:\n  - at: work\n", `1:1: script: unknown key "probe" (want "probes", "tracer", "output", "duration")`},
	{"wrong type", "probes:\n  at: work\n", "2:3: probes: want a list of probes, got a mapping"},
	{"wrong type max-depth", "tracer:\n  name: function_graph\n  max-depth: deep\n", `3:14: tracer.max-depth: want a positive whole number, got "deep"`},
	{"unknown tracer", "tracer: function_grph\nprobes: [p:work]\n", `1:9: unknown tracer "function_grph" (want nop, function, function_graph, profile, stack)`},
	{"tracers that conflict", "tracer:\n  name: [function, function_graph]\n", "2:3: --tracer: function and function_graph cannot run together"},
	{"bad spec", "probes:\n  - at: work+zz\n", `2:9: bad probe "p:work+zz": "work+zz": bad offset "zz" (want decimal or 0x hex)`},
	{"bad spec string", "probes:\n  - 'q:work'\n", `2:5: bad probe "q:work": "q": unknown probe type (want p:, r:, o:, sdt: or -:)`},
	{"bad fetch-arg", "probes:\n  - at: work\n    args: [i, \"x=%xx\"]\n", `3:15: bad probe "p:work i x=%xx": unknown register "%xx" in "x=%xx"`},
	{"bad filter", "probes:\n  - at: work\n    args: [\"x=%di\"]\n    if: y > 1\n",
		`4:9: bad probe "p:work x=%di if y > 1": bad filter "y > 1": unknown field "y" (fields: x, comm)`},
	{"unknown action", "probes:\n  - at: work\n    actions: [print, bogus]\n",
		`3:22: bad action "bogus": unknown action (want print, printf, count, sum, avg, min, max, hist, stacktrace, mark, traceon, traceoff, enable or disable)`},
	{"unknown action key", "probes:\n  - at: work\n    actions: [{counts: [comm]}]\n",
		`3:16: probes[0].actions[0]: unknown key "counts" (want "count", "hist", "enable", "disable", "mark")`},
	{"count key not fetched", "probes:\n  - at: work\n    args: [\"x=%di\"]\n    actions: [{count: [y]}]\n",
		`4:15: bad action "count:y": y is not a field of probe/p_work_0 (fields: x; or comm, pid, tid, cpu, stack)`},
	{"duration on entry", "probes:\n  - at: work\n    actions: [{hist: duration}]\n",
		`3:15: bad action "hist:duration": duration is only known at a return probe (r:), and probe/p_work_0 is an entry probe`},
	{"bad step", "probes:\n  - at: work\n    args: [\"x=%di\"]\n    actions: [{hist: {field: x, scale: linear, step: 0}}]\n",
		`4:15: bad action "hist:x:linear=0": bad STEP "0" (want a positive integer)`},
	// Found only when the probes are added to the process: at their node.
	{"unknown symbol", "probes:\n  - at: work\n  - at: wrk\n", `3:9: unknown symbol "wrk" (did you mean: work, `},
	{"unknown variable", "probes:\n  - at: work\n    args: [nosuchvar]\n", `3:12: no variable "nosuchvar" at `},
	{"duplicate event", "probes:\n  - at: work\n    event: dup\n  - return: work\n    event: dup\n", "5:12: event probe/dup already exists"},
}

// TestScriptBadFiles: each invalid script is refused before the tracee is
// touched: run does not start it, attach leaves it running untraced.
func TestScriptBadFiles(t *testing.T) {
	dir := t.TempDir()
	s := startSpin(t, o0pie, 2, 60*time.Second)
	pid := strconv.Itoa(s.pid())
	for i, b := range badScripts {
		t.Run(b.name, func(t *testing.T) {
			path := filepath.Join(dir, fmt.Sprintf("bad%d.yaml", i))
			if err := os.WriteFile(path, []byte(archRegs(b.src)), 0o644); err != nil {
				t.Fatal(err)
			}
			want := "probe: " + path + ":" + archRegs(b.want)
			// (A message that names what is in scope or close is
			// checked up to there.)
			ok := func(r result) bool {
				return r.code == 2 && r.stdout == "" && strings.HasPrefix(r.stderr, want) && strings.Count(r.stderr, "\n") == 1
			}
			r := probe(t, "run", "--script", path, "--", bin("loop", o0pie))
			if !ok(r) {
				t.Errorf("run: want exit status 2, no output (loop not started) and stderr\n%s got\n%v", want, r)
			}
			r = probe(t, "attach", "--script", path, pid)
			if !ok(r) {
				t.Errorf("attach: want exit status 2 and stderr\n%s got\n%v", want, r)
			}
			waitFree(t, s, nil)
			if s.exited() {
				t.Fatalf("spin exited:\n%v", s.res)
			}
		})
	}
	// Attach-only and missing files.
	durRun := filepath.Join(dir, "duration.yaml")
	if err := os.WriteFile(durRun, []byte("duration: 1s\nprobes: [p:work]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := probe(t, "run", "--script", durRun, "--", bin("loop", o0pie))
	if want := "probe: " + durRun + ":1:11: duration: applies to attach only (run traces until the program exits)\n"; r.code != 2 || r.stderr != want || r.stdout != "" {
		t.Errorf("run with a duration: want exit status 2 and stderr\n%s got\n%v", want, r)
	}
	missing := filepath.Join(dir, "nope.yaml")
	r = probe(t, "attach", "--script", missing, pid)
	if want := "probe: open " + missing + ": no such file or directory\n"; r.code != 2 || r.stderr != want {
		t.Errorf("a missing script: want exit status 2 and stderr\n%s got\n%v", want, r)
	}
	waitFree(t, s, nil)
	// After all the refused attaches, spin ran on undisturbed: its calls
	// all returned the right values.
	s.finish(t)
}
