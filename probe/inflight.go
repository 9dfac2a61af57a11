package probe

import "golang.org/x/sys/unix"

// inFlight is the thread whose stop is being handled, with the registers it
// must be let go with if we fail (panic) before resuming it: at a probe, the
// probed instruction (its original bytes are back after detach); on the
// return trampoline, the caller it returns to. Without it a bug of ours in
// a handler would leave that thread one byte past a breakpoint or on a
// trampoline that detach unmaps.
type inFlight struct {
	tid  int
	regs unix.PtraceRegs
	slot uint64 // 1 + the mailbox slot the thread holds, if it holds one
}

// handling notes that tid, stopped, resumes with regs at rip if we fail.
func (t *Tracer) handling(tid int, regs *unix.PtraceRegs, rip uint64) {
	t.stop.flight.tid, t.stop.flight.regs = tid, *regs
	t.stop.flight.regs.SetPC(rip)
}

// handled notes that the stop handled has been resumed (or given up).
func (t *Tracer) handled() { t.stop.flight.tid, t.stop.flight.slot = 0, 0 }

// rewindInFlight puts the thread whose stop was being handled when we
// failed where it can go on without us.
func (t *Tracer) rewindInFlight() {
	tid := t.stop.flight.tid
	t.stop.flight.tid = 0
	if th := t.proc.Thread(tid); tid == 0 || th == nil || !th.Stopped {
		return
	}
	delete(t.step.threads, tid)
	if t.proc.SetRegs(tid, &t.stop.flight.regs) == nil && t.stop.flight.slot != 0 && t.mail.box != nil && t.mail.box.owns(t.stop.flight.slot-1, tid) {
		t.mail.box.release(t.stop.flight.slot - 1) // it will not run the rest of the routine
	}
	t.stop.flight.slot = 0
}

// returnTarget is where a thread on the trampoline with its return slot at
// slot goes back to: where the oldest frame that returns there sends it
// (returning, returnsTo, with throughTracee). ok is false if no
// frame returns there.
func (cs *callStack) returnTarget(slot uint64, throughTracee bool, rawTramp uint64) (ret uint64, ok bool) {
	if n := cs.returning(slot, throughTracee, rawTramp); n > 0 {
		return cs.frames[len(cs.frames)-n].returnsTo(throughTracee), true
	}
	return 0, false
}

// returning is how many frames, from the top, return when a thread comes
// to the tracer's trampoline from slot: those at the slot (tail calls
// share it). With throughTracee (the tracee's shadow stack has a frame at
// the slot: a call it hooked, then tail-called into a function that
// stops), not one under a frame the tracer hijacked that the tracee
// hooked (not hijacked): the hijacked frame's return address is the
// in-process trampoline, which the thread goes on to, and which reports
// the rest. Without, every one: the tracee dropped its frame (a later
// tail call's hook found the tracer's trampoline in the slot), and the
// thread goes straight home.
//
// Under raw capture (rawTramp, the in-process trampoline) the tracer
// keeps no frames of the calls the tracee hooked: with throughTracee the
// frames that return are those entered after the tracee's hook, which
// found its trampoline at the slot (a tail call takes its caller's); if
// the newest was not, the tracee's frame is not its caller's.
func (cs *callStack) returning(slot uint64, throughTracee bool, rawTramp uint64) int {
	if top := cs.topOrNil(); rawTramp != 0 && top != nil && top.ret != rawTramp {
		throughTracee = false
	}
	n, hijacked := 0, false
	for i := len(cs.frames) - 1; i >= 0 && cs.frames[i].sp == slot; i-- {
		f := &cs.frames[i]
		if throughTracee && (hijacked && !f.hijacked || rawTramp != 0 && f.ret != rawTramp) {
			break
		}
		n, hijacked = n+1, hijacked || f.hijacked
	}
	return n
}
