package integration

import (
	"bytes"
	"fmt"
	"io"
	"math/rand"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The load and fault suite (issue 8): probe under heavy hitting for a long
// time, and every way a trace can end badly. The tracee, stress.c, checks
// itself: every result of its calls, and its text against its files.

// loadDuration is how long TestLoadEntryReturn hits its probes.
const loadDuration = 30 * time.Second

// stressVariant is how stress is compiled: -O0 without CET, so that work()
// starts with push %rbp (a thread let go one byte past the breakpoint
// crashes, rather than running the rest of an endbr64 as a nop), or -O2.
type stressVariant string

const (
	stressO0 stressVariant = "O0"
	stressO2 stressVariant = "O2"
)

// stressBin builds testdata/reliability/stress.c as v, once per run.
func stressBin(t *testing.T, v stressVariant) string {
	t.Helper()
	flags := []string{"-O2", "-g", "-pthread", "-Wall"}
	if v == stressO0 {
		flags = []string{"-O0", "-g", "-pthread", "-Wall", "-fcf-protection=none"}
	}
	return builtOnce(t, "stress_"+string(v), filepath.Join("testdata", "reliability", "stress.c"), flags...)
}

var (
	faultOnce  sync.Once
	faultProbe string
	faultErr   error
)

// faultProbeBin builds probe with -tags probetest: its PROBE_TEST_PANIC
// injects a panic in the ptrace thread (probe/faultinject_probetest.go).
func faultProbeBin(t *testing.T) string {
	t.Helper()
	faultOnce.Do(func() {
		faultProbe = filepath.Join(binDir, "probe-probetest")
		faultErr = build(repoRoot, "go", "build", "-tags", "probetest", "-o", faultProbe, "./cmd/probe")
	})
	if faultErr != nil {
		t.Fatal(faultErr)
	}
	return faultProbe
}

// send writes a command line to the process's stdin.
func (p *piped) send(t *testing.T, line string) {
	t.Helper()
	if _, err := io.WriteString(p.in, line+"\n"); err != nil {
		t.Fatalf("%s: write %q: %v\n%v", p.desc, line, err, p.stdout.String())
	}
}

// waitCount waits until the process's stdout holds s n times.
func (p *piped) waitCount(t *testing.T, s string, n int, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for strings.Count(p.stdout.String(), s) < n {
		if p.exited() {
			t.Fatalf("%s exited before printing %q %d times\n%v", p.desc, s, n, p.res)
		}
		if time.Now().After(deadline) {
			// Where its threads are, for a hang: stopped (t) under a
			// tracer, or waiting in the kernel.
			t.Fatalf("%s did not print %q %d times within %v; stdout:\n%s\nstderr:\n%s\nthreads:\n%s", p.desc, s, n, timeout, limit(p.stdout.String()), p.stderr.String(), threadsReport(p.cmd.Process.Pid))
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// startStress starts stress (args: "spin" or "cmd", threads) untraced and
// waits for "ready".
func startStress(t *testing.T, v stressVariant, args ...string) *piped {
	t.Helper()
	p := startPiped(t, nil, stressBin(t, v), args...)
	p.waitStdout(t, "ready\n", 20*time.Second)
	return p
}

// stressOutput is what stress spin|cmd prints at "stop" when nothing went
// wrong: it does not depend on how long the workers ran.
func stressOutput(threads int, extra ...string) string {
	var sb strings.Builder
	sb.WriteString("ready\n")
	for _, e := range extra {
		sb.WriteString(e + "\n")
	}
	for i := 0; i < threads; i++ {
		fmt.Fprintf(&sb, "worker %d ok\n", i)
	}
	sb.WriteString("text ok\n")
	return sb.String()
}

// callsRE matches stress's stderr: a count at each pause, then at the end.
var callsRE = regexp.MustCompile(`^(?:calls=\d+\n)*calls=(\d+)\n$`)

// stopStress ends stress with "stop" and checks that it exited 0 having
// printed want; it returns the number of calls of work() it made.
func stopStress(t *testing.T, p *piped, want string) int {
	t.Helper()
	p.send(t, "stop")
	r := p.wait(t, 60*time.Second)
	m := callsRE.FindStringSubmatch(r.stderr)
	if r.code != 0 || r.stdout != want || m == nil {
		t.Fatalf("stress: %v\nwant exit 0, stdout\n%sand stderr calls=N", r, want)
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

// checkFree checks that no thread of the stress process pid is traced or
// stopped, then that it finds its text and its results intact: "check"
// to p, whose output shows "check ok" (p is stress, or probe run of it).
func checkFree(t *testing.T, p *piped, pid int, checks *int) {
	t.Helper()
	checkFreeAfter(t, p, pid, checks, "")
}

// checkFreeAfter is checkFree, saying what happened before if it fails.
func checkFreeAfter(t *testing.T, p *piped, pid int, checks *int, after string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		free := true
		tids, err := taskIDs(pid)
		if err != nil {
			// How it died: a signal's number is in the exit status.
			t.Fatalf("tracee %d is gone (%v) %s: %v", pid, err, after, p.wait(t, 5*time.Second))
		}
		for _, tid := range tids {
			tp, err1 := tracerPid(pid, tid)
			st, err2 := taskState(pid, tid)
			if err1 != nil || err2 != nil || tp != 0 || st == 't' || st == 'T' {
				free = false
			}
		}
		if free {
			break
		}
		if time.Now().After(deadline) {
			status, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
			t.Fatalf("tracee %d still traced or stopped after probe exited %s:\n%s%s", pid, after, threadsReport(pid), status)
		}
		time.Sleep(5 * time.Millisecond)
	}
	*checks++
	p.send(t, "check")
	p.waitCount(t, "check ", *checks, 20*time.Second)
	if strings.Contains(p.stdout.String(), "check BAD") {
		t.Fatalf("tracee %d found its text or its results corrupted:\n%s", pid, limit(p.stdout.String()))
	}
}

// countRE matches an action's count table header, e.g.
// "# count of probe/p_work_0: 67356 hits, 1 key".
var countRE = regexp.MustCompile(`(?m)^# count of probe/(\S+): (\d+) hits`)

// counts returns the hits of each probe's count action in out.
func counts(out string) map[string]int {
	m := map[string]int{}
	for _, c := range countRE.FindAllStringSubmatch(out, -1) {
		m[c[1]], _ = strconv.Atoi(c[2])
	}
	return m
}

// rssKiB reads VmRSS of pid ("VmRSS:    17144 kB"), or -1 once it is gone.
func rssKiB(pid int) int {
	v, err := statusValue(fmt.Sprintf("/proc/%d/status", pid), "VmRSS:")
	if err != nil {
		return -1
	}
	n, err := strconv.Atoi(strings.TrimSuffix(v, " kB"))
	if err != nil {
		return -1
	}
	return n
}

// ---------------------------------------------------------------------

// canaryLost is the note of hits in flight at detach, which the canary's
// may be.
var canaryLost = regexp.MustCompile(`^# 1 hits lost while detaching$`)

// TestLoadEntryReturn: 8 threads hit an entry and a return probe for
// loadDuration. Every call is counted (the tracee's own count of the calls
// made while probe was attached equals each probe's), the tracee's output
// is byte-identical to an untraced run's and probe's memory stops growing.
func TestLoadEntryReturn(t *testing.T) {
	t.Parallel()
	const threads = 8
	want := stressOutput(threads, "paused", "resumed", "paused", "check ok", "resumed")
	// The workers are paused while probe attaches and detaches: the
	// calls between the two pauses are the calls made under probes.
	untraced := startStress(t, stressO2, "spin", strconv.Itoa(threads))
	for _, c := range []string{"pause", "resume", "pause", "check", "resume"} {
		untraced.send(t, c)
	}
	stopStress(t, untraced, want)

	s := startStress(t, stressO2, "spin", strconv.Itoa(threads))
	s.send(t, "pause")
	s.waitStdout(t, "paused\n", 30*time.Second)
	// The stopping engine: in-process, a tracee this hot outruns the
	// drain and loses records, counted (TestInProcessRingFull).
	pr := startProbe(t, "attach", "--no-inprocess", strconv.Itoa(s.pid()), "p:canary", "p:work => count", "r:work => count")
	pr.waitStdout(t, "p_canary_0", 30*time.Second)
	s.send(t, "resume")
	var rss []int
	end := time.Now().Add(loadDuration)
	for time.Now().Before(end) {
		if kb := rssKiB(pr.pid()); kb > 0 {
			rss = append(rss, kb)
		}
		time.Sleep(250 * time.Millisecond)
	}
	s.send(t, "pause")
	for deadline := time.Now().Add(cmdTimeout); strings.Count(s.stdout.String(), "paused\n") < 2; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			// A hang: where the tracee's threads are, and probe's
			// goroutines (a Go program dumps them at SIGQUIT).
			threads := threadsReport(s.pid())
			pr.signal(t, syscall.SIGQUIT)
			r := pr.wait(t, 30*time.Second)
			t.Fatalf("the tracee did not pause within %v; its threads:\n%s\nprobe's stderr:\n%s", cmdTimeout, threads, r.stderr)
		}
	}
	pr.signal(t, os.Interrupt)
	r := pr.wait(t, 60*time.Second)
	if r.code != 0 || r.stderr != "" {
		t.Fatalf("probe attach: %v", r)
	}
	checks := 0
	checkFree(t, s, s.pid(), &checks)
	s.send(t, "resume")
	s.waitCount(t, "resumed\n", 2, 30*time.Second)
	s.send(t, "stop")
	res := s.wait(t, 60*time.Second)
	var calls [3]int
	if n, _ := fmt.Sscanf(res.stderr, "calls=%d\ncalls=%d\ncalls=%d\n", &calls[0], &calls[1], &calls[2]); res.code != 0 || n != 3 || res.stdout != want {
		t.Fatalf("stress: %v\nwant exit 0 and the untraced output\n%s", res, want)
	}
	underProbe := calls[1] - calls[0]
	got := counts(r.stdout)
	// The main thread hits p:canary every millisecond, also while probe
	// detaches: a canary hit may be "lost while detaching" (the workers,
	// paused, cannot be). Any other loss (returns, events) is a failure.
	var lost []string
	for _, l := range strings.Split(r.stdout, "\n") {
		if strings.Contains(l, "lost") && !canaryLost.MatchString(l) {
			lost = append(lost, l)
		}
	}
	if got["p_work_0"] != underProbe || got["r_work_0"] != underProbe || len(lost) > 0 {
		t.Errorf("hits %v, want %d entries and returns (the tracee's own count), none lost; lines saying lost: %q", got, underProbe, lost)
	}

	// Memory: after the first half the maximum must hold, within a
	// quarter (the Go heap's target moves), and stay under 64 MiB.
	if len(rss) < 8 {
		t.Fatalf("only %d RSS samples of probe", len(rss))
	}
	half := len(rss) / 2
	first, second := maxOf(rss[:half]), maxOf(rss[half:])
	t.Logf("%d calls in %v (%.0f/s, entry+return); probe VmRSS max %d KiB in the first half, %d KiB in the second",
		underProbe, loadDuration, float64(underProbe)/loadDuration.Seconds(), first, second)
	if second > first+first/4 || second > 64<<10 {
		t.Errorf("probe's VmRSS grows under load: max %d KiB in the first half, %d KiB in the second (bound: +25%%, 64 MiB)", first, second)
	}
}

func maxOf(xs []int) int {
	m := 0
	for _, x := range xs {
		m = max(m, x)
	}
	return m
}

// waitDumping is p.wait for a probe process; if it hangs, SIGQUIT makes
// Go print where each goroutine is, shown with the failure.
func waitDumping(t *testing.T, p *bg, timeout time.Duration) result {
	t.Helper()
	select {
	case <-p.done:
		return p.res
	case <-time.After(timeout):
	}
	p.cmd.Process.Signal(syscall.SIGQUIT)
	r := p.wait(t, 10*time.Second)
	t.Fatalf("%s (pid %d) did not exit within %v; SIGQUIT (full dump: %s):\n%v", p.desc, p.pid(), timeout, keepDump(p.pid(), r.stderr), r)
	return r
}

// stressChild returns the pid of the stress process launched by probe run.
func stressChild(t *testing.T, probePid int) int {
	t.Helper()
	tids, err := taskIDs(probePid)
	if err != nil {
		t.Fatal(err)
	}
	for _, tid := range tids {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", probePid, tid))
		if f := strings.Fields(string(b)); len(f) > 0 {
			n, _ := strconv.Atoi(f[0])
			return n
		}
	}
	t.Fatalf("probe (pid %d) has no child", probePid)
	return 0
}

// TestFaultTraceeKilled: a tracee SIGKILLed while probe attach installs
// its probes, or while 8 threads hit entry and return probes, is reported
// as killed, and probe exits cleanly: 0 for attach, 128+9 for run (the
// program's status), one line on stderr.
func TestFaultTraceeKilled(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewSource(logSeed(t)))
	exe := stressBin(t, stressO2)
	for i := 0; i < 10; i++ {
		delay := time.Duration(rng.Intn(300)) * time.Millisecond
		if i%4 == 0 {
			delay = time.Duration(rng.Intn(10_000)) * time.Microsecond // while probes go in
		}
		if i%2 == 0 {
			s := startStress(t, stressO2, "spin", "8")
			pr := startProbe(t, "attach", strconv.Itoa(s.pid()), "p:work => count", "r:work => count")
			waitTracedBy(t, s.pid(), pr.pid(), 20*time.Second)
			time.Sleep(delay)
			s.signal(t, syscall.SIGKILL)
			r := waitDumping(t, pr, 30*time.Second)
			// Killed while the probes go in, not every one may be:
			// the count tables are not checked.
			if want := fmt.Sprintf("probe: pid %d killed by SIGKILL\n", s.pid()); r.code != 0 || r.stderr != want {
				t.Errorf("attach, killed after %v: %v\nwant exit 0 and stderr %q", delay, r, want)
			}
			continue
		}
		pr := startPiped(t, nil, probeBin, "run", "p:work => count", "r:work => count", "--", exe, "spin", "8")
		pr.waitStdout(t, "ready\n", 20*time.Second)
		time.Sleep(delay)
		syscall.Kill(stressChild(t, pr.pid()), syscall.SIGKILL)
		r := waitDumping(t, pr.bg, 30*time.Second)
		if want := fmt.Sprintf("probe: %s killed by SIGKILL\n", exe); r.code != 128+9 || r.stderr != want || len(counts(r.stdout)) != 2 {
			t.Errorf("run, killed after %v: %v\nwant exit 137, stderr %q and both counts", delay, r, want)
		}
	}
}

// TestFaultExitWhileInProbe: threads stopped at probes (entry, in their
// displaced instruction, on the return trampoline) when another thread
// ends the process with exit_group; threads that end inside a probed
// function (pthread_exit, the exit system call) while its return is
// hijacked. The process ends as untraced, probe cleanly.
func TestFaultExitWhileInProbe(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewSource(logSeed(t)))
	t.Run("exit_group", func(t *testing.T) {
		exe := stressBin(t, stressO0)
		for i := 0; i < 6; i++ {
			delay := time.Duration(rng.Intn(200)) * time.Millisecond
			if i%2 == 0 {
				s := startStress(t, stressO0, "spin", "8")
				pr := startProbe(t, "attach", strconv.Itoa(s.pid()), "p:work => count", "r:work => count", "r:rec => count")
				waitTracedBy(t, s.pid(), pr.pid(), 20*time.Second)
				time.Sleep(delay)
				s.send(t, "exit 7")
				if res := s.wait(t, 30*time.Second); res.code != 7 {
					t.Errorf("tracee: %v, want exit status 7", res)
				}
				if r := waitDumping(t, pr, 30*time.Second); r.code != 0 || r.stderr != "" || len(counts(r.stdout)) != 3 {
					t.Errorf("attach, exit_group after %v: %v\nwant exit 0, no stderr, 3 counts", delay, r)
				}
				continue
			}
			pr := startPiped(t, nil, probeBin, "run", "p:work => count", "r:work => count", "r:rec => count", "--", exe, "spin", "8")
			pr.waitStdout(t, "ready\n", 20*time.Second)
			time.Sleep(delay)
			pr.send(t, "exit 7")
			if r := waitDumping(t, pr.bg, 30*time.Second); r.code != 7 || r.stderr != "" || len(counts(r.stdout)) != 3 {
				t.Errorf("run, exit_group after %v: %v\nwant exit 7, no stderr, 3 counts", delay, r)
			}
		}
	})
	t.Run("thread_exit", func(t *testing.T) {
		for _, v := range []stressVariant{stressO0, stressO2} {
			exe := stressBin(t, v)
			const rounds, threads = 20, 16
			want := runCmd(t, nil, exe, "exits", strconv.Itoa(rounds), strconv.Itoa(threads))
			if want.code != 0 || want.stdout != "threads=320 work=3200\n" {
				t.Fatalf("stress exits untraced: %v", want)
			}
			ev := filepath.Join(t.TempDir(), "counts")
			r := probe(t, "run", "-o", ev, "p:work => count", "p:leave => count", "r:leave => count",
				"--", exe, "exits", strconv.Itoa(rounds), strconv.Itoa(threads))
			if r.code != 0 || r.stdout != want.stdout || r.stderr != "" {
				t.Fatalf("%s: probe run: %v\nwant the untraced output %q", v, r, want.stdout)
			}
			data, _ := os.ReadFile(ev)
			// leave(i) returns for i%3 == 2 only: 106 of 0..319.
			if got := counts(string(data)); got["p_work_0"] != 3200 || got["p_leave_0"] != 320 || got["r_leave_0"] != 106 {
				t.Errorf("%s: hits %v, want p_work_0:3200 p_leave_0:320 r_leave_0:106\n%s", v, got, data)
			}
		}
	})
}

// TestAttachTraceeEndsAtOnce: a program that ends (exit_group) as soon
// as it sees a tracer meets probe attach anywhere in its attaching and
// installing; probe exits 0 and says nothing on stderr (the process
// ended, as it would later), and every count asked for is printed, of
// the probes that went in and, empty, of those that had not.
func TestAttachTraceeEndsAtOnce(t *testing.T) {
	t.Parallel()
	exe := builtOnce(t, "exitontrace", filepath.Join("testdata", "reliability", "exitontrace.c"), "-O2", "-g", "-pthread", "-Wall")
	for i := range 6 {
		p := startPiped(t, nil, exe)
		p.waitStdout(t, "ready\n", 20*time.Second)
		r := probe(t, "attach", strconv.Itoa(p.pid()), "p:work => count", "r:work => count", "p:probe/work_a work a=%di => count")
		got := counts(r.stdout)
		_, p0 := got["p_work_0"]
		_, r0 := got["r_work_0"]
		_, pa := got["work_a"]
		if r.code != 0 || r.stderr != "" || len(got) != 3 || !p0 || !r0 || !pa {
			t.Errorf("trial %d: %v\nwant exit 0, no stderr, the counts of p_work_0, r_work_0 and work_a", i, r)
		}
		if res := p.wait(t, 10*time.Second); res.code != 7 {
			t.Errorf("trial %d: the program: %v, want exit status 7", i, res)
		}
	}
}

// signalTrials attaches probe (args) to a fresh stress process, n times,
// and sends it SIGINT, SIGTERM or SIGHUP at a random moment within 80 ms
// of its start or, in half the trials, of its attaching (now and then a
// second one just after, a user pressing Ctrl-C twice). After each, the tracee must be neither traced nor
// stopped and must find its text and results intact; at the end every
// worker's results are right. It returns how many trials ended with probe
// killed by the signal: before it caught signals (it had not attached), or
// by a second signal once it had detached.
func signalTrials(t *testing.T, rng *rand.Rand, v stressVariant, n int, args ...string) (early int) {
	t.Helper()
	sigs := []syscall.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP}
	s := startStress(t, v, "spin", "4")
	pid := strconv.Itoa(s.pid())
	checks := 0
	for i := 0; i < n; i++ {
		delay := time.Duration(rng.Intn(80_000)) * time.Microsecond
		sig := sigs[rng.Intn(len(sigs))]
		twice := rng.Intn(4) == 0
		pr := startProbe(t, append([]string{"attach", pid}, args...)...)
		if rng.Intn(2) == 0 {
			// From the moment it attaches (it catches signals
			// before): installing, starting, hitting.
			for tp, _ := tracerPid(s.pid(), s.pid()); tp == 0 && !pr.exited(); tp, _ = tracerPid(s.pid(), s.pid()) {
				time.Sleep(time.Millisecond)
			}
		}
		time.Sleep(delay)
		pr.signal(t, sig)
		if twice {
			time.Sleep(time.Duration(rng.Intn(5000)) * time.Microsecond)
			pr.cmd.Process.Signal(sig)
		}
		r := waitDumping(t, pr, 30*time.Second)
		switch {
		case r.code == 128+int(sig) && r.stderr == "":
			// Killed by the signal before it caught signals (it
			// may have printed the trace's header), or by a second
			// one after it had let the tracee go: either way the
			// tracee must be intact, as checked below.
			early++
		case r.code != 0:
			t.Fatalf("trial %d: %v after %v: %v", i, sig, delay, r)
		default:
			noAlarm(t, r)
		}
		if t.Failed() {
			return early
		}
		trial := fmt.Sprintf("trial %d (%v after %v, twice: %v; probe: %v)", i, sig, delay, twice, r)
		checkFreeAfter(t, s, s.pid(), &checks, trial)
	}
	extra := make([]string, checks)
	for i := range extra {
		extra[i] = "check ok"
	}
	stopStress(t, s, stressOutput(4, extra...))
	return early
}

// TestFaultTracerSignals: probe takes SIGINT, SIGTERM or SIGHUP at random
// moments (while attaching, installing, under heavy hitting of entry and
// return probes) in 200 trials; each time it detaches, and the tracee is
// left running, untraced, with its text and its results intact.
func TestFaultTracerSignals(t *testing.T) {
	t.Parallel()
	seed := logSeed(t)
	const lanes, trials = 4, 50
	var mu sync.Mutex
	early := 0
	t.Cleanup(func() {
		t.Logf("%d trials; probe killed by the signal (before attaching, or by a second one after detaching) in %d", lanes*trials, early)
		if early > lanes*trials/2 {
			t.Errorf("%d of %d trials ended before probe caught signals: too few tested a detach", early, lanes*trials)
		}
	})
	for lane := 0; lane < lanes; lane++ {
		rng := rand.New(rand.NewSource(seed + int64(lane)))
		v := []stressVariant{stressO0, stressO2}[lane%2]
		t.Run(fmt.Sprintf("lane%d_%s", lane, v), func(t *testing.T) {
			t.Parallel()
			n := signalTrials(t, rng, v, trials, "p:work => count", "r:work => count", "r:rec => count")
			mu.Lock()
			early += n
			mu.Unlock()
		})
	}
}

// TestFaultDetachInFlight: detach (SIGINT) at random moments of
// function_graph on a 48-deep recursion, where threads sit on the return
// trampoline with many hijacked frames, and of probes whose displaced
// instructions run single-stepped in out-of-line slots (--no-boost).
func TestFaultDetachInFlight(t *testing.T) {
	t.Parallel()
	seed := logSeed(t)
	for i, args := range [][]string{
		{"-o", os.DevNull, "--tracer", "function_graph", "--filter", "rec,work"},
		{"--no-boost", "p:work => count", fmt.Sprintf("p:rec+%d => count", secondInsnO0), "r:rec => count"},
	} {
		rng := rand.New(rand.NewSource(seed + int64(i)))
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			t.Parallel()
			signalTrials(t, rng, stressO0, 20, args...)
		})
	}
}

// TestFaultPanicInHandler: a panic of ours on the ptrace thread (injected
// in a probe's handler, or a return probe's, in a binary built with
// -tags probetest) ends in a clean detach: one line "internal error",
// exit 1, the tracee left untraced with its text and results intact. The
// shipping binary has no such hook.
func TestFaultPanicInHandler(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile(probeBin)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(data, []byte("PROBE_TEST_PANIC")) {
		t.Errorf("the shipping binary %s contains the test-only fault hook", probeBin)
	}
	bin := faultProbeBin(t)
	rng := rand.New(rand.NewSource(logSeed(t)))
	specs := []string{"p:work => count", "r:work => count"}
	for _, c := range []struct {
		where string
		args  []string
	}{
		{"entry", specs},
		{"return", specs},
		{"return", []string{"-o", os.DevNull, "--tracer", "function_graph", "--filter", "rec"}},
		{"entry", append([]string{"--no-boost"}, specs...)}, // other threads mid-step
	} {
		at := 1 + rng.Intn(2000)
		env := []string{fmt.Sprintf("PROBE_TEST_PANIC=%s:%d", c.where, at)}
		wantErr := fmt.Sprintf("probe: internal error: fault injected at %s %d\n", c.where, at)

		s := startStress(t, stressO0, "spin", "4")
		pr := startBg(t, env, bin, append([]string{"attach", strconv.Itoa(s.pid())}, c.args...)...)
		if r := pr.wait(t, 60*time.Second); r.code != 1 || r.stderr != wantErr {
			t.Errorf("attach %v with %s: %v\nwant exit 1 and stderr %q", c.args, env[0], r, wantErr)
		}
		checks := 0
		checkFree(t, s, s.pid(), &checks)
		stopStress(t, s, stressOutput(4, "check ok"))

		if len(c.args) == len(specs) {
			ev := filepath.Join(t.TempDir(), "counts")
			run := startPiped(t, env, bin, append(append([]string{"run", "-o", ev}, c.args...), "--", stressBin(t, stressO0), "spin", "4")...)
			run.waitStdout(t, "ready\n", 20*time.Second)
			checks := 0
			checkFree(t, run, stressChild(t, run.pid()), &checks)
			run.send(t, "stop")
			r := run.wait(t, 60*time.Second)
			if want := stressOutput(4, "check ok"); r.code != 1 || r.stdout != want || !regexp.MustCompile(`^calls=\d+\n`+regexp.QuoteMeta(wantErr)+`$`).MatchString(r.stderr) {
				t.Errorf("run %v with %s: %v\nwant exit 1, stdout\n%sstderr calls=N and %q", c.args, env[0], r, want, wantErr)
			}
		}
	}
}

// attachedRound attaches probe to s (stress cmd), waits for the probes to
// be in (the canary's first hit), has every worker call work() 250 times,
// runs during (if not nil) while probe is attached, detaches with SIGINT
// and checks that probe counted exactly every call.
func attachedRound(t *testing.T, s *piped, round int, during func(probePid int)) {
	t.Helper()
	const threads, calls = 4, 250
	// The stopping engine: in-process, a tracee this hot outruns the
	// drain and loses records, counted (TestInProcessRingFull).
	pr := startProbe(t, "attach", "--no-inprocess", strconv.Itoa(s.pid()), "p:canary", "p:work => count", "r:work => count")
	pr.waitStdout(t, "p_canary_0", 30*time.Second)
	if during != nil {
		during(pr.pid())
	}
	s.send(t, fmt.Sprintf("go %d", calls))
	s.waitCount(t, fmt.Sprintf("done %d\n", calls), round, 60*time.Second)
	pr.signal(t, os.Interrupt)
	r := waitDumping(t, pr, 30*time.Second)
	if r.code != 0 || r.stderr != "" {
		t.Fatalf("round %d: probe attach: %v", round, r)
	}
	if got := counts(r.stdout); got["p_work_0"] != threads*calls || got["r_work_0"] != threads*calls {
		t.Errorf("round %d: hits %v, want %d entries and returns", round, got, threads*calls)
	}
}

// TestFaultReattach: attach, detach and attach again, 10 times with entry
// and return probes: each time every call made while attached is counted,
// none twice, and after each detach the process is untraced and intact.
func TestFaultReattach(t *testing.T) {
	t.Parallel()
	s := startStress(t, stressO2, "cmd", "4")
	checks := 0
	var extra []string
	for round := 1; round <= 10; round++ {
		attachedRound(t, s, round, nil)
		checkFree(t, s, s.pid(), &checks)
		extra = append(extra, "done 250", "check ok")
	}
	stopStress(t, s, stressOutput(4, extra...))
}

// TestFaultSecondSession: a second probe on a process already probed is
// refused (exit 2, one line naming the process and the probe that traces
// it) and the first one goes on counting every call.
func TestFaultSecondSession(t *testing.T) {
	t.Parallel()
	s := startStress(t, stressO2, "cmd", "4")
	attachedRound(t, s, 1, func(first int) {
		r := probe(t, "attach", strconv.Itoa(s.pid()), "p:work")
		if want := fmt.Sprintf("probe: pid %d: process is already traced by pid %d (probe)\n", s.pid(), first); r.code != 2 || r.stderr != want || r.stdout != "" {
			t.Errorf("second probe attach: %v\nwant exit 2 and stderr %q", r, want)
		}
	})
	checks := 0
	checkFree(t, s, s.pid(), &checks)
	stopStress(t, s, stressOutput(4, "done 250", "check ok"))
}
