package integration

import (
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

// Job control under attach: a process stopped by SIGSTOP stays stopped
// while probe is attached and after, and one continued runs, as under
// strace or gdb. (Attach tests: not parallel.)

// jobstop is the jobstop tracee running in the background.
type jobstop struct {
	*bg
	stopFile string
}

func startJobstop(t *testing.T) *jobstop {
	t.Helper()
	stop := filepath.Join(t.TempDir(), "stop")
	p := startBg(t, nil, lifecycleBin(t, "jobstop", o2pie), stop)
	p.waitStdout(t, "tick 0\n", 10*time.Second)
	return &jobstop{bg: p, stopFile: stop}
}

// states returns the state letter of every thread, in tid order.
func (j *jobstop) states(t *testing.T) string {
	t.Helper()
	tids, err := taskIDs(j.pid())
	if err != nil {
		t.Fatalf("jobstop: %v", err)
	}
	var sb strings.Builder
	for _, tid := range tids {
		st, err := taskState(j.pid(), tid)
		if err != nil {
			t.Fatalf("jobstop: %v", err)
		}
		sb.WriteByte(st)
	}
	return sb.String()
}

// waitStates waits until each of the 4 threads is in state st: 'T'
// stopped, 't' stopped and traced (as strace and gdb leave a stopped
// process: in a ptrace-stop, parked with PTRACE_LISTEN).
func (j *jobstop) waitStates(t *testing.T, st byte) {
	t.Helper()
	want := strings.Repeat(string(st), 4)
	deadline := time.Now().Add(5 * time.Second)
	for got := j.states(t); got != want; got = j.states(t) {
		if time.Now().After(deadline) {
			t.Fatalf("thread states %q, want %q:\n%s", got, want, threadsReport(j.pid()))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// stoppedOutput waits until every thread is in stop state st and the
// output has stopped coming (a line printed just before the stop may
// still be in the pipe), and returns it.
func (j *jobstop) stoppedOutput(t *testing.T, st byte) string {
	t.Helper()
	j.waitStates(t, st)
	out := j.stdout.String()
	for {
		time.Sleep(100 * time.Millisecond)
		now := j.stdout.String()
		if now == out {
			return out
		}
		out = now
	}
}

// untraced checks that no thread is traced any more.
func (j *jobstop) untraced(t *testing.T) {
	t.Helper()
	tids, _ := taskIDs(j.pid())
	for _, tid := range tids {
		if tp, err := tracerPid(j.pid(), tid); err != nil || tp != 0 {
			t.Fatalf("thread %d still traced after probe ended:\n%s", tid, threadsReport(j.pid()))
		}
	}
}

// ticks waits until the tracee prints n more ticks than it had in out.
func (j *jobstop) ticks(t *testing.T, out string, n int) {
	t.Helper()
	want := fmt.Sprintf("tick %d\n", strings.Count(out, "\n")+n-1)
	j.waitStdout(t, want, 10*time.Second)
}

var jobstopEnd = regexp.MustCompile(`\ncalls=(\d+) good=(\d+)\n$`)

// finish ends the tracee and checks that every result it got was right.
func (j *jobstop) finish(t *testing.T) {
	t.Helper()
	os.WriteFile(j.stopFile, nil, 0o644)
	r := j.wait(t, 20*time.Second)
	m := jobstopEnd.FindStringSubmatch(r.stdout)
	if r.code != 0 || r.stderr != "" || m == nil || m[1] != m[2] || m[1] == "0" {
		t.Fatalf("jobstop: want exit 0 and calls=N good=N; got\n%v", limit(r.String()))
	}
}

// stillFor checks that the tracee's output stays out for d.
func (j *jobstop) stillFor(t *testing.T, out string, d time.Duration, when string) {
	t.Helper()
	time.Sleep(d)
	if now := j.stdout.String(); now != out {
		t.Fatalf("the stopped program printed %q %s", strings.TrimPrefix(now, out), when)
	}
}

const nopHeader = "# tracer: nop\n#           TASK-PID     CPU#  TIMESTAMP  FUNCTION\n"

// TestAttachStoppedStaysStopped: attached to a process stopped by
// SIGSTOP, probe lets no thread run: no hit, no line printed, every
// thread stopped after the detach, in-process probes and stops alike;
// SIGCONT then resumes it, every result right.
func TestAttachStoppedStaysStopped(t *testing.T) {
	graphHeader := "# tracer: function_graph\n#\n" +
		"# CPU  TASK/PID         DURATION                  FUNCTION CALLS\n" +
		"# |     |    |           |   |                     |   |   |   |\n"
	for _, tc := range []struct {
		name         string
		args         []string
		stdout       string
		stderrPrefix string
	}{
		{"inprocess", []string{"-v", "p:work => count"}, nopHeader + "# count of probe/p_work_0: 0 hits, 0 keys\n",
			"probe: probe/p_work_0: in-process, counted in the tracee\n"},
		{"stops", []string{"--no-inprocess", "p:work => count"}, nopHeader + "# count of probe/p_work_0: 0 hits, 0 keys\n", ""},
		{"function_graph", []string{"-v", "--tracer", "function_graph"}, graphHeader,
			"probe: function tracer: "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			j := startJobstop(t)
			j.signal(t, syscall.SIGSTOP)
			out := j.stoppedOutput(t, 'T')
			r := probe(t, append([]string{"attach", "--duration", "1s", strconv.Itoa(j.pid())}, tc.args...)...)
			if r.code != 0 || r.stdout != tc.stdout || !strings.HasPrefix(r.stderr, tc.stderrPrefix) || (tc.stderrPrefix == "") != (r.stderr == "") {
				t.Fatalf("probe attach: %v\nwant exit 0, stdout %q, stderr starting %q", r, tc.stdout, tc.stderrPrefix)
			}
			if tc.name == "function_graph" && !strings.HasSuffix(r.stderr, " functions in-process\n") {
				t.Errorf("function_graph not in-process in the stopped process: %q", r.stderr)
			}
			if now := j.stdout.String(); now != out {
				t.Errorf("the stopped program printed %q while attached", strings.TrimPrefix(now, out))
			}
			j.stoppedAfterDetach(t, out, "after the detach")
		})
	}
}

// probeCount is the hits of p:work's count in a probe's output.
var probeCount = regexp.MustCompile(`# count of probe/p_work_0: (\d+) hits`)

// TestAttachStoppedContinued: a process stopped before the attach and
// continued while attached runs, its calls counted, and runs on after
// the detach.
func TestAttachStoppedContinued(t *testing.T) {
	j := startJobstop(t)
	j.signal(t, syscall.SIGSTOP)
	out := j.stoppedOutput(t, 'T')
	pr := startProbe(t, "attach", "-v", "--duration", "3s", strconv.Itoa(j.pid()), "p:work => count")
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(pr.stderr.String(), "in-process, counted in the tracee\n") {
		if pr.exited() || time.Now().After(deadline) {
			t.Fatalf("probe did not start in-process: %v", pr.wait(t, 10*time.Second))
		}
		time.Sleep(10 * time.Millisecond)
	}
	j.waitStates(t, 't')
	j.stillFor(t, out, 300*time.Millisecond, "attached, before SIGCONT")
	j.signal(t, syscall.SIGCONT)
	j.ticks(t, out, 3) // while attached: probe stays 3 s
	if pr.exited() {
		t.Fatalf("probe ended before the program ran: %v", pr.res)
	}
	r := pr.wait(t, 20*time.Second)
	m := probeCount.FindStringSubmatch(r.stdout)
	if r.code != 0 || m == nil || m[1] == "0" {
		t.Fatalf("probe attach: %v\nwant exit 0 and the calls made after SIGCONT counted", r)
	}
	j.untraced(t)
	out = j.stdout.String()
	j.ticks(t, out, 3)
	if st := j.states(t); strings.ContainsAny(st, "tT") {
		t.Errorf("thread states %q after the detach, want none stopped", st)
	}
	j.finish(t)
}

// TestAttachStopWhileAttached: SIGSTOP sent while probe is attached stops
// every thread (state t, as under strace: parked in a ptrace-stop) and
// its calls (the count stops growing), the detach leaves it stopped (T),
// and SIGCONT resumes it.
func TestAttachStopWhileAttached(t *testing.T) {
	j := startJobstop(t)
	pr := startProbe(t, "attach", "-v", "--duration", "3s", "--interval", "100ms", strconv.Itoa(j.pid()), "p:work => count")
	pr.waitStdout(t, "# interval 2:", 10*time.Second)
	j.signal(t, syscall.SIGSTOP)
	out := j.stoppedOutput(t, 't')
	// Every table printed from now on has the same count.
	tables := len(probeCount.FindAllString(pr.stdout.String(), -1))
	pr.waitStdout(t, fmt.Sprintf("# interval %d:", tables+3), 10*time.Second)
	r := pr.wait(t, 20*time.Second)
	counts := probeCount.FindAllStringSubmatch(r.stdout, -1)
	if r.code != 0 || len(counts) < tables+3 {
		t.Fatalf("probe attach: %v", r)
	}
	for i, m := range counts[tables:] {
		if m[1] != counts[tables][1] || m[1] == "0" {
			t.Errorf("count %s in table %d, %s in table %d: hits while stopped", m[1], tables+i+1, counts[tables][1], tables+1)
		}
	}
	if r.stderr != "probe: probe/p_work_0: in-process, counted in the tracee\n" {
		t.Errorf("probe's stderr %q, want the in-process note", r.stderr)
	}
	j.stoppedAfterDetach(t, out, "stopped while attached")
}

// stoppedAfterDetach checks that the detached program is stopped (every
// thread T), untraced and printing nothing, then continues it with
// SIGCONT and checks it runs to a right end.
func (j *jobstop) stoppedAfterDetach(t *testing.T, out, what string) {
	t.Helper()
	// A thread let go in a group-stop is woken to stop again in the
	// kernel, before any code of its own: on a loaded machine it may
	// still be runnable (R) when probe has exited.
	j.waitStates(t, 'T')
	j.untraced(t)
	j.stillFor(t, out, 200*time.Millisecond, what)
	j.signal(t, syscall.SIGCONT)
	j.ticks(t, out, 3)
	j.finish(t)
}
