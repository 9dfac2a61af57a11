package tracee

import (
	"encoding/binary"
	"fmt"
	"strconv"

	"golang.org/x/sys/unix"
)

// A breakpoint's SIGTRAP, and a single-step's, is forced on the thread
// (force_sig_info_to_task): when SIGTRAP is blocked in the thread or
// ignored by the process, the kernel resets the process's SIGTRAP action
// to SIG_DFL and unblocks SIGTRAP in the thread, so that the trap cannot
// be lost. Untraced, the program has neither change: a handler of its own
// would be gone (the next SIGTRAP kills it) and a mask it set would not
// hold. Only the state from before the trap says what to put back, and
// only the tracee can read it then (the mailbox routine does, before its
// int3), or we before a step of ours. The thread owes that state until it
// next runs (Cont, Detach): never put back before a step, whose own
// forced SIGTRAP would take it again.

const (
	trapBit = 1 << (unix.SIGTRAP - 1)
	sigDfl  = 0
	sigIgn  = 1
)

// TrapState is the signal state a forced SIGTRAP can change: the thread's
// blocked signals and the process's SIGTRAP action, as rt_sigaction lays
// it out (handler, flags, restorer, mask).
type TrapState struct {
	Mask   uint64
	Action [4]uint64
}

// TrapBlocked reports whether SIGTRAP is blocked in s's mask.
func (s TrapState) TrapBlocked() bool { return s.Mask&trapBit != 0 }

// TrapIgnored reports whether s's SIGTRAP action is SIG_IGN.
func (s TrapState) TrapIgnored() bool { return s.Action[0] == sigIgn }

// TrapDefault reports whether s's SIGTRAP action is SIG_DFL.
func (s TrapState) TrapDefault() bool { return s.Action[0] == sigDfl }

// owedTrapState is what a thread must get back before it runs.
type owedTrapState struct {
	state        TrapState
	mask, action bool
}

// OweTrapState records that a forced SIGTRAP at tid's stop took from it
// the parts of s that mask and action say (its blocked signals; the
// SIGTRAP action), to be put back before the thread runs again. A thread
// owes one state at most: what a second trap before it runs finds is not
// the program's.
func (p *Process) OweTrapState(tid int, s TrapState, mask, action bool) {
	t := p.threads[tid]
	if t == nil || t.owed != nil || !mask && !action {
		return
	}
	t.owed = &owedTrapState{state: s, mask: mask, action: action}
}

// Sigmask returns stopped thread tid's blocked signals.
func (p *Process) Sigmask(tid int) (uint64, error) {
	var mask uint64
	err := ptraceGetSigmask(tid, &mask)
	return mask, err
}

// SetSigmask sets the blocked signals of stopped thread tid.
func (p *Process) SetSigmask(tid int, mask uint64) error {
	return ptraceSetSigmask(tid, &mask)
}

// payTrapState puts back what thread t owes before it runs: the action
// with an injected rt_sigaction, then the mask (blocked again before a
// signal the resume delivers: a SIGTRAP is then queued again by the
// kernel, as it would have stayed). A failure (the thread gone meanwhile)
// is counted in TrapStateFailures.
func (p *Process) payTrapState(t *Thread) {
	o := t.owed
	if o == nil {
		return
	}
	t.owed = nil
	if o.action {
		if err := p.SetTrapAction(t.Tid, o.state.Action); err != nil {
			p.TrapStateFailures++
			return
		}
	}
	if o.mask && ptraceSetSigmask(t.Tid, &o.state.Mask) != nil {
		p.TrapStateFailures++
	}
}

// SetTrapAction makes act the process's SIGTRAP action, through stopped
// thread tid. Setting SIG_IGN discards the SIGTRAPs pending in every
// thread (POSIX), the forced ones of int3s not yet taken among them: only
// while no other thread runs.
func (p *Process) SetTrapAction(tid int, act [4]uint64) error {
	var b [32]byte
	for i, w := range act {
		binary.LittleEndian.PutUint64(b[8*i:], w)
	}
	at, err := p.belowRedZone(tid, len(b))
	if err == nil {
		_, err = p.WriteAt(b[:], int64(at))
	}
	if err != nil {
		return fmt.Errorf("thread %d: put back the SIGTRAP action: %w", tid, err)
	}
	inject := p.InjectSyscall
	if act[0] == sigIgn {
		// A step's forced SIGTRAP would reset SIG_IGN as soon as it is
		// set: only the syscall stops of PTRACE_SYSCALL can see it done.
		inject = p.injectSyscallNoStep
	}
	ret, err := inject(tid, unix.SYS_RT_SIGACTION, uint64(unix.SIGTRAP), at, 0, 8)
	if err == nil {
		err = syscallErr(ret)
	}
	if err != nil {
		return fmt.Errorf("thread %d: put back the SIGTRAP action: %w", tid, err)
	}
	return nil
}

// TrapAction reads the process's SIGTRAP action through stopped thread tid.
func (p *Process) TrapAction(tid int) ([4]uint64, error) {
	var act [4]uint64
	at, err := p.belowRedZone(tid, 32)
	if err != nil {
		return act, err
	}
	ret, err := p.InjectSyscall(tid, unix.SYS_RT_SIGACTION, uint64(unix.SIGTRAP), 0, at, 8)
	if err == nil {
		err = syscallErr(ret)
	}
	var b [32]byte
	if err == nil {
		_, err = p.ReadAt(b[:], int64(at))
	}
	if err != nil {
		return act, fmt.Errorf("thread %d: read the SIGTRAP action: %w", tid, err)
	}
	for i := range act {
		act[i] = binary.LittleEndian.Uint64(b[8*i:])
	}
	return act, nil
}

// belowRedZone is where n bytes of stopped thread tid's stack are free for
// a system call we inject to read or write: past the 128 bytes of red zone
// below its sp, where its signal handlers' frames would go.
func (p *Process) belowRedZone(tid, n int) (uint64, error) {
	var regs unix.PtraceRegs
	if err := p.GetRegs(tid, &regs); err != nil {
		return 0, err
	}
	return (SP(&regs) - 128 - uint64(n)) &^ 15, nil
}

// TrapIgnored reports whether process pid ignores SIGTRAP now.
func TrapIgnored(pid int) bool { return trapIn(pid, "SigIgn") }

// TrapCaught reports whether process pid has a handler for SIGTRAP now.
func TrapCaught(pid int) bool { return trapIn(pid, "SigCgt") }

// trapIn reports whether SIGTRAP is in the signal set field of pid's
// status.
func trapIn(pid int, field string) bool {
	v, ok := statusField(fmt.Sprintf("/proc/%d/status", pid), field)
	if !ok {
		return false
	}
	set, err := strconv.ParseUint(v, 16, 64)
	return err == nil && set&trapBit != 0
}

// StepKeepingSignals single-steps a stopped thread, as Step, without the
// step's forced SIGTRAP changing its mask: SIGTRAP blocked in the thread is
// unblocked for the step, and owed back. (An ignored SIGTRAP is reset by
// the step all the same: the caller puts SIG_IGN back once it is done.)
// For steps of a thread that did not just trap: one that did has had its
// state changed already, and owes it.
func (p *Process) StepKeepingSignals(tid int) error {
	if t := p.threads[tid]; t != nil && t.owed == nil {
		var s TrapState
		if err := ptraceGetSigmask(tid, &s.Mask); err != nil {
			return err
		}
		if s.TrapBlocked() {
			unblocked := s.Mask &^ trapBit
			if err := ptraceSetSigmask(tid, &unblocked); err != nil {
				return err
			}
			t.owed = &owedTrapState{state: s, mask: true}
		}
	}
	return p.Step(tid, 0)
}

// OwesTrapState reports whether tid has signal state to get back.
func (p *Process) OwesTrapState(tid int) bool {
	t := p.threads[tid]
	return t != nil && t.owed != nil
}
