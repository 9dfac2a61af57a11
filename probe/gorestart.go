package probe

import (
	"encoding/binary"

	"golang.org/x/sys/unix"

	"github.com/probedbg/probe/codegen"
	"github.com/probedbg/probe/singlestep"
)

// Go on arm64 loads a global through R27, its assembler's temporary:
// `adrp x27, sym; ldr x1, [x27, #off]`. Asynchronous preemption (SIGURG)
// clobbers R27, so the runtime resumes a goroutine preempted between the
// two at the first (a restartable sequence). A thread sent on from a
// probe at the first instruction, with a SIGURG that came during its
// stop, takes it just there and meets the probe again: one call reported
// twice. So a signal for a thread that stands in such a sequence just
// past a probe waits until the thread has stepped out of it.

// maxRestartSteps bounds the steps through one sequence.
const maxRestartSteps = 4

// A thread goes through the sequence one instruction at a time, each
// run from a copy in an XOL slot with a breakpoint after it: not by
// PTRACE_SINGLESTEP, which arm64 keeps doing after our death (only a
// detach ends it), so that a thread we were stepping then traps at
// every instruction, its SIGTRAP blocked in the rescue's handler, and
// dies. A copy's breakpoint is in the rescue page; one that cannot run
// out of line (a branch) is stepped.

// restartState is a thread's way through a sequence: how many steps,
// the copy it is in (slot 0: stepped in place), and the signal that
// waits until it is out.
type restartState struct {
	steps      int
	slot, orig uint64
	info       unix.Siginfo
}

// deferInRestart defers the signal thread tid is stopped for and steps
// the thread on when it stands in a restartable sequence just past a
// probe's instruction (a word before it); false when it does not.
func (t *Tracer) deferInRestart(tid int) bool {
	if !restartSequences || t.proc.GetRegs(tid, &t.stop.regs) != nil {
		return false
	}
	pc := t.stop.regs.PC()
	s := t.sites[pc-4]
	if s == nil || s.insn == nil || s.module == nil || !isGo(s.module) || t.sites[pc] != nil ||
		!startsRestart(s.insn.Bytes) || !t.inRestart(pc) {
		return false
	}
	info, err := t.proc.Siginfo(tid)
	if err != nil {
		return false
	}
	t.step.restarting[tid] = &restartState{info: info}
	t.restartStep(tid, pc)
	return true
}

// restartStep runs the instruction at pc of thread tid (in t.stop.regs), from
// its copy if it has one.
func (t *Tracer) restartStep(tid int, pc uint64) {
	st := t.step.restarting[tid]
	st.steps++
	st.slot, st.orig = t.restartCopy(tid, pc), pc
	if st.slot == 0 {
		t.proc.Step(tid, 0)
		return
	}
	t.stop.regs.SetPC(st.slot)
	t.proc.SetRegs(tid, &t.stop.regs)
	t.proc.Cont(tid, 0)
}

// restartCopy is the slot with a copy of the instruction at pc and a
// breakpoint after it, made once; 0 if it cannot run out of line.
func (t *Tracer) restartCopy(tid int, pc uint64) uint64 {
	if slot, ok := t.step.restartSlots[pc]; ok {
		return slot
	}
	var b [4]byte
	if _, err := t.proc.ReadAt(b[:], int64(pc)); err != nil {
		return 0
	}
	insn, err := singlestep.Analyze(b[:], pc)
	if err != nil || !insn.CanBoost() {
		t.step.restartSlots[pc] = 0
		return 0
	}
	slot, err := t.allocSlot(tid, pc)
	if err != nil {
		return 0
	}
	code, err := insn.XOL(slot)
	if err == nil {
		// (writeSlots fills the rest of the slot with breakpoints.)
		t.rescuePC(slot+uint64(len(code)), pc+4, codegen.RescueGoOn)
		err = t.writeSlots([]slotWrite{{slot, code}})
	}
	if err != nil {
		t.freeSlot(slot)
		return 0
	}
	t.step.restartSlots[pc] = slot
	return slot
}

// onRestartStep goes on after a step of the sequence: another while the
// next instruction is still in it, else on with the deferred signal.
func (t *Tracer) onRestartStep(tid int) {
	st := t.step.restarting[tid]
	if t.proc.GetRegs(tid, &t.stop.regs) != nil {
		delete(t.step.restarting, tid)
		return
	}
	if st.slot != 0 && t.stop.regs.PC() == st.slot+4 {
		t.stop.regs.SetPC(st.orig + 4)
		t.proc.SetRegs(tid, &t.stop.regs)
	}
	if pc := t.stop.regs.PC(); st.steps < maxRestartSteps && t.sites[pc] == nil && t.inRestart(pc) {
		t.restartStep(tid, pc)
		return
	}
	t.leaveRestart(tid)
	t.proc.Cont(tid, 0)
}

// leaveRestart ends thread tid's way through a sequence where it is: a
// thread in a copy back at the original instruction, or past it, and
// the signal that waited kept for its next resume.
func (t *Tracer) leaveRestart(tid int) {
	st := t.step.restarting[tid]
	if st == nil {
		return
	}
	delete(t.step.restarting, tid)
	if st.slot != 0 && t.proc.GetRegs(tid, &t.stop.regs) == nil {
		switch t.stop.regs.PC() {
		case st.slot:
			t.stop.regs.SetPC(st.orig)
			t.proc.SetRegs(tid, &t.stop.regs)
		case st.slot + 4:
			t.stop.regs.SetPC(st.orig + 4)
			t.proc.SetRegs(tid, &t.stop.regs)
		}
	}
	t.proc.Defer(tid, st.info)
}

// inRestart reports whether the instruction at pc continues a sequence.
func (t *Tracer) inRestart(pc uint64) bool {
	var b [4]byte
	if _, err := t.proc.ReadAt(b[:], int64(pc)); err != nil {
		return false
	}
	return continuesRestart(binary.LittleEndian.Uint32(b[:]))
}
