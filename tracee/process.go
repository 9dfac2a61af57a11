// Package tracee controls a traced process: attach and launch with
// PTRACE_SEIZE, wait for and classify stops, resume and single-step threads,
// read and write registers and memory, inject system calls, detach.
//
// Linux makes the tracer a thread: every method of a Process must be called
// from the goroutine that created it, locked to its OS thread with
// runtime.LockOSThread for the whole life of the Process.
//
//	runtime.LockOSThread()
//	p, err := tracee.Attach(pid)
//	for { ev, err := p.Wait(); ... p.Cont(ev.Tid, 0) }
package tracee

import (
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/probedbg/probe/singlestep"
)

// Errors a caller can test with errors.Is; they are the caller's bad input,
// not runtime failures.
var (
	ErrNoProcess     = errors.New("no such process")
	ErrAlreadyTraced = errors.New("process is already traced")
	ErrPermission    = errors.New("not permitted to trace process")
)

// ErrEnding is Attach's error when the process ended while it was being
// seized: the Process it returns with it is seized, for its end to be
// waited for.
var ErrEnding = errors.New("the process ended as it was attached")

// Process is one traced thread group.
type Process struct {
	Pid      int
	Launched bool // started by us: killed if we exit while it is traced

	mem     *os.File
	memOps  atomic.Int64 // ReadAt and WriteAt calls (MemAccesses)
	threads map[int]*Thread
	syscall uint64 // address of a `syscall` instruction, for injection
	// TrapStateFailures counts the threads whose signal state a forced
	// SIGTRAP changed and could not be put back (trapstate.go).
	TrapStateFailures int

	lastStop int // the thread Wait last reported stopped

	// early holds the first stops of forked children reported before
	// their parent's fork event, for TakeChild and Adopt.
	early map[int]unix.WaitStatus

	// taken holds statuses taken from the kernel ahead of their turn, so
	// that every stopped thread is served in turn (see nextStatus).
	taken *takenStatuses

	syscallStops bool // resume with PTRACE_SYSCALL: see SetSyscallStops

	family *family // the processes traced with this one, when children are followed

	// Slept says whether the last Wait had to sleep: no stop was
	// waiting when it was called.
	Slept bool

	tookDoorbell bool // DeferOrTake took a SIGSTOP of ours

	// Delivering, if set, is told of every signal a resume lets the
	// tracee take: a handler may run from wherever the thread stopped.
	Delivering func(tid int)

	// Held, if set, is told when a thread stops for us (true) and when
	// we let it run again (false).
	Held func(tid int, held bool)

	// Rewind, if set, says of a trap's pc whether it is one past a
	// breakpoint over a one-byte instruction: such a thread is put back
	// on the breakpoint before its stop is taken (rewind.go).
	Rewind func(pc uint64) bool

	// Guard, if set, keeps a thread we run code of ours in from going
	// on in our registers if we die meanwhile (Guard).
	Guard *Guard
}

// Guard is a SIGTRAP handler of the caller's in the tracee that puts a
// thread's registers and signal mask back when it traps at the end of
// code of ours: without it, a kill -9 of probe while a thread ran an
// injected system call let it go on from there in our registers (a Go
// program died of SIGSEGV in runtime.futexsleep, issue 35).
type Guard struct {
	// Syscall is a system call instruction followed by a breakpoint,
	// where injected system calls run.
	Syscall uint64
	// Save keeps thread tid's registers and mask for a trap with pc
	// trap, before it runs our code; Clear forgets them once they are
	// back.
	Save  func(tid int, trap uint64, regs *unix.PtraceRegs, mask uint64)
	Clear func(tid int)
	// Mapping hears of an executable mapping about to be made at addr:
	// a death before its owner can mark it as ours would leave it
	// unknown to a later attach.
	Mapping func(addr, size uint64)
}

// Thread is one traced thread and what we know of its stop state.
type Thread struct {
	Tid int
	// Stopped is true from the stop Wait reported until the thread is resumed.
	Stopped bool
	// GroupStopped: the thread sits in a group-stop (SIGSTOP, SIGTSTP...),
	// parked with PTRACE_LISTEN as gdb does.
	GroupStopped bool
	// Forked: not a thread of the process but a child that shares its
	// memory (vfork), traced until it execs or exits; see Adopt.
	Forked bool
	// pending holds signals for the tracee that arrived while we could not
	// deliver them (during an injected syscall or an out-of-line step);
	// they are delivered, siginfo intact, at the next resume.
	pending []unix.Siginfo
	// syscallStops: this thread alone stops at its syscalls (see
	// SetThreadSyscallStops).
	syscallStops bool
	// owed is the signal state a forced SIGTRAP took from the thread, to
	// be put back before it runs (trapstate.go).
	owed *owedTrapState
	// stop is the kind of stop it is in, while Stopped.
	stop EventKind
	// inSyscall: that stop is inside a system call that has yet to
	// return (a clone, fork, exec or vfork-done event), see leaveSyscall.
	inSyscall bool
	// rewound: put back on the breakpoint it trapped on (rewind.go);
	// stepped: resumed for one instruction last.
	rewound, stepped bool
}

// Attach seizes every thread of pid, re-reading /proc/PID/task until no new
// thread appears, and leaves them all running. Threads created later are
// traced through PTRACE_O_TRACECLONE.
func Attach(pid int) (*Process, error) {
	return seize(&Process{Pid: pid, threads: make(map[int]*Thread), early: make(map[int]unix.WaitStatus), taken: &takenStatuses{}})
}

// seize is Attach of p.Pid into p, made empty.
func seize(p *Process) (*Process, error) {
	pid := p.Pid
	quietChildStops()
	if _, err := os.Stat(fmt.Sprintf("/proc/%d/task", pid)); err != nil {
		return nil, fmt.Errorf("pid %d: %w", pid, ErrNoProcess)
	}
	for {
		tids, err := taskIDs(pid)
		if err != nil {
			p.Release()
			return nil, fmt.Errorf("pid %d: %w", pid, ErrNoProcess)
		}
		added := false
		for _, tid := range tids {
			if p.threads[tid] != nil {
				continue
			}
			err := ptraceSeize(tid, traceOptions)
			if errors.Is(err, unix.ESRCH) {
				continue // exited between the listing and the seize
			}
			if err != nil {
				p.Release()
				return nil, seizeError(pid, tid, err)
			}
			p.threads[tid] = &Thread{Tid: tid}
			added = true
		}
		if !added {
			break
		}
	}
	if len(p.threads) == 0 {
		return nil, fmt.Errorf("pid %d: %w", pid, ErrNoProcess)
	}
	if err := p.openMem(); err != nil {
		if p.AllDying() {
			return p, fmt.Errorf("pid %d: %w", pid, ErrEnding)
		}
		p.Release()
		return nil, err
	}
	return p, nil
}

// AllDying reports whether every thread is on its way out.
func (p *Process) AllDying() bool {
	for tid := range p.threads {
		if !p.Dying(tid) {
			return false
		}
	}
	return true
}

func seizeError(pid, tid int, err error) error {
	if errors.Is(err, unix.EPERM) {
		// Any one thread may be traced by someone else (a tracer can
		// seize a single thread).
		if tracer := tracerPid(pid, tid); tracer != 0 {
			return fmt.Errorf("pid %d: %w by %s", pid, ErrAlreadyTraced, tracerProcess(tracer))
		}
		if isZombie(pid, tid) {
			// An exiting thread cannot be seized either: not a
			// matter of permission.
			return fmt.Errorf("pid %d: %w", pid, ErrNoProcess)
		}
		return fmt.Errorf("pid %d: %w (%s)", pid, ErrPermission, PermissionHint(pid))
	}
	return fmt.Errorf("seize pid %d: %w", pid, err)
}

// tracerProcess names the process of tracing thread tid, as "pid N
// (comm)": TracerPid is a thread, which in a multithreaded tracer (probe
// itself, or any Go program) is not the pid a user knows.
func tracerProcess(tid int) string {
	pid := tid
	if v, ok := statusField(fmt.Sprintf("/proc/%d/status", tid), "Tgid"); ok {
		if n, err := strconv.Atoi(v); err == nil {
			pid = n
		}
	}
	if comm := Comm(pid, pid); comm != "<...>" {
		return fmt.Sprintf("pid %d (%s)", pid, comm)
	}
	return fmt.Sprintf("pid %d", pid)
}

func tracerPid(pid, tid int) int {
	v, _ := statusField(fmt.Sprintf("/proc/%d/task/%d/status", pid, tid), "TracerPid")
	n, _ := strconv.Atoi(v)
	return n
}

// statusField returns one "Name:\tvalue" field of a /proc status file.
func statusField(file, name string) (string, bool) {
	b, err := os.ReadFile(file)
	if err != nil {
		return "", false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, name+":"); ok {
			return strings.TrimSpace(v), true
		}
	}
	return "", false
}

func taskIDs(pid int) ([]int, error) {
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		return nil, err
	}
	tids := make([]int, 0, len(ents))
	for _, e := range ents {
		if tid, err := strconv.Atoi(e.Name()); err == nil {
			tids = append(tids, tid)
		}
	}
	return tids, nil
}

// Launch starts argv[0] (looked up in PATH) with the given stdio and
// environment and returns it seized and stopped at its first instruction,
// before the dynamic linker runs: probes can be installed before any code
// of the program executes.
func Launch(argv []string, env []string, files []*os.File) (*Process, error) {
	quietChildStops()
	path, err := exec.LookPath(argv[0])
	if err != nil {
		return nil, err
	}
	fds := make([]uintptr, len(files))
	for i, f := range files {
		fds[i] = f.Fd()
	}
	// PTRACE_TRACEME is the only way to stop a child at exec; it is turned
	// into a PTRACE_SEIZE below because only seized tracees get
	// PTRACE_INTERRUPT and PTRACE_LISTEN.
	pid, err := syscall.ForkExec(path, argv, &syscall.ProcAttr{
		Env:   env,
		Files: fds,
		Sys:   &syscall.SysProcAttr{Ptrace: true},
	})
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", argv[0], err)
	}
	fail := func(err error) (*Process, error) {
		unix.Kill(pid, unix.SIGKILL)
		var ws unix.WaitStatus
		waitRetrying(pid, &ws, unix.WALL)
		return nil, fmt.Errorf("start %s: %w", argv[0], err)
	}
	var ws unix.WaitStatus
	if _, err := waitRetrying(pid, &ws, unix.WALL); err != nil {
		return fail(err)
	}
	if !ws.Stopped() || ws.StopSignal() != unix.SIGTRAP {
		return fail(fmt.Errorf("unexpected status %#x after exec", ws))
	}
	// Leave it in a group-stop, re-attach with SEIZE, then undo the stop
	// with SIGCONT. No handler is installed yet, so the program sees none
	// of this.
	if err := ptraceDetach(pid, int(unix.SIGSTOP)); err != nil {
		return fail(err)
	}
	if _, err := waitRetrying(pid, &ws, unix.WALL|unix.WUNTRACED); err != nil || !ws.Stopped() {
		return fail(fmt.Errorf("child did not stop: %v", err))
	}
	if err := ptraceSeize(pid, traceOptions|unix.PTRACE_O_EXITKILL); err != nil {
		return fail(err)
	}
	if _, err := waitRetrying(pid, &ws, unix.WALL); err != nil || !ws.Stopped() {
		return fail(fmt.Errorf("child did not trap after seize: %v", err))
	}
	if err := unix.Kill(pid, unix.SIGCONT); err != nil {
		return fail(err)
	}
	p := &Process{Pid: pid, Launched: true, threads: map[int]*Thread{pid: {Tid: pid, Stopped: true}}, early: make(map[int]unix.WaitStatus), taken: &takenStatuses{}}
	if err := p.openMem(); err != nil {
		return fail(err)
	}
	return p, nil
}

func (p *Process) openMem() error {
	f, err := os.OpenFile(fmt.Sprintf("/proc/%d/mem", p.Pid), os.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("open memory of pid %d: %w", p.Pid, err)
	}
	p.mem = f
	return nil
}

// Thread returns the traced thread tid, or nil.
func (p *Process) Thread(tid int) *Thread { return p.threads[tid] }

// Threads returns every traced thread.
func (p *Process) Threads() []*Thread {
	ts := make([]*Thread, 0, len(p.threads))
	for _, t := range p.threads {
		ts = append(ts, t)
	}
	return ts
}

// AllGroupStopped reports whether there are threads and every one sits
// in a group-stop. The loop asks before each wait: the thread that
// stopped last, not in a group-stop, answers it most times without a walk
// of the table.
func (p *Process) AllGroupStopped() bool {
	if t := p.threads[p.lastStop]; t != nil && !t.GroupStopped {
		return false
	}
	for _, t := range p.threads {
		if !t.GroupStopped {
			return false
		}
	}
	return len(p.threads) > 0
}

// Tids appends the ids of the threads to into.
func (p *Process) Tids(into []int) []int {
	for tid := range p.threads {
		into = append(into, tid)
	}
	return into
}

// Alive reports whether any thread is still traced.
func (p *Process) Alive() bool { return len(p.threads) > 0 }

// AnyStopped returns a thread in a ptrace-stop other than a group-stop, or nil.
func (p *Process) AnyStopped() *Thread {
	for _, t := range p.threads {
		if t.Stopped && !t.GroupStopped && !t.Forked {
			return t
		}
	}
	return nil
}

// ReadAt reads tracee memory; it implements io.ReaderAt.
func (p *Process) ReadAt(b []byte, addr int64) (int, error) {
	p.memOps.Add(1)
	return p.mem.ReadAt(b, addr)
}

// WriteAt writes tracee memory, read-only text included (the kernel's
// FOLL_FORCE through /proc/PID/mem); it implements io.WriterAt.
func (p *Process) WriteAt(b []byte, addr int64) (int, error) {
	p.memOps.Add(1)
	return p.mem.WriteAt(b, addr)
}

// MemAccesses counts the calls of ReadAt and WriteAt so far: each is a
// system call, and for text a copy-on-write fault (what batching saves).
func (p *Process) MemAccesses() int64 { return p.memOps.Load() }

// GetRegs reads the general registers of a stopped thread.
func (p *Process) GetRegs(tid int, regs *unix.PtraceRegs) error {
	if err := ptraceGetRegs(tid, regs); err != nil {
		return err
	}
	p.threads[tid].presented(regs)
	return nil
}

// SetRegs writes the general registers of a stopped thread.
func (p *Process) SetRegs(tid int, regs *unix.PtraceRegs) error {
	if t := p.threads[tid]; t != nil {
		t.rewound = false
	}
	return ptraceSetRegs(tid, regs)
}

// Siginfo returns the siginfo of the signal a thread is stopped for.
func (p *Process) Siginfo(tid int) (unix.Siginfo, error) {
	var info unix.Siginfo
	err := ptraceGetSiginfo(tid, &info)
	return info, err
}

// Defer keeps a signal the thread is stopped for, to deliver it at a later
// resume instead of now.
func (p *Process) Defer(tid int, info unix.Siginfo) {
	if t := p.threads[tid]; t != nil {
		t.pending = append(t.pending, info)
	}
}

// Cont resumes a stopped thread, delivering sig (0 for none). A signal held
// back by Defer is delivered first, with its original siginfo. A thread
// in a group-stop is parked with Listen instead: PTRACE_CONT would run it
// while its process is stopped (SIGSTOP, SIGTSTP...). It reports again
// when SIGCONT ends the stop, and the signals kept for it wait until then.
func (p *Process) Cont(tid, sig int) error {
	t := p.threads[tid]
	if t == nil {
		return fmt.Errorf("thread %d: %w", tid, ErrNoProcess)
	}
	if t.Stopped && t.stop == EventGroupStop && sig == 0 {
		return p.Listen(tid)
	}
	p.payTrapState(t)
	sig = p.pendingFor(t, sig)
	p.delivering(tid, sig)
	t.Stopped, t.rewound, t.stepped = false, false, false
	return ptrace(p.resumeRequest(t), tid, 0, uintptr(sig))
}

// delivering tells Held that tid runs again, before the request that
// resumes it: a thread stopped inside the rescue's handler (which goes
// on to the program's) may get to its check of the held threads at once.
// A death of ours in between lets the thread go on from its stop with no
// signal, as the request would have.
func (p *Process) delivering(tid, sig int) {
	if p.Held != nil {
		p.Held(tid, false)
	}
	if sig != 0 && p.Delivering != nil {
		p.Delivering(tid)
	}
}

// DeferOrTake keeps a signal the thread is stopped for, as Defer, unless
// it is a SIGSTOP we sent (the doorbell): that one is taken, not kept
// (delivered, it would stop the whole process), and TookDoorbell says so.
func (p *Process) DeferOrTake(tid int, info unix.Siginfo) {
	if info.Signo == int32(unix.SIGSTOP) && SentByUs(&info) {
		p.tookDoorbell = true
		return
	}
	p.Defer(tid, info)
}

// TookDoorbell reports, once, whether DeferOrTake (an injected system
// call, a step) took a SIGSTOP we sent instead of keeping it: whoever
// rang must ring again.
func (p *Process) TookDoorbell() bool {
	took := p.tookDoorbell
	p.tookDoorbell = false
	return took
}

// pendingFor is the signal a resume of t delivers: sig, or without one
// the first deferred signal, where the stop is a
// signal-delivery-stop: a resume from any other stop delivers no signal.
// Deferred signals it does not deliver are sent to the thread again:
// kept back past a resume that delivered another, one was lost when that
// other's handler exited (TestInjectSyscallUnderSignals counted one
// SIGRTMIN short in 3 of 40 runs in the arm64 guest), or when the thread
// was let go; given to a resume from an interrupt, it was dropped.
func (p *Process) pendingFor(t *Thread, sig int) int {
	pending := t.pending
	t.pending = nil
	if len(pending) > 0 && sig == 0 && (t.stop == EventSignal || t.stop == EventTrap) {
		// Its siginfo as the kernel made it.
		ptraceSetSiginfo(t.Tid, &pending[0])
		sig, pending = int(pending[0].Signo), pending[1:]
	}
	for _, info := range pending {
		// Only one signal can be injected at a stop; the rest are
		// queued again (their siginfo then names us as the sender).
		unix.Tgkill(p.Pid, t.Tid, unix.Signal(info.Signo))
	}
	return sig
}

// Step resumes a stopped thread for one instruction, delivering sig.
func (p *Process) Step(tid, sig int) error {
	if t := p.threads[tid]; t != nil {
		t.Stopped, t.rewound, t.stepped = false, false, true
	}
	p.delivering(tid, sig)
	return ptraceStep(tid, sig)
}

// Interrupt asks a running thread to stop; Wait reports an EventStop.
func (p *Process) Interrupt(tid int) error { return ptraceInterrupt(tid) }

// Detach lets one stopped thread go, delivering sig. Deferred signals are
// delivered too.
func (p *Process) Detach(tid, sig int) error {
	t := p.threads[tid]
	if t == nil {
		return nil
	}
	p.payTrapState(t)
	sig = p.pendingFor(t, sig)
	delete(p.threads, tid)
	err := ptraceDetach(tid, sig)
	if errors.Is(err, unix.ESRCH) {
		return nil // died meanwhile: nothing to let go
	}
	return err
}

// Close releases the memory handle. Threads must be detached or gone.
func (p *Process) Close() error {
	if p.mem != nil {
		return p.mem.Close()
	}
	return nil
}

// Release detaches from every thread in whatever state it is, for use
// before anything was installed in the tracee: each thread is interrupted,
// its stop collected, and it is let go with the signal it was stopped for.
func (p *Process) Release() {
	for tid, t := range p.threads {
		if !t.Stopped || t.GroupStopped {
			ptraceInterrupt(tid)
		}
	}
	// The group leader last: a leader that has exited reports it only
	// once the other threads are reaped.
	tids := slices.DeleteFunc(slices.Collect(maps.Keys(p.threads)), func(tid int) bool { return tid == p.Pid })
	if p.threads[p.Pid] != nil {
		tids = append(tids, p.Pid)
	}
	for _, tid := range tids {
		t := p.threads[tid]
		sig := 0
		if !t.Stopped || t.GroupStopped {
			ws, ok := p.taken.take(tid)
			if !ok {
				ok = p.waitStoppedOrGone(tid, &ws)
			}
			if !ok || ws.Exited() || ws.Signaled() {
				continue
			}
			if ws.Stopped() && ws>>16 == 0 && ws.StopSignal() != unix.SIGTRAP {
				sig = int(ws.StopSignal()) // a real signal: it is still owed
			}
		}
		ptraceDetach(tid, p.pendingFor(t, sig))
	}
	for pid := range p.early {
		ptraceDetach(pid, 0)
	}
	p.threads = map[int]*Thread{}
	p.Close()
}

// waitStoppedOrGone waits for the stop of thread tid, interrupted, or
// its end; false when it will report neither: it is gone, or a zombie
// whose exit is held back (a group leader that ended before its other
// threads), for which a blocking wait would never return.
func (p *Process) waitStoppedOrGone(tid int, ws *unix.WaitStatus) bool {
	for {
		got, err := unix.Wait4(tid, ws, unix.WALL|unix.WNOTHREAD|unix.WNOHANG, nil)
		switch {
		case err == unix.EINTR:
			continue
		case err != nil:
			return false
		case got == tid:
			return true
		}
		if state, _, ok := taskStat(p.Pid, tid); !ok || state == 'Z' || state == 'X' {
			return false
		}
		pause(100 * time.Microsecond)
	}
}

// Comm returns a thread's command name as the kernel keeps it, or "<...>"
// as ftrace prints an unknown one.
func Comm(pid, tid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/comm", pid, tid))
	if err != nil {
		return "<...>"
	}
	return strings.TrimSuffix(string(b), "\n")
}

// Hold stops one live thread (the leader if it can) and returns it, for
// work that needs a thread stopped: injecting a syscall, installing probes.
// Signals it receives meanwhile are deferred.
func (p *Process) Hold() (int, error) {
	if t := p.AnyStopped(); t != nil {
		return t.Tid, nil
	}
	for _, tid := range p.holdOrder() {
		if err := ptraceInterrupt(tid); err != nil {
			continue
		}
		for {
			ev, err := p.WaitThread(tid)
			if err != nil || ev.Kind == EventExit {
				break
			}
			switch ev.Kind {
			case EventSignal:
				if info, err := p.Siginfo(tid); err == nil {
					p.Defer(tid, info)
				}
			case EventFork:
				// Hold serves callers with nothing installed in the
				// child's memory yet: it goes untouched.
				if c, err := p.TakeChild(ev.NewTid); err == nil {
					c.Release()
				}
			}
			return tid, nil
		}
	}
	return 0, fmt.Errorf("pid %d: no thread could be stopped", p.Pid)
}

// holdOrder lists threads to try to stop: the leader first, zombies never
// (a leader that called pthread_exit cannot stop).
func (p *Process) holdOrder() []int {
	order := []int{}
	if t := p.threads[p.Pid]; t != nil && !isZombie(p.Pid, p.Pid) {
		order = append(order, p.Pid)
	}
	for tid, t := range p.threads {
		if tid != p.Pid && !t.Forked && !isZombie(p.Pid, tid) {
			order = append(order, tid)
		}
	}
	return order
}

// Dying tells whether thread tid has exited (a zombie not yet reaped) or
// is about to: in do_exit, or with SIGKILL pending, as every thread of a
// process being killed has it until it takes it.
func (p *Process) Dying(tid int) bool {
	return isZombie(p.Pid, tid) || exiting(p.Pid, tid) || SignalPending(p.Pid, tid, unix.SIGKILL)
}

func isZombie(pid, tid int) bool {
	state, _, ok := taskStat(pid, tid)
	return !ok || state == 'Z' || state == 'X'
}

// exiting reports whether thread tid is in do_exit: PF_EXITING is set as
// it begins, before the memory map goes and with its SIGKILL no longer
// pending, well before the thread is a zombie.
func exiting(pid, tid int) bool {
	const pfExiting = 0x4
	_, flags, ok := taskStat(pid, tid)
	return ok && flags&pfExiting != 0
}

// taskStat reads a thread's state letter and flags from its stat file;
// ok is false when it is gone.
func taskStat(pid, tid int) (state byte, flags uint64, ok bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/stat", pid, tid))
	if err != nil {
		return 0, 0, false
	}
	// The state follows the parenthesised comm, which may hold spaces;
	// the flags are the seventh field from there.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 || i+2 >= len(b) {
		return 0, 0, false
	}
	fields := strings.Fields(string(b[i+2:]))
	if len(fields) > 6 {
		flags, _ = strconv.ParseUint(fields[6], 10, 64)
	}
	return b[i+2], flags, true
}

// RunToEntry runs a just-launched process to its ELF entry point, where the
// dynamic linker has mapped every library it links, and leaves the main
// thread stopped there.
func (p *Process) RunToEntry() error {
	entry, err := auxvEntry(p.Pid)
	if err != nil {
		return err
	}
	orig := make([]byte, len(singlestep.BreakpointInsn))
	if _, err := p.ReadAt(orig, int64(entry)); err != nil {
		return fmt.Errorf("read entry point: %w", err)
	}
	if _, err := p.WriteAt(singlestep.BreakpointInsn, int64(entry)); err != nil {
		return fmt.Errorf("write entry breakpoint: %w", err)
	}
	defer p.WriteAt(orig, int64(entry))
	tid := p.Pid
	sig := 0
	for {
		if err := p.Cont(tid, sig); err != nil {
			return err
		}
		sig = 0
		ev, err := p.WaitThread(tid)
		if err != nil {
			return err
		}
		switch ev.Kind {
		case EventExit:
			return fmt.Errorf("process exited before its entry point")
		case EventSignal:
			sig = ev.Sig
			continue
		case EventTrap:
			var regs unix.PtraceRegs
			if err := p.GetRegs(tid, &regs); err != nil {
				return err
			}
			if regs.PC() == entry+singlestep.BreakpointPCAdjust {
				regs.SetPC(entry)
				return p.SetRegs(tid, &regs)
			}
			sig = int(unix.SIGTRAP)
		}
	}
}

func auxvEntry(pid int) (uint64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/auxv", pid))
	if err != nil {
		return 0, err
	}
	const atEntry = 9
	for i := 0; i+16 <= len(b); i += 16 {
		key := binary.LittleEndian.Uint64(b[i:])
		if key == atEntry {
			return binary.LittleEndian.Uint64(b[i+8:]), nil
		}
	}
	return 0, fmt.Errorf("pid %d: no AT_ENTRY in auxv", pid)
}

// SentByUs reports whether a signal was sent by this process with kill(2):
// the doorbell the tracer rings to get a thread stopped.
func SentByUs(info *unix.Siginfo) bool {
	// si_pid is the first field of the kill variant of the union, at 16.
	pid := *(*int32)(unsafe.Add(unsafe.Pointer(info), 16))
	return info.Code == siUser && int(pid) == os.Getpid()
}

// siUser is the si_code of a signal sent with kill(2).
const siUser = 0

// SignalPending reports whether sig is pending: for the whole process
// (ShdPnd: sent with kill(2), not yet taken by a thread) when tid is 0,
// else for that thread alone (SigPnd).
func SignalPending(pid, tid int, sig unix.Signal) bool {
	file, field := fmt.Sprintf("/proc/%d/status", pid), "ShdPnd"
	if tid != 0 {
		file, field = fmt.Sprintf("/proc/%d/task/%d/status", pid, tid), "SigPnd"
	}
	v, ok := statusField(file, field)
	mask, err := strconv.ParseUint(v, 16, 64)
	return ok && err == nil && mask&(1<<(uint(sig)-1)) != 0
}

// StackTop returns the end of the mapping that holds sp in pid's address
// space: the top of the stack sp is on.
func StackTop(pid int, sp uint64) (uint64, error) {
	maps, err := ReadMaps(pid)
	if err != nil {
		return 0, err
	}
	for _, m := range maps {
		if m.Start <= sp && sp < m.End {
			return m.End, nil
		}
	}
	return 0, fmt.Errorf("pid %d: no mapping holds %#x", pid, sp)
}
