package probe

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/probedbg/probe/fetch"
	"github.com/probedbg/probe/symbols"
	"github.com/probedbg/probe/tracee"
)

// LaunchOptions configures Launch.
type LaunchOptions struct {
	Env    []string // nil: our environment
	Stdin  *os.File // nil: ours
	Stdout *os.File // nil: ours
	Stderr *os.File // nil: ours
}

// Tracer owns one traced process and the probes in it. Its methods may be
// called from any goroutine; the ptrace work happens on one locked thread.
type Tracer struct {
	pid      int
	launched bool

	life lifecycle // started, ready, done

	cmds commandQueue // what other goroutines ask of the ptrace thread

	// Owned by the ptrace thread.
	proc  *tracee.Process
	space *symbols.Space
	// shownSpace is space for other goroutines (Symbols): the ptrace
	// thread replaces space when libraries come and go.
	shownSpace atomic.Pointer[symbols.Space]
	anchor     int // a thread held stopped while commands run, or 0
	// semaphores are the SDT semaphores each probe raised in the
	// process (sdt.go): a fork child's memory has them raised too.
	semaphores map[*Probe][]uint64
	// installHeld are the other threads, held from the first breakpoint
	// written before Start until Start (holdForInstall).
	installHeld []int
	sites       map[uint64]*site
	probes      map[string]*Probe
	comms       map[int]string
	place       *tracee.Placer
	tuning      Tuning
	monoBase    int64
	wallBase    time.Time
	detached    bool
	lostHits    uint64
	// pacMask is the bits of a code address its pointer authentication
	// code takes (arm64), or 0.
	pacMask uint64

	stop    stopState    // the stop being handled
	step    stepState    // displaced instructions run out of line
	jumps   jumpState    // jump optimisation (optimize.go)
	mail    mailState    // registers shared with the tracee (mailbox.go)
	traps   sigtrapState // our SIGTRAP handler and the program's (rescue.go, trapstate.go)
	maps    mappingState // what we mapped in the tracee (reclaim.go)
	ret     returnState  // hooked returns and the call stacks (retprobe.go)
	drain   drainState   // the rings' way to the handlers (drain.go, ring.Drainer)
	follow  followState  // followed forks and execs (follow.go)
	inject  injectState  // calls and errors injected (patch.go, override.go)
	scratch fetchScratch // reused by every hit's fetch (args.go)

	inproc    *inproc        // the rings of in-process probes (inproc.go), or nil
	recording recordingState // why sites do not record, and what the stubs counted

	ft         *funcTracer
	raw        rawState            // raw capture (raw.go)
	decoding   *Decoder            // a Tracer with no process, decoding raw records (rawdecode.go)
	pastStacks []StackUsage        // the stack tracer's, from function tracers stopped
	sysProbes  map[sysKey][]*Probe // syscall probes, by system call entry or exit
	writeSync  *writeSync          // SyncWrites'; nil: none
	sysCalls   sysCalls            // the system calls shown among the calls (syscalltrace.go)
	linker     *linkerWatch        // libraries loaded and unloaded (pending.go)
}

// lifecycle is the tracer's life, as other goroutines wait on it.
type lifecycle struct {
	started  chan struct{} // closed by Start
	ready    chan struct{} // closed once Start has placed the jumps (Ready)
	done     chan struct{} // closed when the loop has ended
	exit     ExitStatus
	err      error // the loop's
	startOne sync.Once
	onReady  func() // StartThen's
}

// stopState is the stop being handled.
type stopState struct {
	regs unix.PtraceRegs
	hit  Hit // handed to handlers (newHit)
	// flight is the stop's progress, for emergencyDetach.
	flight inFlight
	time   int64 // when the SIGTRAP stop was seen, or 0
	tid    int   // its thread
	cpu    int   // the CPU it said it stopped on (mailState.cpu), or -1
	// stamp is the rings' clock at the stop: records stamped before it
	// come before its hit.
	stamp uint64
}

// ExitStatus is how the traced process ended, when it did.
type ExitStatus struct {
	Exited   bool // the process is gone (false after a detach)
	Code     int
	Signaled bool
	Signal   unix.Signal
}

// Attach seizes every thread of pid. One thread is held until Start so that
// the first probes go in together.
func Attach(pid int) (*Tracer, error) {
	return newTracer(func() (*tracee.Process, int, error) {
		p, err := tracee.Attach(pid)
		if errors.Is(err, tracee.ErrEnding) {
			if ended, ok := endedWhileAttaching(p); ok {
				return nil, 0, ended
			}
			p.Release()
			return nil, 0, err
		}
		if err != nil {
			if errors.Is(err, tracee.ErrNoProcess) || errors.Is(err, tracee.ErrAlreadyTraced) || errors.Is(err, tracee.ErrPermission) {
				err = badInput(err)
			}
			return nil, 0, err
		}
		anchor, err := p.Hold()
		if err != nil {
			// (No thread could be stopped: they are exiting, one
			// perhaps not showing it yet.)
			if ended, ok := endedWhileLoading(p); ok {
				return nil, 0, ended
			}
			p.Release()
			return nil, 0, err
		}
		return p, anchor, nil
	})
}

// Launch starts argv traced, runs it to its entry point (so the shared
// libraries it links are mapped) and holds it there until Start.
func Launch(argv []string, opts *LaunchOptions) (*Tracer, error) {
	if opts == nil {
		opts = &LaunchOptions{}
	}
	files := []*os.File{orDefault(opts.Stdin, os.Stdin), orDefault(opts.Stdout, os.Stdout), orDefault(opts.Stderr, os.Stderr)}
	env := opts.Env
	if env == nil {
		env = os.Environ()
	}
	// Its file read ahead while it starts (LoadProcess takes it).
	if path, err := exec.LookPath(argv[0]); err == nil {
		defer symbols.Preload(path).Release()
	}
	return newTracer(func() (*tracee.Process, int, error) {
		p, err := tracee.Launch(argv, env, files)
		if err != nil {
			if errors.Is(err, os.ErrNotExist) || errors.Is(err, unix.ENOENT) || errors.Is(err, unix.EACCES) {
				err = badInput(err)
			}
			return nil, 0, err
		}
		if err := p.RunToEntry(); err != nil {
			unix.Kill(p.Pid, unix.SIGKILL)
			p.Release()
			return nil, 0, err
		}
		return p, p.Pid, nil
	})
}

func orDefault(f, def *os.File) *os.File {
	if f == nil {
		return def
	}
	return f
}

// newAddressSpace gives t empty tables for what it keeps of one address
// space: at start, for a followed process, after an exec.
func (t *Tracer) newAddressSpace() {
	t.sites = make(map[uint64]*site)
	t.jumps.detours = make(map[uint64]*jumpOpt)
	t.jumps.ahead = nil
	t.jumps.redirects = make(map[uint64]redirect)
	t.maps.made, t.maps.left, t.maps.leftFiles = nil, nil, nil
	t.step.threads = make(map[int]*site)
	t.step.restarting = make(map[int]*restartState)
	t.step.restartSlots = make(map[uint64]uint64)
	t.comms = make(map[int]string)
	t.ret.shadow = make(map[int]*callStack)
	t.ret.parked = make(map[int][]*callStack)
	t.ret.goStacks = make(map[int64]*callStack)
	t.ret.wheres = make(map[whereKey]string)
	t.ret.forked = make(map[int][]forkedReturn)
	t.mail.stubs = make(map[uint64]*jumpOpt)
	t.mail.dirty = make(map[int]bool)
	t.traps.reblocked = make(map[int]bool)
	t.semaphores = nil // (an exec's new program has its own, at zero)
}

// newTracer starts the ptrace thread, which runs setup and then serves
// commands until Start.
func newTracer(setup func() (*tracee.Process, int, error)) (*Tracer, error) {
	t := &Tracer{
		cmds:   commandQueue{kick: make(chan struct{}, 1)},
		life:   lifecycle{started: make(chan struct{}), ready: make(chan struct{}), done: make(chan struct{})},
		probes: make(map[string]*Probe),
	}
	t.newAddressSpace()
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // for ever: this thread is the tracer
		defer close(t.life.done)
		proc, anchor, err := setup()
		if err != nil {
			errc <- err
			return
		}
		t.proc, t.pid, t.anchor, t.launched = proc, proc.Pid, anchor, proc.Launched
		t.pacMask = proc.PACMask(anchor)
		t.space, err = symbols.LoadProcess(proc.Pid)
		if err != nil {
			if ended, ok := endedWhileLoading(proc); ok {
				errc <- ended // killed while we read its maps: they were gone
				return
			}
			t.releaseAll()
			errc <- fmt.Errorf("load symbols of pid %d: %w", proc.Pid, err)
			return
		}
		t.shownSpace.Store(t.space)
		t.monoBase, t.wallBase = monotonicNow(), time.Now()
		t.place = tracee.NewPlacer(proc.Pid, true)
		proc.Delivering = t.mailboxSignal
		t.scratch.env = fetch.HitEnv{Mem: proc, Symbolize: t.symbolize, FPRegs: t.readFPRegs}
		if !t.launched {
			t.restoreLeftovers()
			t.setupRescue()
		}
		errc <- nil
		t.serve()
	}()
	if err := <-errc; err != nil {
		return nil, err
	}
	return t, nil
}

// serve runs commands on the held anchor thread until Start, then the loop.
func (t *Tracer) serve() {
	defer func() {
		if r := recover(); r != nil {
			// Our bug must not become the tracee's problem.
			t.life.err = fmt.Errorf("internal error: %v", r)
			t.withHandlers(t.emergencyDetach)
		}
		t.stopDrain()
		t.place.Release()
		t.retireAll()
		t.cmds.close()
		t.proc.Close()
	}()
	for !t.detached {
		select {
		case <-t.cmds.kick:
			t.runCommands(t.anchor)
			continue
		case <-t.life.started:
		}
		break
	}
	t.runCommands(t.anchor) // those queued just before Start
	if t.detached {
		return
	}
	anchor := t.anchor
	t.anchor = 0
	t.optimizeSites(anchor)
	t.startRaw()
	t.startDrain()
	close(t.life.ready)
	if t.life.onReady != nil {
		t.life.onReady()
	}
	t.proc.Cont(anchor, 0)
	t.loop()
}

// Ready is closed once Start has decided which probes are jump-optimised
// and which record in the tracee (Probe.Path); it may never be, if the
// process ends first (Done).
func (t *Tracer) Ready() <-chan struct{} { return t.top().life.ready }

// isReady reports whether Start has placed the jumps.
func (t *Tracer) isReady() bool {
	select {
	case <-t.life.ready:
		return true
	default:
		return false
	}
}

// Tuning switches off speed-ups, for comparison and for tests that prove
// the fast paths give the same results as the slow ones.
type Tuning struct {
	// NoBoost single-steps every displaced instruction that is not
	// emulated, instead of running it from a slot followed by a jump back.
	NoBoost bool
	// NoOptimize keeps the int3 at every probe instead of writing a jmp
	// to a detour where it is safe (optimize.go). NoBoost implies it.
	// An optimised probe's thread resumes without a register write, so
	// a Pre handler's changes to Hit.Regs are not applied there: set
	// NoOptimize to change registers from a handler.
	NoOptimize bool
	// NoMailbox keeps registers out of the memory shared with the
	// tracee (mailbox.go): every hit reads them with PTRACE_GETREGS.
	// NoOptimize implies it. With the mailbox, a return through the
	// trampoline resumes without a register write too, so a handler's
	// changes to Hit.Regs at a return are not applied: set NoMailbox to
	// change registers there.
	NoMailbox bool
	// NoPlacement leaves the ptrace thread wherever the scheduler puts it
	// instead of following the tracee thread it serves (tracee.Placer).
	NoPlacement bool
	// NoInProcess makes every probe stop the thread, even those that
	// could record in the tracee (inproc.go).
	NoInProcess bool
	// RingSize is each thread's ring for in-process probes, in bytes (a
	// power of two); 0: DefaultWaitingRingSize if WaitForRoom, else
	// DefaultRingSize.
	RingSize int
	// WaitForRoom makes a thread whose ring is full wait for the drain
	// to free room rather than drop its record (roomwait.go): nothing
	// is lost, and a thread that records faster than the tracer takes
	// its records is slowed to the tracer's pace.
	WaitForRoom bool
}

// SetTuning applies to probes installed afterwards (NoBoost) and at once
// (NoPlacement).
func (t *Tracer) SetTuning(tu Tuning) error {
	return t.do(func(int) error {
		t.tuning = tu
		if tu.NoPlacement {
			t.place.Release()
		}
		return nil
	})
}

// Pid returns the traced process id.
func (t *Tracer) Pid() int { return t.pid }

// Symbols returns the process's address space: its modules as mapped at
// attach, or at the last dlopen or dlclose.
func (t *Tracer) Symbols() *symbols.Space { return t.shownSpace.Load() }

// setSpace replaces the address space (on the ptrace thread).
func (t *Tracer) setSpace(s *symbols.Space) {
	t.space = s
	t.shownSpace.Store(s)
}

// Start lets the held thread run and starts serving probe hits.
func (t *Tracer) Start() { t.StartThen(nil) }

// StartThen is Start, and runs ready once the probes are placed (Ready),
// before the held thread runs on: what it writes (-v's paths) comes
// before anything a launched program writes.
func (t *Tracer) StartThen(ready func()) {
	t = t.top()
	t.life.startOne.Do(func() {
		t.life.onReady = ready
		t.cmds.start()
		close(t.life.started)
	})
}

// Add parses spec, resolves and installs it with handler h.
func (t *Tracer) Add(spec string, h Handler) (*Probe, error) {
	s, err := fetch.ParseSpec(spec)
	if err != nil {
		return nil, badInput(err)
	}
	return t.AddSpec(s, h)
}

// AddSpec installs a parsed spec.
func (t *Tracer) AddSpec(s *fetch.Spec, h Handler) (*Probe, error) {
	var p *Probe
	err := t.do(func(anchor int) error {
		var err error
		if p, err = t.install(anchor, s, h); err == nil {
			t.optimizeLate(anchor)
		}
		return err
	})
	return p, err
}

// Remove takes a probe out; the original instruction is back once no other
// probe shares its address.
func (t *Tracer) Remove(p *Probe) error {
	return t.do(func(int) error {
		// What the tracee recorded of it until now is handed on first
		// (one pass, as much as the output takes: a hot probe must not
		// keep the command waiting): its records find no probe once it
		// is gone.
		t.drainRecords(true, 0)
		return t.uninstall(p)
	})
}

// Probes returns the installed probes.
func (t *Tracer) Probes() []*Probe {
	var ps []*Probe
	t.do(func(int) error {
		for _, p := range t.probes {
			ps = append(ps, p)
		}
		return nil
	})
	return ps
}

// Detach removes every probe, puts every thread back where it would have
// been and lets the process go. It is safe to call in any state, more than
// once, and after the process has exited.
func (t *Tracer) Detach() error {
	t = t.top()
	err := t.do(func(anchor int) error {
		t.detachFamily(anchor)
		return nil
	})
	if errors.Is(err, ErrDetached) {
		err = nil
	}
	<-t.life.done
	return err
}

// Kill ends the traced process with SIGKILL and waits for it to be gone:
// for a launched program whose probes could not be set up.
func (t *Tracer) Kill() error {
	t = t.top()
	err := t.do(func(int) error {
		unix.Kill(t.pid, unix.SIGKILL)
		for t.proc.Alive() {
			ev, err := t.proc.Wait()
			if err != nil {
				return err
			}
			if ev.Kind == tracee.EventExit && ev.Tid == t.pid {
				t.life.exit = exitStatus(ev.Status)
			}
		}
		t.detached = true
		return nil
	})
	<-t.life.done
	if errors.Is(err, ErrDetached) {
		err = nil
	}
	return err
}

// Wait blocks until the process has exited or the tracer has detached.
func (t *Tracer) Wait() (ExitStatus, error) {
	t = t.top()
	<-t.life.done
	return t.life.exit, t.life.err
}

// Done is closed when the tracer has finished.
func (t *Tracer) Done() <-chan struct{} { return t.life.done }

func monotonicNow() int64 {
	var ts unix.Timespec
	unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return ts.Nano()
}

// now is CLOCK_MONOTONIC through Go's vDSO-backed clock, without a syscall.
func (t *Tracer) now() int64 { return t.monoBase + int64(time.Since(t.wallBase)) }

// cpuOf is the CPU thread tid stopped on, for the CPU column.
func (t *Tracer) cpuOf(tid int) int {
	if tid == t.stop.tid && t.stop.cpu >= 0 {
		return t.stop.cpu
	}
	if cpu := t.place.CPUOf(tid, t.proc.Slept); cpu >= 0 {
		return cpu
	}
	return getcpu() // its stat is gone with it: ours is the best guess
}

func getcpu() int {
	var cpu uint32
	unix.RawSyscall(unix.SYS_GETCPU, uintptr(unsafe.Pointer(&cpu)), 0, 0)
	return int(cpu)
}
