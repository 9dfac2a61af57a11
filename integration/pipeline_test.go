package integration

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// pipelineCalls is how many calls of one() the pipeline's tests make:
// two million, fewer where everything is slower (the arm64 guest).
func pipelineCalls() int { return 2000000 / int(timeScale) }

// TestNoLossAtTwoMillionCalls: a launched program loses no event however
// fast it makes them (its threads wait for room in their rings): every
// one of two million calls of a one-line function is in the trace of
// function_graph, recorded and reported, and of an entry probe, with
// each call's arguments in order; the program computes what it computes
// untraced.
func TestNoLossAtTwoMillionCalls(t *testing.T) {
	t.Parallel()
	exe := builtOnce(t, "pipeline-calls", filepath.Join("testdata", "pipeline", "calls.c"), "-O2", "-g")
	n := pipelineCalls()
	base := runCmd(t, nil, exe, strconv.Itoa(n))
	dir := t.TempDir()

	rec := filepath.Join(dir, "rec")
	r := probe(t, "record", "--tracer", "function_graph", "-o", rec, "--", exe, strconv.Itoa(n))
	if r.code != 0 || r.stdout != base.stdout {
		t.Fatalf("probe record: want exit 0 and %q; got %v", base.stdout, r)
	}
	report := filepath.Join(dir, "report")
	if r := probe(t, "report", "-o", report, rec); r.code != 0 {
		t.Fatalf("probe report: %v", r)
	}
	if calls, notes := countLines(t, report, regexp.MustCompile(`\|\s+one\(\);$`)); calls != n || lossNote(notes) != "" {
		t.Errorf("function_graph, recorded: %d calls of one(), want %d; notes %q", calls, n, notes)
	}

	out := filepath.Join(dir, "trace")
	r = probe(t, "run", "-o", out, "p:one a=%di b=%si", "--", exe, strconv.Itoa(n))
	if r.code != 0 || r.stdout != base.stdout {
		t.Fatalf("probe run: want exit 0 and %q; got %v", base.stdout, r)
	}
	f, err := os.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	hit := regexp.MustCompile(` p_one_0: \(one\+0x0/0x[0-9a-f]+\) a=0x[0-9a-f]+ b=0x([0-9a-f]+)$`)
	next, bad := uint64(0), 0
	var notes []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") {
			notes = append(notes, line)
			continue
		}
		m := hit.FindStringSubmatch(line)
		if m == nil {
			if bad++; bad < 5 {
				t.Errorf("not a hit of p_one_0: %q", line)
			}
			continue
		}
		if b, _ := strconv.ParseUint(m[1], 16, 64); b != next {
			t.Fatalf("hit %d: b=%#x, want b=%#x (every call, in order)", next, b, next)
		}
		next++
	}
	if next != uint64(n) || lossNote(notes) != "" {
		t.Errorf("p:one: %d hits, want %d; notes %q", next, n, notes)
	}
}

// TestDropWhenAsked: with --drop, a thread whose ring is full drops its
// record and is never slowed: records are lost, and those in the trace
// and those counted lost add up to the calls made.
func TestDropWhenAsked(t *testing.T) {
	t.Parallel()
	exe := builtOnce(t, "pipeline-calls", filepath.Join("testdata", "pipeline", "calls.c"), "-O2", "-g")
	n := pipelineCalls()
	out := filepath.Join(t.TempDir(), "trace")
	r := probe(t, "run", "--drop", "--ring-size", "4", "-o", out, "p:one a=%di b=%si", "--", exe, strconv.Itoa(n))
	if r.code != 0 {
		t.Fatalf("probe run --drop: %v", r)
	}
	hits, notes := countLines(t, out, regexp.MustCompile(` p_one_0: `))
	note := lossNote(notes)
	m := regexp.MustCompile(`^# (\d+) events lost in the tracee, rings full \(tid \d+: \d+; --no-drop, --ring-size\)$`).FindStringSubmatch(note)
	if m == nil {
		t.Fatalf("--drop with rings of 4 KiB: no loss note; %d hits, notes %q", hits, notes)
	}
	if lost, _ := strconv.Atoi(m[1]); lost == 0 || hits+lost != n {
		t.Errorf("--drop: %d hits and %d lost, want them to add up to %d", hits, lost, n)
	}
	for _, note := range notes {
		if strings.Contains(note, "waited") {
			t.Errorf("--drop: a thread waited: %q", note)
		}
	}
}

// countLines counts the lines of file that match re, and returns its
// comment lines.
func countLines(t *testing.T, file string, re *regexp.Regexp) (n int, notes []string) {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		switch line := sc.Text(); {
		case strings.HasPrefix(line, "#"):
			notes = append(notes, line)
		case re.MatchString(line):
			n++
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return n, notes
}

// lossNote is the first of notes that says events were lost, "" if none.
func lossNote(notes []string) string {
	for _, n := range notes {
		if strings.Contains(n, "lost") {
			return n
		}
	}
	return ""
}

// TestKill9WhileWaiting: a detach, then a kill -9 of probe, each while
// the program's thread waits for room in its ring (--no-drop, attached),
// leave the program running: at the detach the thread is taken out of
// its wait, after the kill it stops waiting once the tracer is gone; the
// program finishes and computes what it computes untraced.
func TestKill9WhileWaiting(t *testing.T) {
	t.Parallel()
	exe := builtOnce(t, "pipeline-calls", filepath.Join("testdata", "pipeline", "calls.c"), "-O2", "-g")
	n := strconv.Itoa(200000000 / int(timeScale))
	base := runCmd(t, nil, exe, n)
	p := startBg(t, nil, exe, n, "1000")
	p.waitStdout(t, "ready\n", 10*time.Second)
	attachWaiting := func() *bg {
		pr := startBg(t, nil, probeBin, "attach", "-v", "--no-drop", "--ring-size", "4", "-o", os.DevNull, strconv.Itoa(p.pid()), "p:one a=%di b=%si")
		waitStderr(t, pr, "in-process", 30*time.Second)
		// The thread waits (in futex) most of the time: at some look.
		wchan := fmt.Sprintf("/proc/%d/wchan", p.pid())
		waitFor(t, "the program's thread, waiting for room, in "+wchan, func() string {
			b, _ := os.ReadFile(wchan)
			return string(b)
		}, "futex")
		return pr
	}
	pr := attachWaiting()
	pr.signal(t, syscall.SIGINT)
	if r := pr.wait(t, 30*time.Second); r.code != 0 {
		t.Fatalf("probe's detach while the thread waited: %v", r)
	}
	pr = attachWaiting()
	pr.cmd.Process.Kill()
	pr.wait(t, 10*time.Second)
	r := p.wait(t, 60*time.Second*timeScale)
	if r.code != 0 || r.stdout != "ready\n"+base.stdout {
		t.Fatalf("after a detach and probe's kill -9 while the thread waited: want exit 0 and %q; got %v", "ready\n"+base.stdout, r)
	}
}

// TestRecordingReportsAsLive: a run that keeps a recording beside its
// live trace (--record) gets from probe report of it the live trace, line
// for line: function_graph's, an entry and a return probe's with their
// fields, and the JSON lines of both; every call in each.
func TestRecordingReportsAsLive(t *testing.T) {
	t.Parallel()
	exe := builtOnce(t, "pipeline-calls", filepath.Join("testdata", "pipeline", "calls.c"), "-O2", "-g")
	n := pipelineCalls() / 10
	base := runCmd(t, nil, exe, strconv.Itoa(n))
	for _, tc := range []struct {
		name string
		args []string // the trace's
		call *regexp.Regexp
	}{
		{"function_graph", []string{"--tracer", "function_graph"}, regexp.MustCompile(`\|\s+one\(\);$`)},
		{"probes", []string{"p:one a=%di b=%si", "r:one $retval"}, regexp.MustCompile(` p_one_0: \(one\+0x0/0x[0-9a-f]+\) a=0x[0-9a-f]+ b=0x[0-9a-f]+$`)},
		{"json", []string{"--format", "json", "--tracer", "function_graph"}, regexp.MustCompile(`"event":"func_entry","func":"one"`)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			live, rec, report := filepath.Join(dir, "live"), filepath.Join(dir, "rec"), filepath.Join(dir, "report")
			args := append([]string{"run", "-o", live, "--record", rec}, tc.args...)
			r := probe(t, append(args, "--", exe, strconv.Itoa(n))...)
			if r.code != 0 || r.stdout != base.stdout {
				t.Fatalf("probe run: want exit 0 and %q; got %v", base.stdout, r)
			}
			reportArgs := []string{"report", "-o", report}
			if tc.name == "json" {
				reportArgs = append(reportArgs, "--format", "json")
			}
			if r := probe(t, append(reportArgs, rec)...); r.code != 0 {
				t.Fatalf("probe report: %v", r)
			}
			if d := firstDiff(readLines(t, live), readLines(t, report), "live", "report"); d != "" {
				t.Fatalf("the report is not the live trace: %s", d)
			}
			if calls, notes := countLines(t, report, tc.call); calls != n || lossNote(notes) != "" {
				t.Errorf("%d calls of one(), want %d; notes %q", calls, n, notes)
			}
		})
	}
}

// readLines is the file's lines.
func readLines(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
}
