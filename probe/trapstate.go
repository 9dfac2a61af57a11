package probe

import (
	"golang.org/x/sys/unix"

	"github.com/probedbg/probe/codegen"
	"github.com/probedbg/probe/tracee"
)

// The program's own SIGTRAP state, kept as it set it (tracee/trapstate.go
// says what an int3's forced SIGTRAP does to it). At a mailbox trap the
// thread has read its signal mask and the SIGTRAP action just before its
// int3, and had SIGTRAP unblocked for the trap itself if it was blocked
// (codegen.MailboxRoutine): the kernel then changes nothing, unless the
// process ignores SIGTRAP, whose SIG_IGN it resets to SIG_DFL, or we
// blocked SIGTRAP again to deliver a signal in that stretch (a handler
// must see the thread's mask). What it changed, the thread owes back.

// trapAction is the process's SIGTRAP action as the program set it, as far
// as the mailbox has told.
type trapAction struct {
	act   [4]uint64
	known bool
	reset bool // a trap of ours has reset it: SIG_DFL read since may be ours
}

// mailboxTrapState records what the forced SIGTRAP of the thread at the
// mailbox trap in slot changed, for the thread to give back before it
// runs: a handler reset because we blocked SIGTRAP again, and when the
// routine will not block it again itself (settled: the thread leaves the
// routine at its trap), the mask. A SIG_IGN, which every such trap
// resets, is the program's all the same (trapIgnored) and is put back
// when no thread runs, at detach or exec (restoreTrapIgnored): setting
// SIG_IGN discards the SIGTRAPs pending in every thread, and with them
// the traps of other threads' int3s that they have yet to take.
func (t *Tracer) mailboxTrapState(tid int, slot uint64, settled bool) {
	s := t.mail.box.trapState(slot)
	t.learnTrapAction(&s)
	reblocked := t.traps.reblocked[tid]
	delete(t.traps.reblocked, tid)
	handlerReset := reblocked && !s.TrapDefault() && !s.TrapIgnored()
	if handlerReset || s.TrapIgnored() {
		t.traps.program.reset = true
	}
	t.proc.OweTrapState(tid, s, settled && s.TrapBlocked(), handlerReset)
}

// learnTrapAction takes in the SIGTRAP action a thread read before its
// trap. Once a trap of ours has reset it, a SIG_DFL read may be that
// reset's (not yet undone, or never for SIG_IGN): it is taken for the
// action we know.
func (t *Tracer) learnTrapAction(s *tracee.TrapState) {
	a := &t.traps.program
	switch {
	case !s.TrapDefault():
		a.act, a.known = s.Action, true
	case a.known && a.reset:
		s.Action = a.act
	}
}

// trapIgnored reports whether the program ignores SIGTRAP, as the mailbox
// has told: a SIGTRAP for it is then dropped, not delivered, for the
// kernel's action is the SIG_DFL of a reset until detach.
func (t *Tracer) trapIgnored() bool {
	return t.traps.program.known && t.traps.program.act[0] == 1 // SIG_IGN
}

// passTrap resumes a thread stopped for a SIGTRAP that is the program's,
// delivering it, or dropping it as the kernel would if the program
// ignores SIGTRAP (and it is not blocked, else it would not be here).
func (t *Tracer) passTrap(tid int) {
	if t.trapIgnored() {
		t.proc.Cont(tid, 0)
		return
	}
	t.proc.Cont(tid, int(unix.SIGTRAP))
}

// trapIgnoredBefore says, before detach steps any thread, whether the
// program ignores SIGTRAP and with what action: as the mailbox told, or
// as the kernel has it now (a step's forced SIGTRAP resets it).
func (t *Tracer) trapIgnoredBefore(tids []int) (act [4]uint64, ignored bool) {
	if t.trapIgnored() {
		return t.traps.program.act, true
	}
	if !tracee.TrapIgnored(t.pid) {
		return act, false
	}
	for _, tid := range tids {
		if act, err := t.proc.TrapAction(tid); err == nil {
			return act, act[0] == 1
		}
	}
	return [4]uint64{1}, true // SIG_IGN, flags and mask unknown
}

// restoreTrapIgnored puts SIG_IGN back as the program's SIGTRAP action,
// if a trap of ours has reset it, through one of the held threads tids
// (one that can run a system call without changing what it is doing);
// no thread of the process may be running.
func (t *Tracer) restoreTrapIgnored(act [4]uint64, tids ...int) {
	if tracee.TrapIgnored(t.pid) {
		return
	}
	var err error
	for _, tid := range tids {
		if err = t.proc.SetTrapAction(tid, act); err == nil {
			return
		}
	}
	t.note("pid %d: SIGTRAP, which the program ignores, could not be made ignored again: %v", t.pid, err)
}

// keepTrapMaskForSignal blocks SIGTRAP again in a thread about to take a
// signal while the mailbox routine has it unblocked for its trap: the
// handler must run with the thread's own mask. If the thread has yet to
// trap, that trap then finds SIGTRAP blocked, and what it resets is owed.
func (t *Tracer) keepTrapMaskForSignal(tid int, slot uint64) {
	m := t.mail.box
	var regs unix.PtraceRegs
	if t.proc.GetRegs(tid, &regs) != nil {
		return
	}
	rip := regs.PC()
	for _, l := range []codegen.RoutineLayout{m.entryLayout, m.retLayout} {
		if l.Unblocked == 0 || rip < l.Unblocked || rip >= l.Reblocked {
			continue
		}
		if s := m.trapState(slot); s.TrapBlocked() && t.proc.SetSigmask(tid, s.Mask) == nil && rip <= l.Trap {
			t.traps.reblocked[tid] = true
		}
		return
	}
}

// reblockTrap does for a thread about to run its routine's system call
// that blocks SIGTRAP again what that call does, instead of stepping it:
// the step's forced SIGTRAP would find SIGTRAP blocked by then, and
// unblock it (and reset a handler). It reports whether it did.
func (t *Tracer) reblockTrap(tid int, regs *unix.PtraceRegs) bool {
	m := t.mail.box
	for _, l := range []codegen.RoutineLayout{m.entryLayout, m.retLayout} {
		if l.Reblocked == 0 || regs.PC() != l.Reblocked-2 {
			continue
		}
		slot, ok := m.slotAt(reblockSlotReg(regs))
		if !ok || t.proc.SetSigmask(tid, m.trapState(slot).Mask) != nil {
			return false
		}
		// As the call returns: rax its result, rcx and r11 clobbered.
		returnFromSyscall(regs, l.Reblocked)
		return t.proc.SetRegs(tid, regs) == nil
	}
	return false
}
