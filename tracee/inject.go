package tracee

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/probedbg/probe/internal/fault"
	"github.com/probedbg/probe/singlestep"
)

const pageSize = 4096

// mapFixedNoreplace is MAP_FIXED_NOREPLACE (Linux 4.17): map exactly at
// the hint or fail, never over an existing mapping.
const mapFixedNoreplace = 0x100000

// injectBlocked is every signal but those an instruction raises itself.
// SIGTRAP among them: a step's forced SIGTRAP that finds SIGTRAP blocked
// resets the process's action for it and unblocks it in the thread
// (trapstate.go), so it is left unblocked for the call even when the
// thread had it blocked.
const injectBlocked = ^uint64(0) &^ (1<<(unix.SIGTRAP-1) | 1<<(unix.SIGSEGV-1) | 1<<(unix.SIGBUS-1) |
	1<<(unix.SIGILL-1) | 1<<(unix.SIGFPE-1) | 1<<(unix.SIGSYS-1))

// InjectSyscall runs one system call in the context of stopped thread tid
// and restores every register afterwards (the CRIU/gdb technique). Signals
// that arrive meanwhile stay queued (blocked) or, those that cannot be
// blocked, are deferred: none is lost.
//
// The thread is left in the kind of stop it was in, so that a resume does
// what it would have: deliver the signal of a signal-delivery-stop, and
// restart a system call of the thread's own that the stop interrupted.
// At an interrupt or a group-stop (EventStop, EventGroupStop) the call
// runs between the syscall stops of PTRACE_SYSCALL and the thread is
// interrupted again (a group-stopped one is in its group-stop again, not
// at a step's SIGTRAP that a resume would run from); at a signal it is
// single-stepped, which ends in a SIGTRAP stop, unless the process
// ignores SIGTRAP, which that forced SIGTRAP would reset
// (trapstate.go): then syscall stops too (injectSyscallNoStep).
func (p *Process) InjectSyscall(tid int, nr uint64, args ...uint64) (uint64, error) {
	if err := p.leaveSyscall(tid); err != nil {
		return 0, err
	}
	if err := p.settleRestart(tid); err != nil {
		return 0, err
	}
	if p.atEventStop(tid) || TrapIgnored(p.Pid) {
		if ret, err := p.injectSyscallNoStep(tid, nr, args...); err != errRestartPending {
			return ret, err
		}
	}
	if p.Guard != nil && singlestep.BreakpointPCAdjust == 0 {
		// (arm64. x86-64's step ends on the int3, not yet run, which a
		// thread let go there by our death runs; run to it, the thread
		// would stop, and be let go, past it.)
		return p.injectSyscall(tid, nr, args, p.runToGuardTrap)
	}
	return p.injectSyscall(tid, nr, args, p.stepThroughSyscall)
}

var errRestartPending = errors.New("the thread is in a system call to be restarted")

// leaveSyscall takes a thread stopped inside a system call that has yet
// to return (a clone event's stop) out of it, to an interrupt stop as it
// returns. Run from there, ours would go wrong twice: the kernel stores
// the call's result over the registers we set, and a step is reported at
// the call's exit, before our instruction: a SIGTRAP that, kept for the
// thread as its own, killed it when delivered.
func (p *Process) leaveSyscall(tid int) error {
	if t := p.threads[tid]; t == nil || !t.Stopped || !t.inSyscall {
		return nil
	}
	return p.interruptAgain(tid)
}

// injectSyscallNoStep is InjectSyscall without a single-step: the thread
// runs the call from its syscall-entry stop to its syscall-exit stop,
// which are no signals, so the process's SIGTRAP action and the thread's
// mask are as they were. A thread at an interrupt is interrupted again,
// where a resume restarts a call of its own as the kernel would have;
// another is left in that exit stop, where a resume's signal is sent, not
// delivered (its siginfo is the kernel's), and would restart nothing
// (errRestartPending when there is a call to restart).
func (p *Process) injectSyscallNoStep(tid int, nr uint64, args ...uint64) (uint64, error) {
	var regs unix.PtraceRegs
	if err := p.GetRegs(tid, &regs); err != nil {
		return 0, fmt.Errorf("inject syscall: %w", err)
	}
	interrupted := p.atEventStop(tid)
	if !interrupted && restartPending(&regs) {
		return 0, errRestartPending
	}
	ret, err := p.injectSyscall(tid, nr, args, p.runToSyscallExit)
	if err != nil || !interrupted {
		return ret, err
	}
	return ret, p.interruptAgain(tid)
}

// atEventStop reports whether thread tid is stopped at a PTRACE_EVENT_STOP:
// an interrupt, or a group-stop (in a process stopped by SIGSTOP, an
// interrupt reports the stop's signal too). Both are in get_signal, where
// a resume restarts a call of the thread's own as the kernel would have.
func (p *Process) atEventStop(tid int) bool {
	t := p.threads[tid]
	return t != nil && (t.stop == EventStop || t.stop == EventGroupStop)
}

// interruptAgain takes a thread in a syscall-exit stop back to an interrupt
// stop (PTRACE_EVENT_STOP): interrupted before it runs, it stops in
// get_signal on its way out, before the kernel decides about restarting.
// In a stopped process that stop is a group-stop, and Cont parks the
// thread again instead of running it.
func (p *Process) interruptAgain(tid int) error {
	if err := ptraceInterrupt(tid); err != nil {
		return fmt.Errorf("inject syscall: %w", err)
	}
	if t := p.threads[tid]; t != nil {
		t.Stopped = false
	}
	if err := ptraceCont(tid, 0); err != nil {
		return fmt.Errorf("inject syscall: %w", err)
	}
	for {
		ev, err := p.WaitThread(tid)
		if err != nil {
			return err
		}
		switch ev.Kind {
		case EventExit:
			return fmt.Errorf("inject syscall: thread %d exited", tid)
		case EventStop, EventGroupStop:
			return nil
		case EventSignal, EventTrap:
			// Not possible before the jobctl trap, which get_signal
			// takes first; kept all the same.
			p.deferStopSignal(tid)
		}
		if t := p.threads[tid]; t != nil {
			t.Stopped = false
		}
		if err := ptraceCont(tid, 0); err != nil {
			return fmt.Errorf("inject syscall: %w", err)
		}
	}
}

// injectSyscall sets thread tid up to run system call nr at a syscall
// instruction, has run run it to completion, and puts back every register
// and the signal mask.
func (p *Process) injectSyscall(tid int, nr uint64, args []uint64, run func(tid int, insn uint64) (uint64, error)) (ret uint64, err error) {
	insn, trap := uint64(0), uint64(0)
	if p.Guard != nil {
		insn = p.Guard.Syscall
		trap = insn + uint64(len(syscallInsn)) + singlestep.BreakpointPCAdjust
	} else if insn, err = p.syscallInsn(); err != nil {
		return 0, err
	}
	var runErr error // run's errors say where they come from
	err = p.withRegs(tid, trap, func(regs *unix.PtraceRegs) error {
		// Our registers, not a restart of a call the thread was stopped
		// in; the saved set restores the real one.
		setSyscall(regs, insn, nr, args)
		if err := p.SetRegs(tid, regs); err != nil {
			return err
		}
		if trap != 0 {
			fault.Point("guarded-syscall")
		}
		ret, runErr = run(tid, insn)
		if trap != 0 && runErr == nil {
			fault.Point("guarded-syscall-ran")
		}
		return nil
	})
	switch {
	case runErr != nil:
		return 0, runErr
	case err != nil:
		return 0, fmt.Errorf("inject syscall: %w", err)
	}
	return ret, nil
}

// InjectStep runs one instruction of ours in stopped thread tid: set
// changes a copy of the thread's registers (its pc to the instruction,
// which must end at after, a breakpoint: where the Guard has the thread
// if we die), and regs has the registers once it ran. Every register and
// the signal mask are put back after, as InjectSyscall does. On arm64 it
// runs to the breakpoint rather than stepping (runOver).
func (p *Process) InjectStep(tid int, set func(regs *unix.PtraceRegs), after uint64) (regs unix.PtraceRegs, err error) {
	if err := p.leaveSyscall(tid); err != nil {
		return regs, err
	}
	err = p.withRegs(tid, after+singlestep.BreakpointPCAdjust, func(r *unix.PtraceRegs) error {
		set(r)
		if err := p.SetRegs(tid, r); err != nil {
			return err
		}
		return p.runOver(tid, r.PC(), after, singlestep.BreakpointPCAdjust != 0, &regs)
	})
	if err != nil {
		return regs, fmt.Errorf("inject instruction: %w", err)
	}
	return regs, nil
}

// withRegs has do run thread tid on a copy of its registers, with every
// signal it can block blocked (they stay queued for the thread: else each
// step stops for the next one before the instruction runs, and a steady
// stream of them, a profiling timer, would never let it run), and puts
// the thread's registers and mask back after. Where our code ends in a
// breakpoint (the thread traps with pc trap; 0: it does not), the Guard
// has the registers and mask too, meanwhile.
func (p *Process) withRegs(tid int, trap uint64, do func(regs *unix.PtraceRegs) error) (err error) {
	var saved unix.PtraceRegs
	if err := ptraceGetRegs(tid, &saved); err != nil {
		return err
	}
	// Registers as they are, rewound or not (rewind.go), and as they
	// were when put back.
	if t := p.threads[tid]; t != nil && t.rewound {
		t.rewound = false
		defer func() { t.rewound = true }()
	}
	var mask uint64
	if err := ptraceGetSigmask(tid, &mask); err != nil {
		return err
	}
	if g := p.Guard; g != nil && trap != 0 {
		// (Cleared once the registers and mask are back: defers run
		// last first.)
		resumed := asResumed(saved)
		g.Save(tid, trap, &resumed, mask)
		defer g.Clear(tid)
	}
	blocked := (mask | injectBlocked) &^ trapBit
	if err := ptraceSetSigmask(tid, &blocked); err != nil {
		return err
	}
	defer func() {
		// A thread not put back would run on in our registers.
		rerr := p.SetRegs(tid, &saved)
		if merr := ptraceSetSigmask(tid, &mask); rerr == nil {
			rerr = merr
		}
		if rerr != nil && err == nil {
			err = fmt.Errorf("restore thread %d: %w", tid, rerr)
		}
	}()
	regs := saved
	return do(&regs)
}

// stepThroughSyscall single-steps thread tid, set up at the syscall instruction
// insn, until it has run it, and returns the call's result.
func (p *Process) stepThroughSyscall(tid int, insn uint64) (uint64, error) {
	return p.throughSyscall(tid, insn, true)
}

// runToGuardTrap runs thread tid, set up at the Guard's system call
// instruction insn, to the breakpoint after it (runOver), and returns
// the call's result.
func (p *Process) runToGuardTrap(tid int, insn uint64) (uint64, error) {
	return p.throughSyscall(tid, insn, false)
}

func (p *Process) throughSyscall(tid int, insn uint64, step bool) (uint64, error) {
	var regs unix.PtraceRegs
	if err := p.runOver(tid, insn, insn+uint64(len(syscallInsn)), step, &regs); err != nil {
		return 0, fmt.Errorf("inject syscall: %w", err)
	}
	return Result(&regs), nil
}

// runOver runs thread tid, set up at code of ours at at, until it ends
// at end, and leaves its registers in regs: stepped (step), one
// instruction; or run until the breakpoint at end traps (arm64: pc stays
// on it). arm64 runs: it goes on stepping a thread whose tracer dies
// (only a detach, or a resume that is not a step, ends it), and every
// instruction after our death would trap, in the rescue's handler too,
// until the thread died (a kill -9 before an injected call ran, the
// thread last stepped by the one before).
func (p *Process) runOver(tid int, at, end uint64, step bool, regs *unix.PtraceRegs) error {
	for {
		var err error
		if step {
			err = p.Step(tid, 0)
		} else {
			if t := p.threads[tid]; t != nil {
				t.Stopped, t.rewound = false, false
			}
			p.delivering(tid, 0)
			err = ptraceCont(tid, 0)
		}
		if err != nil {
			return fmt.Errorf("resume: %w", err)
		}
		ev, err := p.WaitThread(tid)
		if err != nil {
			return err
		}
		if ev.Kind == EventExit {
			return fmt.Errorf("thread %d exited", tid)
		}
		if err := p.GetRegs(tid, regs); err != nil {
			return err
		}
		if regs.PC() != at && regs.PC() != end {
			// Never run on through the tracee's own code.
			return fmt.Errorf("thread %d stopped at %#x, not in the code injected at %#x", tid, regs.PC(), at)
		}
		switch ev.Kind {
		case EventTrap:
			if regs.PC() == end && (step || p.atBreakpoint(tid)) {
				return nil
			}
			fallthrough // a SIGTRAP sent to it, before our code
		case EventSignal:
			// A signal we could not block (a brk's SIGTRAP dropped).
			p.deferStopSignal(tid)
		}
		// Else a group-stop or an interrupt, before the instruction or
		// after it: then a step's trap is still queued, and the next
		// step reports it without running anything.
	}
}

// atBreakpoint reports whether thread tid is stopped for a breakpoint's
// SIGTRAP.
func (p *Process) atBreakpoint(tid int) bool {
	info, err := p.Siginfo(tid)
	return err == nil && info.Signo == int32(unix.SIGTRAP) && info.Code == SIBreakpoint
}

// runToSyscallExit runs thread tid, set up at the syscall instruction insn,
// from its syscall-entry stop to its syscall-exit stop (PTRACE_SYSCALL),
// and returns the call's result.
func (p *Process) runToSyscallExit(tid int, insn uint64) (uint64, error) {
	var regs unix.PtraceRegs
	after := insn + uint64(len(syscallInsn))
	entered := false
	for {
		ev, err := p.toSyscallStop(tid)
		if err != nil {
			return 0, fmt.Errorf("inject syscall: %w", err)
		}
		if err := p.GetRegs(tid, &regs); err != nil {
			return 0, err
		}
		switch ev.Kind {
		case EventSyscall:
			entry, err := p.SyscallEntry(tid)
			if err != nil {
				return 0, err
			}
			switch {
			case regs.PC() != after:
				// The exit of a call the thread was stopped in when we
				// set it up, which ours replaced (orig_rax -1).
				if regs.PC() != insn {
					return 0, fmt.Errorf("inject syscall: thread %d stopped at %#x, not at the system call", tid, regs.PC())
				}
			case entry:
				entered = true
			case entered:
				return Result(&regs), nil
			}
		case EventTrap, EventSignal:
			// A signal we could not block (or a SIGTRAP sent to it),
			// before the instruction ran: the tracee's, kept for later.
			if regs.PC() != insn {
				return 0, fmt.Errorf("inject syscall: thread %d stopped at %#x, not at the system call", tid, regs.PC())
			}
			p.deferStopSignal(tid)
		}
	}
}

// toSyscallStop resumes stopped thread tid, without a signal, to its
// next stop, the syscall stops of PTRACE_SYSCALL among them, and returns
// it; the thread's end is an error.
func (p *Process) toSyscallStop(tid int) (Event, error) {
	if t := p.threads[tid]; t != nil {
		t.Stopped = false
	}
	if err := ptrace(unix.PTRACE_SYSCALL, tid, 0, 0); err != nil {
		return Event{}, err
	}
	ev, err := p.WaitThread(tid)
	if err == nil && ev.Kind == EventExit {
		err = fmt.Errorf("thread %d exited", tid)
	}
	return ev, err
}

// deferStopSignal keeps the signal thread tid is stopped for, for its next
// resume; but a brk's SIGTRAP (arm64: pc stays on it) is dropped, for
// the thread to meet what is there when it runs again (a killed probe's
// brk, put back by then, or the program's own, which traps again).
func (p *Process) deferStopSignal(tid int) {
	info, err := p.Siginfo(tid)
	if err != nil || singlestep.BreakpointPCAdjust == 0 && info.Signo == int32(unix.SIGTRAP) && info.Code == SIBreakpoint {
		return
	}
	p.DeferOrTake(tid, info)
}

// syscallInsn finds the system call instruction (syscallInsn) in an
// executable mapping: any occurrence at an instruction boundary will do.
func (p *Process) syscallInsn() (uint64, error) {
	if p.syscall != 0 {
		return p.syscall, nil
	}
	maps, err := ReadMaps(p.Pid)
	if err != nil {
		return 0, err
	}
	// The vDSO is small and always there; then any executable file mapping.
	sort.SliceStable(maps, func(i, j int) bool { return maps[i].Path == "[vdso]" && maps[j].Path != "[vdso]" })
	buf := make([]byte, 64<<10)
	for _, m := range maps {
		if !m.Exec() || m.Path == "[vsyscall]" {
			continue
		}
		for addr := m.Start; addr < m.End; addr += uint64(len(buf)) - 1 {
			n := min(uint64(len(buf)), m.End-addr)
			got, _ := p.ReadAt(buf[:n], int64(addr))
			for i := 0; i < got; {
				j := bytes.Index(buf[i:got], syscallInsn)
				if j < 0 {
					break
				}
				if at := addr + uint64(i+j); at%syscallInsnAlign == 0 {
					p.syscall = at
					return p.syscall, nil
				}
				i += j + 1
			}
		}
	}
	return 0, fmt.Errorf("pid %d: no syscall instruction found to inject through", p.Pid)
}

// MapExecutable maps size bytes of anonymous read+exec memory in the tracee,
// as close to near as a free gap allows (rip-relative operands of copied
// instructions must reach their targets within ±2 GiB). The stopped thread
// tid runs the mmap; the Guard is told of each address tried first
// (Guard.Mapping). Detach removes it (Unmap) once no thread can be
// inside it any more.
func (p *Process) MapExecutable(tid int, near uint64, size uint64) (uint64, error) {
	var tell func(addr, size uint64)
	if p.Guard != nil {
		tell = p.Guard.Mapping
	}
	return p.mapNear(tid, near, size, unix.PROT_READ|unix.PROT_EXEC, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS, ^uint64(0), tell)
}

// DontDump keeps a mapping of ours out of the tracee's core dumps
// (MADV_DONTDUMP): the rings are gigabytes of address space, which a
// core would write out (a 24.6 GB core of redis-server, issue 35). Best
// effort: a core with them is no worse than before.
func (p *Process) DontDump(tid int, addr, size uint64) {
	p.InjectSyscall(tid, unix.SYS_MADVISE, addr, size, unix.MADV_DONTDUMP)
}

// Unmap removes a mapping of ours from the tracee: the stopped thread
// tid runs munmap.
func (p *Process) Unmap(tid int, addr, size uint64) error {
	ret, err := p.InjectSyscall(tid, unix.SYS_MUNMAP, addr, size)
	if err == nil {
		err = syscallErr(ret)
	}
	return err
}

// mapNear runs mmap in the tracee for size bytes (rounded up to pages) as
// close to near as a free gap allows; tell, if set, hears of each address
// before it is tried.
func (p *Process) mapNear(tid int, near, size uint64, prot, flags int, fd uint64, tell func(addr, size uint64)) (uint64, error) {
	size = (size + pageSize - 1) &^ (pageSize - 1)
	maps, err := ReadMaps(p.Pid)
	if err != nil {
		return 0, err
	}
	for _, hint := range gapsNear(maps, near, size) {
		if tell != nil {
			tell(hint, size)
		}
		addr, err := p.InjectSyscall(tid, unix.SYS_MMAP, hint, size, uint64(prot), uint64(flags|mapFixedNoreplace), fd, 0)
		if err != nil {
			return 0, err
		}
		if err := syscallErr(addr); err != nil {
			if tell != nil {
				tell(0, 0) // (what is there is not ours)
			}
			if err == unix.EEXIST {
				continue // raced with the tracee's own mmap
			}
			return 0, fmt.Errorf("mmap in pid %d: %w", p.Pid, err)
		}
		return addr, nil
	}
	return 0, fmt.Errorf("pid %d: no free address range near %#x", p.Pid, near)
}

// syscallErr is the error an injected system call's result stands for, or
// nil.
func syscallErr(ret uint64) error {
	if int64(ret) < 0 && int64(ret) > -4096 {
		return unix.Errno(-int64(ret))
	}
	return nil
}

// Mapping is a line of /proc/PID/maps.
type Mapping struct {
	Start, End uint64
	Perms      string // "r-xp"
	Path       string // the file, "[stack]", "/memfd:NAME (deleted)", or ""
}

// Exec reports whether the mapping is executable.
func (m Mapping) Exec() bool { return strings.Contains(m.Perms, "x") }

// ReadMaps reads the mappings of process pid.
func ReadMaps(pid int) ([]Mapping, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/maps", pid))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var maps []Mapping
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 {
			continue
		}
		start, end, ok := parseRange(fields[0])
		if !ok {
			continue
		}
		maps = append(maps, Mapping{Start: start, End: end, Perms: fields[1], Path: strings.Join(fields[5:], " ")})
	}
	return maps, sc.Err()
}

// parseRange reads a maps line's first field, START-END in hex.
func parseRange(field string) (start, end uint64, ok bool) {
	lo, hi, found := strings.Cut(field, "-")
	start, err1 := strconv.ParseUint(lo, 16, 64)
	end, err2 := strconv.ParseUint(hi, 16, 64)
	return start, end, found && err1 == nil && err2 == nil
}

// gapsNear returns candidate addresses for a size-byte mapping in the free
// gaps between maps, nearest to near first.
func gapsNear(maps []Mapping, near, size uint64) []uint64 {
	const low = 0x10000         // below vm.mmap_min_addr
	const high = 0x7ffffffff000 // top of the user address space (47 bits)
	const guard = 16 * pageSize // keep clear of brk and stack growth
	sort.Slice(maps, func(i, j int) bool { return maps[i].Start < maps[j].Start })
	var cands []uint64
	prevEnd := uint64(low)
	consider := func(lo, hi uint64) {
		if hi <= lo || hi-lo < size+2*guard {
			return
		}
		lo, hi = lo+guard, hi-guard
		// The point of [lo, hi-size] closest to near.
		at := min(max(near, lo), hi-size)
		cands = append(cands, at&^(pageSize-1))
	}
	for _, m := range maps {
		if m.Start > prevEnd {
			consider(prevEnd, m.Start)
		}
		prevEnd = max(prevEnd, m.End)
	}
	consider(prevEnd, high)
	dist := func(a uint64) uint64 {
		if a > near {
			return a - near
		}
		return near - a
	}
	sort.Slice(cands, func(i, j int) bool { return dist(cands[i]) < dist(cands[j]) })
	if len(cands) > 8 {
		cands = cands[:8]
	}
	return cands
}

// InjectCall calls the function at fn with integer args in the context of
// stopped thread tid, as gdb's `call` does, and returns its integer
// result: the thread returns to trap, the address of a breakpoint
// instruction of ours, where it stops. Every register and the signal
// mask are put back after, as InjectSyscall does, and the signals the
// call's thread could block stay queued meanwhile; the other threads are
// as the caller left them (running: a lock the function needs may be
// held by one of them). A fault or the thread's end inside the function
// is an error; its side effects stay.
func (p *Process) InjectCall(tid int, fn, trap uint64, args ...uint64) (ret uint64, err error) {
	if err := p.leaveSyscall(tid); err != nil {
		return 0, err
	}
	if err := p.settleRestart(tid); err != nil {
		return 0, err
	}
	interrupted := p.atEventStop(tid)
	err = p.withRegs(tid, trap+singlestep.BreakpointPCAdjust, func(regs *unix.PtraceRegs) error {
		if err := setCall(p, regs, fn, trap, args); err != nil {
			return err
		}
		if err := p.SetRegs(tid, regs); err != nil {
			return err
		}
		for {
			// (Not Cont: a signal kept for the thread waits until it
			// is the thread's own again.)
			if t := p.threads[tid]; t != nil {
				t.Stopped = false
			}
			if err := ptraceCont(tid, 0); err != nil {
				return err
			}
			ev, err := p.WaitThread(tid)
			if err != nil {
				return err
			}
			switch ev.Kind {
			case EventExit:
				return fmt.Errorf("thread %d exited in the call", tid)
			case EventTrap, EventSignal:
				if err := p.GetRegs(tid, regs); err != nil {
					return err
				}
				info, _ := p.Siginfo(tid)
				switch {
				case ev.Kind == EventTrap && regs.PC()-singlestep.BreakpointPCAdjust == trap:
					ret = Result(regs)
					return nil
				case isSyncFault(info):
					return fmt.Errorf("the call faulted (signal %d at %#x)", info.Signo, regs.PC())
				}
				p.deferStopSignal(tid) // the tracee's, for later
			}
			// Else a group-stop or an interrupt: on with the call.
		}
	})
	if err != nil {
		return 0, fmt.Errorf("inject call of %#x: %w", fn, err)
	}
	if interrupted {
		return ret, p.interruptAgain(tid)
	}
	return ret, nil
}

// isSyncFault reports whether info is a fault the thread's own
// instruction raised (not a signal sent to it).
func isSyncFault(info unix.Siginfo) bool {
	switch unix.Signal(info.Signo) {
	case unix.SIGSEGV, unix.SIGBUS, unix.SIGILL, unix.SIGFPE:
		return info.Code > 0
	}
	return false
}

// InVDSO reports whether addr is in the process's vDSO.
func (p *Process) InVDSO(addr uint64) bool {
	maps, err := ReadMaps(p.Pid)
	if err != nil {
		return false
	}
	for _, m := range maps {
		if m.Path == "[vdso]" && addr >= m.Start && addr < m.End {
			return true
		}
	}
	return false
}
