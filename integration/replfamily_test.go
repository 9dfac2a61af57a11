package integration

import (
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The REPL on several processes: PID,PID... and the children -f follows.
// Every command that changes what is installed acts on each process; the
// counts are exact per process, told apart by TASK-PID.

// callsBin builds testdata/repl/calls.c; with extra, its extra() too.
func callsBin(t *testing.T, extra bool) string {
	t.Helper()
	src := filepath.Join("testdata", "repl", "calls.c")
	if extra {
		return builtOnce(t, "replcalls_extra", src, "-O2", "-g", "-Wall", "-DEXTRA")
	}
	return builtOnce(t, "replcalls", src, "-O2", "-g", "-Wall")
}

// startCalls starts calls and waits until it is ready.
func startCalls(t *testing.T, exe string) *piped {
	t.Helper()
	p := startPiped(t, nil, exe)
	p.waitStdout(t, "ready\n", 10*time.Second)
	return p
}

// workCalls is what the calls processes of a session have done and what
// their work events must therefore be: each process's i, in order.
type workCalls struct {
	want  map[int][]int // pid -> the i of each traced call
	total map[int]int   // pid -> its calls so far (a fork child's start with its parent's)
}

// call has pid (p's own, or its child's: prefix "child ") call work n
// times, and waits for its answer; traced says whether the probe is in
// and enabled there.
func (w *workCalls) call(t *testing.T, p *piped, prefix string, pid, n int, traced bool) {
	t.Helper()
	from := w.total[pid]
	w.total[pid] += n
	p.send(t, fmt.Sprintf("%scall %d", prefix, n))
	p.waitStdout(t, fmt.Sprintf("pid %d: %d calls, %d in all\n", pid, n, w.total[pid]), 20*time.Second)
	for i := from; traced && i < from+n; i++ {
		w.want[pid] = append(w.want[pid], i)
	}
}

// del deletes p_work_0, which had hits in all.
func (w *workCalls) del(t *testing.T, r *replSession, hits int) {
	t.Helper()
	r.send(t, "del p_work_0")
	r.waitFor(t, fmt.Sprintf(`deleted p_work_0 \(%d hits\)\n`, hits))
}

// check waits for the work events owed and checks that they are exactly
// those: no call missed, none twice, none from a process, or at a time,
// where the probe was not.
func (w *workCalls) check(t *testing.T, r *replSession) {
	t.Helper()
	got := func() map[int][]int {
		m := map[int][]int{}
		for _, ev := range r.events() {
			var i int
			if ev.name != "p_work_0" || !strings.HasPrefix(ev.rest, " i=") {
				continue
			}
			fmt.Sscanf(ev.rest, " i=%d", &i)
			m[ev.tid] = append(m[ev.tid], i)
		}
		return m
	}
	enough := func(m map[int][]int) bool {
		for pid, want := range w.want {
			if len(m[pid]) < len(want) {
				return false
			}
		}
		return true
	}
	for deadline := time.Now().Add(20 * time.Second); !enough(got()); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			break
		}
	}
	time.Sleep(200 * time.Millisecond) // none more may come
	m := got()
	for pid := range m {
		if _, ok := w.want[pid]; !ok {
			t.Fatalf("events of pid %d, which should have none: %v; output:\n%s", pid, m[pid], limit(r.text()))
		}
	}
	for pid, want := range w.want {
		if !slices.Equal(m[pid], want) {
			t.Fatalf("pid %d: work events with i=%v, want %v; output:\n%s", pid, m[pid], want, limit(r.text()))
		}
	}
}

// TestREPLSeveral: one REPL on two processes (two programs, one with a
// function the other lacks). add, disable, enable and del act on both,
// and so does an action's disable:,
// every call of each counted exactly; list shows each one's hits; an add
// that fails in the second is taken out of the first and said once; a
// process that exits is said, the other traced on, and the session ends
// with the last.
func TestREPLSeveral(t *testing.T) {
	a, b := startCalls(t, callsBin(t, true)), startCalls(t, callsBin(t, false))
	pa, pb := a.pid(), b.pid()
	r := startREPL(t, nil, false, "attach", "--repl", fmt.Sprintf("%d,%d", pa, pb))
	w := &workCalls{want: map[int][]int{}, total: map[int]int{}}
	r.send(t, "add p:work i=%di:s64")
	r.waitFor(t, `added p_work_0\n`)
	w.call(t, a, "", pa, 30, true)
	w.call(t, b, "", pb, 20, true)
	w.check(t, r)
	r.send(t, "list")
	r.waitFor(t, fmt.Sprintf(`probe/p_work_0 +enabled +hits=50 +work\+0x0/0x[0-9a-f]+ +p:work i=%%di:s64  \([^)]+\)\n  pid %d: hits=30(, [^\n]*)?\n  pid %d: hits=20(, [^\n]*)?\n`, pa, pb))

	r.send(t, "disable p_work_0")
	r.waitFor(t, `disabled p_work_0\n`)
	w.call(t, a, "", pa, 5, false)
	w.call(t, b, "", pb, 5, false)
	r.send(t, "enable p_work_0")
	r.waitFor(t, `enabled p_work_0\n`)
	w.call(t, a, "", pa, 3, true)
	w.call(t, b, "", pb, 4, true)
	w.check(t, r)
	// An action's disable: switches the name in every process, as the
	// command does: the first return of work, in the first, disables
	// p_work_0 in both (before, the second's stayed on, and traced its
	// first call).
	r.send(t, "add r:work => disable:p_work_0")
	r.waitFor(t, `added r_work_0\n`)
	w.call(t, a, "", pa, 1, true) // (its entry traced; its return disables)
	w.call(t, b, "", pb, 3, false)
	w.check(t, r)
	r.send(t, "del r_work_0")
	r.waitFor(t, `deleted r_work_0 \(4 hits\)\n`)
	r.send(t, "enable p_work_0")
	r.waitFor(t, `enabled p_work_0\n`)
	w.del(t, r, 58)
	w.call(t, a, "", pa, 10, false)
	w.call(t, b, "", pb, 10, false)
	w.check(t, r)

	// In the first, not in the second: in neither, said once.
	r.send(t, "add p:extra")
	r.waitFor(t, fmt.Sprintf(`probe: pid %d: unknown symbol "extra".*; taken out again of pid %d\n`, pb, pa))
	a.send(t, "extra 7")
	a.waitStdout(t, fmt.Sprintf("pid %d: 7 extra\n", pa), 20*time.Second)
	r.send(t, "add p:nosuch")
	r.waitFor(t, fmt.Sprintf(`probe: pid %d: unknown symbol "nosuch"`, pa))
	r.send(t, "list")
	r.waitFor(t, `no probes\n`)
	r.send(t, "stats")
	r.waitFor(t, fmt.Sprintf(`probe hits: 0\ntraced: pids %d, %d\n`, pa, pb))
	if n := strings.Count(r.text(), "unknown symbol"); n != 2 {
		t.Errorf("%d errors of unknown symbols, want one for each add; output:\n%s", n, limit(r.text()))
	}
	w.check(t, r) // (nothing of extra: not an i= event)
	if strings.Contains(r.text(), "p_extra_0:") {
		t.Fatalf("extra traced, refused in one process; output:\n%s", limit(r.text()))
	}

	// The first ends: the other goes on, the only one.
	a.in.Close()
	if res := a.wait(t, 20*time.Second); res.code != 0 {
		t.Fatalf("%s: %v", a.desc, res)
	}
	r.waitFor(t, fmt.Sprintf(`probe: pid %d exited with status 0; tracing pid %d on\n`, pa, pb))
	r.send(t, "add p:work i=%di:s64")
	r.waitFor(t, `(?s)added p_work_0\n.*added p_work_0\n`)
	w.call(t, b, "", pb, 6, true)
	w.check(t, r)
	b.in.Close()
	r.waitFor(t, fmt.Sprintf(`probe: pid %d exited with status 0; the session ends\n`, pb))
	if code := r.wait(t); code != 0 {
		t.Fatalf("probe: exit status %d, want 0; output:\n%s", code, limit(r.text()))
	}
	if res := b.wait(t, 20*time.Second); res.code != 0 {
		t.Fatalf("%s: %v", b.desc, res)
	}
}

// TestREPLFollowFork: with -f, a child forked after the REPL started has
// the probes as they are at the fork; del, add, disable, enable and the
// tracer given after the fork act on the child too, its calls counted
// exactly apart from its parent's; its exit is said, and the parent's
// ends the session.
func TestREPLFollowFork(t *testing.T) {
	p, pid, r, w := startFollowed(t)
	w.call(t, p, "", pid, 4, true)
	child := forkCalls(t, p, "fork")
	w.total[child] = w.total[pid] // (its count goes on from its parent's)
	w.call(t, p, "child ", child, 3, true)
	w.check(t, r)
	r.send(t, "list")
	// One probe, the parent's shared with the child since the fork.
	r.waitFor(t, fmt.Sprintf(`probe/p_work_0 +enabled +hits=7 .*\n  pids %d, %d: hits=7\n`, pid, child))

	w.del(t, r, 7)
	w.call(t, p, "child ", child, 2, false)
	w.call(t, p, "", pid, 2, false)
	w.check(t, r)
	r.send(t, "add p:work i=%di:s64")
	r.waitFor(t, `(?s)added p_work_0\n.*added p_work_0\n`)
	w.call(t, p, "child ", child, 5, true)
	w.call(t, p, "", pid, 1, true)
	w.check(t, r)
	r.send(t, "list")
	r.waitFor(t, fmt.Sprintf(`probe/p_work_0 +enabled +hits=6 .*\n  pid %d: hits=1\n  pid %d: hits=5\n`, pid, child))
	r.send(t, "disable p_work_0")
	r.waitFor(t, `disabled p_work_0\n`)
	w.call(t, p, "child ", child, 2, false)
	r.send(t, "enable p_work_0")
	r.waitFor(t, `enabled p_work_0\n`)
	w.call(t, p, "child ", child, 3, true)
	w.check(t, r)

	r.send(t, "filter work")
	r.send(t, "tracer function_graph")
	r.send(t, "stats") // (the section's header waits for its first event)
	r.waitFor(t, `tracer: function_graph\n`)
	p.send(t, "child call 1")
	r.waitFor(t, fmt.Sprintf(`\d\)\s+\S+-%d\s+\|\s+[+!#*@$ ]\s*\d+\.\d+ us\s+\|\s+work\(\);\n`, child))
	w.total[child]++ // (its probe's hit is a comment of the graph)
	r.send(t, "tracer nop")
	r.send(t, "stats")
	r.waitFor(t, `tracer: nop\n`)
	w.check(t, r)
	w.del(t, r, 10)

	p.in.Close()
	// The child ends first (its parent waits for it), said on its own,
	// or with its parent's when that comes before the session says it.
	r.waitFor(t, fmt.Sprintf(`probe: pid %[1]d exited with status 0; tracing pid %[2]d on\n(?s:.*)probe: pid %[2]d exited with status 0; the session ends\n|`+
		`probe: pid %[1]d exited with status 0, pid %[2]d exited with status 0; the session ends\n`, child, pid))
	if code := r.wait(t); code != 0 {
		t.Fatalf("probe: exit status %d, want 0; output:\n%s", code, limit(r.text()))
	}
	if res := p.wait(t, 20*time.Second); res.code != 0 || !strings.HasSuffix(res.stdout, "child exit 0\n") {
		t.Fatalf("%s: %v", p.desc, res)
	}
	if regexp.MustCompile(`probe: .*(error|failed)`).MatchString(r.text()) {
		t.Errorf("an error in the session; output:\n%s", limit(r.text()))
	}
}

// TestREPLStoppedProcess: a process of the session stopped by SIGSTOP
// takes no doorbell until a SIGCONT, which discards it; commands reach it
// all the same, at once, and its calls are counted once it runs again.
func TestREPLStoppedProcess(t *testing.T) {
	a, b := startCalls(t, callsBin(t, false)), startCalls(t, callsBin(t, false))
	pa, pb := a.pid(), b.pid()
	r := startREPL(t, nil, false, "attach", "--repl", fmt.Sprintf("%d,%d", pa, pb))
	w := &workCalls{want: map[int][]int{}, total: map[int]int{}}
	r.send(t, "stats") // (the attach is done: the stop below is the program's own)
	r.waitFor(t, `probe hits: 0\n`)
	b.signal(t, syscall.SIGSTOP)
	waitTraceStopped(t, pb)
	r.send(t, "add p:work i=%di:s64")
	r.waitFor(t, `added p_work_0\n`)
	r.send(t, "list")
	r.waitFor(t, fmt.Sprintf(`probe/p_work_0 +enabled +hits=0 .*\n  pid %d: hits=0\n  pid %d: hits=0\n`, pa, pb))
	b.signal(t, syscall.SIGCONT)
	w.call(t, a, "", pa, 3, true)
	w.call(t, b, "", pb, 4, true)
	w.check(t, r)
	r.send(t, "detach")
	if code := r.wait(t); code != 0 {
		t.Fatalf("probe: exit status %d, want 0; output:\n%s", code, limit(r.text()))
	}
}

// TestREPLBellStopped: the session's first process exits while its one
// child, followed, is stopped by SIGSTOP. The session's doorbell moves to
// the child, where a SIGSTOP is not heard until SIGCONT: commands must
// still be answered at once, and the child run on when continued.
func TestREPLBellStopped(t *testing.T) {
	p, pid, r, w := startFollowed(t)
	child := forkCalls(t, p, "forksid")                        // (a stopped child of a session of its own: not sent SIGHUP when orphaned)
	t.Cleanup(func() { syscall.Kill(child, syscall.SIGKILL) }) // (stopped for ever if the test fails)
	w.call(t, p, "child ", child, 3, true)
	w.check(t, r)
	if err := syscall.Kill(child, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	waitTraceStopped(t, child)
	p.send(t, "exit")
	r.waitFor(t, fmt.Sprintf(`probe: pid %d exited with status 0; tracing pid %d on\n`, pid, child))
	r.send(t, "list")
	r.waitFor(t, `probe/p_work_0 +enabled +hits=3 .*\n`)
	r.send(t, "del p_work_0")
	r.waitFor(t, `deleted p_work_0 \(3 hits\)\n`)
	if st, _ := taskState(child, child); st != 't' {
		t.Errorf("pid %d in state %c after the commands, want t (stopped)", child, st)
	}
	// Continued, it reads the end of its input and exits.
	if err := syscall.Kill(child, syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	r.waitFor(t, fmt.Sprintf(`probe: pid %d exited with status 0; the session ends\n`, child))
	if code := r.wait(t); code != 0 {
		t.Fatalf("probe: exit status %d, want 0; output:\n%s", code, limit(r.text()))
	}
}

// waitTraceStopped waits for process pid, sent SIGSTOP, to be stopped
// (state t: traced, in its group-stop).
func waitTraceStopped(t *testing.T, pid int) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if st, _ := taskState(pid, pid); st == 't' {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("pid %d not stopped 10 s after SIGSTOP:\n%s", pid, threadStates(pid))
		}
	}
}

// forkCalls has calls process p fork by command cmd ("fork", "forksid")
// and returns the child's pid.
func forkCalls(t *testing.T, p *piped, cmd string) int {
	t.Helper()
	p.send(t, cmd)
	p.waitStdout(t, "forked ", 20*time.Second)
	var child int
	out := p.stdout.String()
	fmt.Sscanf(out[strings.Index(out, "forked "):], "forked %d", &child)
	return child
}

// startFollowed starts a calls process and a REPL session that follows
// its forks (-f), with p:work added.
func startFollowed(t *testing.T) (p *piped, pid int, r *replSession, w *workCalls) {
	t.Helper()
	p = startCalls(t, callsBin(t, false))
	pid = p.pid()
	r = startREPL(t, nil, false, "attach", "-f", "--repl", fmt.Sprint(pid))
	w = &workCalls{want: map[int][]int{}, total: map[int]int{}}
	r.send(t, "add p:work i=%di:s64")
	r.waitFor(t, `added p_work_0\n`)
	return p, pid, r, w
}
