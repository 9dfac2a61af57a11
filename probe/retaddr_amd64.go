package probe

import (
	"golang.org/x/sys/unix"

	"github.com/probedbg/probe/codegen"
	"github.com/probedbg/probe/fetch"
	"github.com/probedbg/probe/ring"
	"github.com/probedbg/probe/tracee"
)

// On x86-64 a call leaves the return address at [sp]: a frame is known by
// that slot, and a return pops it (sp = slot + 8 at the trampoline).

const returnPops = 8

// returnInSlot: a frame's key is where its return address lives.
const returnInSlot = true

// entryReturn reads the return address at a function's entry.
func (t *Tracer) entryReturn(regs *unix.PtraceRegs) (uint64, bool) {
	return t.readWord(tracee.SP(regs))
}

// hookEntryReturn replaces the return address at a function's entry.
func (t *Tracer) hookEntryReturn(regs *unix.PtraceRegs, to uint64) bool {
	return t.writeWord(tracee.SP(regs), to)
}

// unhijack puts a frame's original return address back in its slot, if
// the slot still holds the trampoline.
func (t *Tracer) unhijack(tid int, f *shadowFrame) bool {
	return unhijackIn(t.proc, f.sp, f.ret, t.ret.trampoline)
}

// unhijackChild is unhijack in the memory of a fork child of thread tid.
func (t *Tracer) unhijackChild(child memory, tid int, f *shadowFrame) {
	unhijackIn(child, f.sp, f.ret, t.ret.trampoline)
}

// rehook hooks again a frame unhijack gave its return address back: the
// slot holds the trampoline again (or still).
func (t *Tracer) rehook(tid int, f *shadowFrame) bool {
	w, ok := t.readWord(f.sp)
	return ok && (w == t.ret.trampoline || w == f.ret && t.writeWord(f.sp, t.ret.trampoline))
}

// unhijackLR: no link register.
func (t *Tracer) unhijackLR(tid int, regs *unix.PtraceRegs, f *shadowFrame) bool { return false }

// linkRegister is 0: x86-64 has none.
func linkRegister(r *unix.PtraceRegs) uint64 { return 0 }

// callerInputs is what a record stub records to name a function's
// caller: the word at sp, the return address.
func callerInputs() fetch.Inputs { return fetch.Inputs{Regs: []int{spOff}, Words: 1} }

// recordedCaller is the return address in a record made with
// callerInputs.
func recordedCaller(regs *unix.PtraceRegs, words []uint64) (uint64, bool) {
	if len(words) == 0 {
		return 0, false
	}
	return words[0], true
}

// routineReturn is where a thread inside the record routine returns to
// in its stub: the call pushed it.
func (t *Tracer) routineReturn(regs *unix.PtraceRegs) (uint64, bool) {
	return t.readWord(tracee.SP(regs))
}

// hookInputs is what a record stub records for its return hook: sp and
// the word there, the return address (recordedCaller).
func hookInputs() fetch.Inputs { return callerInputs() }

// swapInproc replaces from by to in the slot of frame f, hooked in the
// tracee by thread tid, in mem.
func (t *Tracer) swapInproc(mem memory, tid int, f ring.ShadowFrame, from, to uint64) bool {
	return unhijackIn(mem, f.Slot, to, from)
}

// setLinkRegister: no link register.
func setLinkRegister(r *unix.PtraceRegs, v uint64) {}

// unhijackSigLRs: no link register.
func (t *Tracer) unhijackSigLRs(tid int) {}

// unhookInprocLR: no link register.
func (t *Tracer) unhookInprocLR(tid int, frames []ring.ShadowFrame) {}

// unhookChildLR: no link register.
func (t *Tracer) unhookChildLR(child, tid int) {}

// slotHooked reports whether frame f's slot still holds the trampoline.
func (t *Tracer) slotHooked(f *shadowFrame) bool {
	w, ok := t.readWord(f.sp)
	return ok && w == t.ret.trampoline
}

// entryView is a thread's registers just past plain -pg's call of mcount
// (site.frame) as they were at the function's entry: sp just above the
// return address at 8(%rbp), rbp the caller's, which the prologue pushed
// at (%rbp); the rest as they came (the pushes and mcount keep them).
// false: the frame cannot be read.
func (t *Tracer) entryView(regs *unix.PtraceRegs, above uint64) (unix.PtraceRegs, bool) {
	v := *regs
	bp, ok := t.readWord(regs.Rbp)
	v.Rsp, v.Rbp = regs.Rbp+above, bp
	return v, ok
}

// unhookFrameRecord: a stub past mcount hooks the slot that is its
// frame's key, which restoreInprocReturns puts back.
func (t *Tracer) unhookFrameRecord(tid int, regs *unix.PtraceRegs, stub *codegen.RecordStub) {}

// leaveEntryView: a return hooked in an entryView wrote its slot.
func (t *Tracer) leaveEntryView(tid int, regs, view *unix.PtraceRegs, s *site) {}

// mcountKeepsArgs: past plain -pg's call of mcount the arguments are in
// their registers as they came (mcount saves them).
const mcountKeepsArgs = true
