package probe

import (
	"github.com/probedbg/probe/singlestep"
	"github.com/probedbg/probe/tracee"
)

// Holding the world: every thread stopped while text is written that a
// running thread could be inside (jumps over several instructions), and
// a signal a held thread brings kept for it.

// holdForInstall stops every thread but the anchor the first time a
// breakpoint is written before Start, and keeps them until Start
// (optimizeSites) lets them go: a thread must not meet an int3 that Start
// turns into a jump. The forced SIGTRAP of an int3 resets a program's
// SIGTRAP state where SIGTRAP is blocked or ignored (tracee/trapstate.go);
// a jump-optimised entry's mailbox routine keeps it (trapstate.go).
func (t *Tracer) holdForInstall() {
	if t.anchor == 0 || t.installHeld != nil {
		return // started, or held already
	}
	held, ok := t.stopOthers(t.anchor)
	if !ok {
		for _, tid := range held {
			t.proc.Cont(tid, 0)
		}
		return
	}
	if held == nil {
		held = []int{} // no other thread: held all the same
	}
	t.installHeld = held
}

// stopOthers interrupts every thread but anchor and collects each one's
// stop; ok is false if some thread could not be held still (it was then
// resumed). A thread that had trapped on one of our int3s is rewound to
// it (the probe fires when it runs again); a signal is deferred, as Hold
// does. held are the threads to resume.
func (t *Tracer) stopOthers(anchor int) (held []int, ok bool) {
	var asked []int
	for _, th := range t.proc.Threads() {
		switch {
		case th.Tid == anchor:
		case th.Forked || th.Stopped:
			ok = false
			return nil, false
		default: // running, or parked in a group-stop (it stops again for the interrupt)
			asked = append(asked, th.Tid)
		}
	}
	ok = true
	for _, tid := range asked {
		if t.proc.Interrupt(tid) != nil {
			ok = false // gone, or about to be
		}
	}
	for _, tid := range asked {
		ev, err := t.proc.WaitThread(tid)
		for err == nil && ev.Kind == tracee.EventStop && t.trapPending(tid) {
			// The interrupt is reported before a SIGTRAP already
			// pending, with rip one past our int3: take the trap
			// first, to be rewound below.
			if err = t.proc.Cont(tid, 0); err == nil {
				ev, err = t.proc.WaitThread(tid)
			}
		}
		if err != nil {
			continue // gone
		}
		switch ev.Kind {
		case tracee.EventStop, tracee.EventGroupStop:
			// (A group-stopped thread is parked again, not run, when
			// let go.)
		case tracee.EventTrap:
			if t.proc.GetRegs(tid, &t.stop.regs) == nil && t.sites[t.stop.regs.PC()-singlestep.BreakpointPCAdjust] != nil {
				t.stop.regs.SetPC(t.stop.regs.PC() - singlestep.BreakpointPCAdjust)
				t.proc.SetRegs(tid, &t.stop.regs)
			} else if t.isReady() {
				// Past the start, another int3 of ours (a detour's, a
				// stub's, a trampoline's) or the program's own: served
				// as the loop would, and the thread runs on.
				t.dispatch(ev)
				ok = false
				continue
			} else if info, err := t.proc.Siginfo(tid); err == nil {
				if info.Code == tracee.SIBreakpoint {
					// A breakpoint's trap, not ours (a killed probe's
					// the attach puts back, or the program's own): run
					// again, the thread meets what is there then, not
					// a SIGTRAP delivered later far from it.
					t.stop.regs.SetPC(t.stop.regs.PC() - singlestep.BreakpointPCAdjust)
					t.rewriteInsn(t.stop.regs.PC())
					t.proc.SetRegs(tid, &t.stop.regs)
				} else {
					t.proc.Defer(tid, info)
				}
			}
		case tracee.EventSignal:
			if !t.fixCopyFault(tid, ev.Sig) {
				t.deferSignal(tid)
			}
		case tracee.EventExit:
			continue
		default:
			// A fork, clone, exec...: served as the loop would, and
			// the thread runs on.
			t.dispatch(ev)
			ok = false
			continue
		}
		held = append(held, tid)
	}
	return held, ok
}

// deferSignal keeps the signal tid is stopped for, to be delivered when
// it resumes, as Hold does; our doorbell is taken instead (see
// tracee.DeferOrTake) and rung again once the threads run.
func (t *Tracer) deferSignal(tid int) {
	if info, err := t.proc.Siginfo(tid); err == nil {
		t.proc.DeferOrTake(tid, info)
	}
}
