package probe

import "encoding/binary"

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

// deferInRestart defers the signal thread tid is stopped for and steps
// the thread on when it stands in a restartable sequence just past a
// probe's instruction (a word before it); false when it does not.
func (t *Tracer) deferInRestart(tid int) bool {
	if !restartSequences || t.proc.GetRegs(tid, &t.regs) != nil {
		return false
	}
	pc := t.regs.PC()
	s := t.sites[pc-4]
	if s == nil || s.insn == nil || s.module == nil || !isGo(s.module) || t.sites[pc] != nil ||
		!startsRestart(s.insn.Bytes) || !t.inRestart(pc) {
		return false
	}
	info, err := t.proc.Siginfo(tid)
	if err != nil {
		return false
	}
	t.proc.Defer(tid, info)
	t.restarting[tid] = 1
	t.proc.Step(tid, 0)
	return true
}

// onRestartStep goes on after a step of deferInRestart: another while
// the next instruction is still in the sequence, else on with the
// deferred signal.
func (t *Tracer) onRestartStep(tid int) {
	n := t.restarting[tid]
	if n < maxRestartSteps && t.proc.GetRegs(tid, &t.regs) == nil && t.sites[t.regs.PC()] == nil && t.inRestart(t.regs.PC()) {
		t.restarting[tid] = n + 1
		t.proc.Step(tid, 0)
		return
	}
	delete(t.restarting, tid)
	t.proc.Cont(tid, 0)
}

// inRestart reports whether the instruction at pc continues a sequence.
func (t *Tracer) inRestart(pc uint64) bool {
	var b [4]byte
	if _, err := t.proc.ReadAt(b[:], int64(pc)); err != nil {
		return false
	}
	return continuesRestart(binary.LittleEndian.Uint32(b[:]))
}
