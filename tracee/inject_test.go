package tracee

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func TestGapsNear(t *testing.T) {
	maps := []Mapping{
		{Start: 0x555555554000, End: 0x555555559000, Perms: "r-xp"},
		{Start: 0x555555559000, End: 0x55555555a000, Perms: "rw-p"},
		{Start: 0x7ffff7dc0000, End: 0x7ffff7f00000, Perms: "r-xp"},
		{Start: 0x7ffffffde000, End: 0x7ffffffff000, Perms: "rw-p"},
	}
	got := gapsNear(maps, 0x555555554000, 0x40000)
	if len(got) == 0 {
		t.Fatal("no gap")
	}
	// Nearest: right above the program's data, clear of it by the guard
	// (below it the range would start 0x40000 further away).
	if want := uint64(0x55555555a000 + 16*pageSize); got[0] != want {
		t.Errorf("first candidate %#x, want %#x", got[0], want)
	}
	for _, a := range got {
		if a%pageSize != 0 {
			t.Errorf("%#x not page aligned", a)
		}
		for _, m := range maps {
			if a < m.End && a+0x40000 > m.Start {
				t.Errorf("%#x overlaps %#x-%#x", a, m.Start, m.End)
			}
		}
	}
	// A request larger than every gap but the top one lands above.
	if got := gapsNear([]Mapping{{Start: 0x10000 + 16*pageSize, End: 0x7ffffffff000 - 0x100000}}, 0x20000, 0x1000); len(got) != 1 || got[0] < 0x7ffffffff000-0x100000 {
		t.Errorf("got %#x, want one candidate in the top gap", got)
	}
}

// timeScale is PROBE_TIME_SCALE, 1 by default: how much slower than a
// machine's own cores the tests' tracees run (guest/arm64/test's TCG
// guest sets it), for the limits that tell a stuck test from a slow one.
var timeScale = func() time.Duration {
	if n, err := strconv.Atoi(os.Getenv("PROBE_TIME_SCALE")); err == nil && n > 1 {
		return time.Duration(n)
	}
	return 1
}()

// testProgram builds testdata/NAME.c with gcc, or, where there is no
// compiler (guest/arm64/test's guest), takes $TRACEE_TESTDATA/NAME, built
// for it.
func testProgram(t *testing.T, name string) string {
	t.Helper()
	if dir := os.Getenv("TRACEE_TESTDATA"); dir != "" {
		return filepath.Join(dir, name)
	}
	bin := filepath.Join(t.TempDir(), name)
	if out, err := exec.Command("gcc", "-O1", "-o", bin, "testdata/"+name+".c").CombinedOutput(); err != nil {
		t.Fatalf("gcc: %v\n%s", err, out)
	}
	return bin
}

// launchPiped launches test program name, held at its start, its stdout
// a pipe; the calling goroutine's thread is the tracer for the test's
// life, and the program is killed at its end.
func launchPiped(t *testing.T, name string) (*Process, *os.File) {
	t.Helper()
	bin := testProgram(t, name)
	stdout, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stdout.Close() })
	runtime.LockOSThread()
	p, err := Launch([]string{bin}, nil, []*os.File{os.Stdin, w, os.Stderr})
	w.Close()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Kill(p.Pid, unix.SIGKILL) })
	return p, stdout
}

// TestInjectSyscallUnderSignals injects system calls into a thread that
// queued signals keep reaching, stopped in its own code or inside a system
// call of its own: each call returns its own result, every register is put
// back, and every signal is delivered once, none lost and none doubled.
func TestInjectSyscallUnderSignals(t *testing.T) {
	p, stdout := launchPiped(t, "signals")
	lines := bufio.NewReader(stdout)
	// Up to Launch's SIGCONT it stops; then it runs to "ready".
	for sig := 0; sig != int(unix.SIGCONT); {
		if err := p.Cont(p.Pid, 0); err != nil {
			t.Fatal(err)
		}
		ev, err := p.WaitThread(p.Pid)
		if err != nil || ev.Kind == EventExit {
			t.Fatalf("starting: %+v, %v", ev, err)
		}
		if ev.Kind == EventSignal {
			sig = ev.Sig
		}
	}
	if err := p.Cont(p.Pid, int(unix.SIGCONT)); err != nil {
		t.Fatal(err)
	}
	var sigRT unix.Signal
	if line, err := lines.ReadString('\n'); err != nil || !strings.HasPrefix(line, "ready ") {
		t.Fatalf("tracee said %q, %v", line, err)
	} else if n, err := strconv.Atoi(strings.TrimSpace(line[len("ready "):])); err != nil {
		t.Fatalf("tracee said %q", line)
	} else {
		sigRT = unix.Signal(n)
	}
	var sent atomic.Int64
	stop := make(chan struct{})
	sending := make(chan struct{})
	go func() {
		defer close(sending)
		rng := rand.New(rand.NewSource(time.Now().UnixNano()))
		for {
			select {
			case <-stop:
				return
			default:
			}
			if unix.Tgkill(p.Pid, p.Pid, sigRT) == nil {
				sent.Add(1)
			}
			time.Sleep(time.Duration(rng.Intn(200)) * time.Microsecond)
		}
	}()
	// A call that never returns (the thread stopped for signal after
	// signal, never running the instruction) fails the test, not the run.
	stuck := time.AfterFunc(60*time.Second*timeScale, func() { unix.Kill(p.Pid, unix.SIGKILL) })
	defer stuck.Stop()
	const calls = 400
	for i := 0; i < calls; i++ {
		tid, err := p.Hold()
		if err != nil {
			t.Fatalf("call %d: hold: %v", i, err)
		}
		var before, after unix.PtraceRegs
		if err := p.GetRegs(tid, &before); err != nil {
			t.Fatal(err)
		}
		nr, want := uint64(unix.SYS_GETPID), uint64(p.Pid)
		if i%2 == 1 {
			nr, want = unix.SYS_GETPPID, uint64(os.Getpid())
		}
		got, err := p.InjectSyscall(tid, nr)
		if err != nil || got != want {
			t.Fatalf("call %d: system call %d gave %d, %v; want %d", i, nr, got, err, want)
		}
		if err := p.GetRegs(tid, &after); err != nil {
			t.Fatal(err)
		}
		if !sameRegs(after, before) {
			t.Fatalf("call %d: registers not put back:\n got %+v\nwant %+v", i, after, before)
		}
		if err := p.Cont(tid, 0); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	<-sending

	t.Logf("%d system calls injected, %d signals sent", calls, sent.Load())
	// SIGRTMIN+1 is delivered after every SIGRTMIN still queued.
	unix.Tgkill(p.Pid, p.Pid, sigRT+1)
	for {
		ev, err := p.WaitThread(p.Pid)
		if errors.Is(err, ErrNoProcess) || err == nil && ev.Kind == EventExit {
			break // a zombie may be seen before its exit is reported
		}
		if err != nil {
			t.Fatal(err)
		}
		sig := 0
		if ev.Kind == EventSignal {
			sig = ev.Sig
		}
		if err := p.Cont(ev.Tid, sig); err != nil {
			t.Fatal(err)
		}
	}
	line, err := lines.ReadString('\n')
	if want := fmt.Sprintf("%d\n", sent.Load()); line != want {
		t.Errorf("the tracee counted %q SIGRTMIN, %v; %d were sent", line, err, sent.Load())
	}
}

// TestInjectKeepsTrapState injects system calls into a thread interrupted
// in a nanosleep of its own, with SIGTRAP blocked and ignored: no step is
// taken (its forced SIGTRAP would reset SIG_IGN and unblock SIGTRAP), and
// the thread's sleep is resumed as the kernel would, neither cut short
// nor restarted from its start (the injections are 200-300 ms into the
// 1 s sleep: a restart from there would end past 1200 ms; TCG's
// slowness adds ~70 ms to a right one).
func TestInjectKeepsTrapState(t *testing.T) {
	p, lines := launchRunning(t, "trapkeep")
	if line, err := lines.ReadString('\n'); err != nil || line != "ready\n" {
		t.Fatalf("tracee said %q, %v", line, err)
	}
	time.Sleep(200 * time.Millisecond) // into its nanosleep
	for i := 0; i < 3; i++ {
		tid, err := p.Hold()
		if err != nil {
			t.Fatal(err)
		}
		var regs unix.PtraceRegs
		if err := p.GetRegs(tid, &regs); err != nil {
			t.Fatal(err)
		}
		if !TrapIgnored(p.Pid) || i == 0 && !inCallToRestart(p, &regs) {
			t.Fatalf("held at %#x with rax %#x: not in a nanosleep to restart, or SIGTRAP not ignored", regs.PC(), Result(&regs))
		}
		if got, err := p.InjectSyscall(tid, unix.SYS_GETPID); err != nil || got != uint64(p.Pid) {
			t.Fatalf("getpid gave %d, %v", got, err)
		}
		if !TrapIgnored(p.Pid) {
			t.Fatalf("injection %d: SIGTRAP is no longer ignored", i)
		}
		if err := p.Cont(tid, 0); err != nil {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	runToExit(t, p)
	line, _ := lines.ReadString('\n')
	var ms int
	var err error
	rest, ok := strings.CutPrefix(line, "nanosleep=0 ms=")
	if ok {
		rest, ok = strings.CutSuffix(rest, " blocked=1 ignored=1\n")
	}
	if ok {
		ms, err = strconv.Atoi(rest)
	}
	if !ok || err != nil || ms < 1000 || ms >= 1150 {
		t.Errorf("the tracee said %q, want a sleep of 1000 ms (not 1150 or more: restarted from its start) and SIGTRAP blocked and ignored", line)
	}
}

// launchRunning launches test program name, with this thread the tracer
// for the test's life, lets it run past Launch's stops and returns it
// and its standard output.
func launchRunning(t *testing.T, name string) (*Process, *bufio.Reader) {
	t.Helper()
	bin := testProgram(t, name)
	stdout, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stdout.Close() })
	runtime.LockOSThread()
	p, err := Launch([]string{bin}, nil, []*os.File{os.Stdin, w, os.Stderr})
	w.Close()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Kill(p.Pid, unix.SIGKILL) })
	for sig := 0; sig != int(unix.SIGCONT); {
		if err := p.Cont(p.Pid, 0); err != nil {
			t.Fatal(err)
		}
		ev, err := p.WaitThread(p.Pid)
		if err != nil || ev.Kind == EventExit {
			t.Fatalf("starting: %+v, %v", ev, err)
		}
		if ev.Kind == EventSignal {
			sig = ev.Sig
		}
	}
	if err := p.Cont(p.Pid, int(unix.SIGCONT)); err != nil {
		t.Fatal(err)
	}
	return p, bufio.NewReader(stdout)
}

// TestInjectCallKeepsSleep calls a function of a thread interrupted in a
// 1 s nanosleep of its own, first as the first thing injected, then
// after an injected system call: each call returns its result, and the
// sleep is resumed, neither cut short nor started again.
func TestInjectCallKeepsSleep(t *testing.T) {
	p, lines := launchRunning(t, "callsleep")
	line, err := lines.ReadString('\n')
	var add1, trap uint64
	if n, _ := fmt.Sscanf(line, "ready %x %x\n", &add1, &trap); err != nil || n != 2 {
		t.Fatalf("tracee said %q, %v", line, err)
	}
	time.Sleep(200 * time.Millisecond) // into its nanosleep
	for i, syscallFirst := range []bool{false, true} {
		tid, err := p.Hold()
		if err != nil {
			t.Fatal(err)
		}
		if syscallFirst {
			if got, err := p.InjectSyscall(tid, unix.SYS_GETPID); err != nil || got != uint64(p.Pid) {
				t.Fatalf("getpid gave %d, %v", got, err)
			}
		}
		if got, err := p.InjectCall(tid, add1, trap, uint64(40+i)); err != nil || got != uint64(41+i) {
			t.Fatalf("call %d: add1(%d) gave %d, %v", i, 40+i, got, err)
		}
		if err := p.Cont(tid, 0); err != nil {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	runToExit(t, p)
	line, _ = lines.ReadString('\n')
	var ret, ms int
	if n, err := fmt.Sscanf(line, "nanosleep=%d ms=%d\n", &ret, &ms); err != nil || n != 2 || ret != 0 || ms < 1000 || ms >= 1150 {
		t.Errorf("the tracee said %q, want its sleep of 1000 ms, whole (not 1150 or more: restarted from its start)", line)
	}
}

// runToExit lets p run to its end, every signal delivered.
func runToExit(t *testing.T, p *Process) {
	t.Helper()
	for {
		ev, err := p.WaitThread(p.Pid)
		if errors.Is(err, ErrNoProcess) || err == nil && ev.Kind == EventExit {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		sig := 0
		if ev.Kind == EventSignal {
			sig = ev.Sig
		}
		p.Cont(ev.Tid, sig)
	}
}

// TestInjectAtCloneEvent injects a system call into a thread stopped at
// its clone event, inside clone: the call returns its own result, clone
// returns the new thread's id to the program, and no SIGTRAP of ours is
// left for the thread (the kernel reported the step at clone's exit, and
// that report, kept as the program's, killed it: status 133).
func TestInjectAtCloneEvent(t *testing.T) {
	p, stdout := launchPiped(t, "cloner")
	stuck := time.AfterFunc(30*time.Second*timeScale, func() { unix.Kill(p.Pid, unix.SIGKILL) })
	defer stuck.Stop()
	injected := false
	if err := p.Cont(p.Pid, 0); err != nil {
		t.Fatal(err)
	}
	for {
		ev, err := p.WaitAny()
		if err != nil {
			t.Fatal(err)
		}
		sig := 0
		switch {
		case ev.Kind == EventExit && ev.Tid == p.Pid:
			if !ev.Status.Exited() || ev.Status.ExitStatus() != 0 {
				t.Fatalf("cloner ended with status %#x, want exit 0", int(ev.Status))
			}
			out, _ := io.ReadAll(stdout)
			if string(out) != "thread\nmain\n" {
				t.Fatalf("cloner printed %q", out)
			}
			if !injected {
				t.Fatal("cloner never stopped at its clone event")
			}
			return
		case ev.Kind == EventExit:
			continue // a thread: nothing to resume
		case ev.Kind == EventClone && !injected:
			injected = true
			ret, err := p.InjectSyscall(ev.Tid, unix.SYS_GETPID)
			if err != nil || int(ret) != p.Pid {
				t.Fatalf("getpid injected at the clone event: %d, %v; want %d", int(ret), err, p.Pid)
			}
		case ev.Kind == EventSignal && ev.Sig != int(unix.SIGSTOP), ev.Kind == EventTrap:
			sig = ev.Sig
		}
		if err := p.Cont(ev.Tid, sig); err != nil {
			t.Fatal(err)
		}
	}
}
