package probe

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"

	"github.com/probedbg/probe/codegen"
	"github.com/probedbg/probe/ring"
	"github.com/probedbg/probe/tracee"
)

// Threads and the record code: a thread held inside a stub, the record
// routine or the in-process trampoline at detach, a thread's ring once it
// is gone, a clone without TLS of its own and a vfork child sharing its
// parent's, and turning recording off while threads run.

// leaveRecordCode takes a held thread inside the record routine or a
// stub back to the probed instruction, every register as it was (from
// the stub's saves): the original bytes go back before it runs again,
// and it runs the function from its start. A record it had committed is
// drained; one it had only reserved is not, nor counted lost: the call
// runs again, untraced. A thread in the return trampoline goes on to
// where the function returns. No step: a step over the stub's pushfq
// would save the trap flag for its popfq to set again once we are gone.
func (t *Tracer) leaveRecordCode(tid int) {
	if t.inproc == nil || t.proc.GetRegs(tid, &t.stop.regs) != nil {
		return
	}
	if t.rewindRecordCode(tid, &t.stop.regs) && t.proc.SetRegs(tid, &t.stop.regs) == nil {
		t.jumps.detourExits.Add(1)
	}
}

// rewindRecordCode moves regs, thread tid's (stopped, or as a signal
// frame on its stack saved them), out of the record code as
// leaveRecordCode says; false if they are not in it or cannot be moved.
func (t *Tracer) rewindRecordCode(tid int, regs *unix.PtraceRegs) bool {
	in := t.inproc
	rip := regs.PC()
	var rw codegen.StubRewind
	to, back := uint64(0), false        // where the thread goes; back: a return
	var from *recordSite                // the stub it leaves
	stubAt := func(ret uint64) uint64 { // the probed instruction of the stub a call returns to
		for _, rs := range in.sites {
			if ret > rs.stub && ret <= rs.end {
				from = rs
				return rs.site.addr
			}
		}
		return 0
	}
	if r, ok := in.routineAt(rip); ok {
		ret, ok := t.routineReturn(regs)
		switch {
		case codegen.Trampoline(r) != 0 && rip >= codegen.Trampoline(r) && rip <= codegen.TrampolineTrap(r):
			rw, back = codegen.TrampolineRewind(r, rip, tracee.SP(regs), false)
		case !ok:
			return false
		case codegen.Trampoline(r) != 0 && ret >= codegen.Trampoline(r) && ret < codegen.TrampolineTrap(r):
			rw, back = codegen.TrampolineRewind(r, rip, tracee.SP(regs), true)
		default:
			rw, to = codegen.RoutineRewind(tracee.SP(regs)), stubAt(ret)
		}
	}
	if to == 0 && !back {
		for _, rs := range in.sites {
			if r, ok := rs.code.Rewind(rs.stub, rip, tracee.SP(regs)); ok {
				rw, to, from = r, rs.site.addr, rs
				break
			}
		}
	}
	if rw.Saved {
		words := regWords(regs)
		for i, off := range codegen.SavedRegs() {
			v, ok := t.readWord(rw.Area + uint64(8*i))
			if !ok {
				return false
			}
			words[off/8] = v
		}
	}
	if back {
		// (arm64: x30 is the return address once the trampoline has
		// popped the frame, and as a ret leaves it.)
		if lr := linkRegister(regs); !returnInSlot && lr != in.trampoline {
			to = lr
		} else {
			to = t.returnTo(tid, rw.SP-returnPops)
		}
		setLinkRegister(regs, to)
	}
	if to == 0 {
		return false
	}
	if from != nil && from.code.FrameEntry {
		t.unhookFrameRecord(tid, regs, from.code)
	}
	tracee.SetSP(regs, rw.SP)
	regs.SetPC(to)
	// A thread stopped in a stub's process_vm_readv must not have the
	// kernel restart it where it goes now.
	tracee.NoRestart(regs)
	return true
}

// inRecordCode reports whether rip is in a record stub or routine.
func (t *Tracer) inRecordCode(rip uint64) bool {
	in := t.inproc
	if in == nil {
		return false
	}
	if _, ok := in.routineAt(rip); ok {
		return true
	}
	for _, rs := range in.sites {
		if rip >= rs.stub && rip < rs.end {
			return true
		}
	}
	return false
}

// routineAt returns the copy of the record routine rip is in.
func (in *inproc) routineAt(rip uint64) (uint64, bool) {
	for _, r := range in.routines {
		if rip >= r && rip < r+uint64(in.size) {
			return r, true
		}
	}
	return 0, false
}

// returnTo is where a thread in the in-process trampoline returns, from
// the call whose frame's key is slot: the slot has the return address
// back (x86-64), or the thread's newest frame there has it.
func (t *Tracer) returnTo(tid int, slot uint64) uint64 {
	if w, ok := t.readWord(slot); ok && w != t.inproc.trampoline && returnInSlot {
		return w
	}
	frames := t.shadowOf(tid)
	for i := len(frames) - 1; i >= 0; i-- {
		if frames[i].Slot == slot {
			return frames[i].Ret &^ ring.UnhookedBit
		}
	}
	return 0
}

// recordThreadGone gives tid's ring back once what it holds is handed
// on: now, or after a later drain (then it reports true, and tid's comm
// is forgotten then).
func (t *Tracer) recordThreadGone(tid int) (later bool) {
	in := t.inproc
	if in == nil {
		return false
	}
	in.gone[tid] = true
	t.drainRecords(false, 0)
	t.freeGone()
	return in.gone[tid]
}

// freeGone gives back the rings of gone threads that are drained.
func (t *Tracer) freeGone() {
	in := t.inproc
	t.collectTallies() // what the gone threads counted, before their counters go
	for tid := range in.gone {
		if !in.rings.Drained(tid) {
			continue
		}
		delete(in.gone, tid)
		delete(t.comms, tid)
		delete(in.tallyLast, tid)
		if lost, ok := in.rings.Free(tid); ok && lost > 0 {
			in.freed[tid] += lost
		}
	}
}

// onClone stops in-process recording in the process if the new thread
// tid that thread parent made (stopped at its clone event) has no TLS of
// its own (clone without CLONE_SETTLS): it reads its parent's thread id
// where the stubs look for its own, and would write its parent's ring,
// and push its hooked returns on its parent's shadow stack, at the same
// time as the parent (a program's returns sent to another thread's
// callers).
func (t *Tracer) onClone(parent, tid int) {
	if t.inproc == nil || t.recording.stoppedWhy != "" || t.proc.GetRegs(parent, &t.stop.regs) != nil {
		return
	}
	if cloneSetsTLS(&t.stop.regs, t.readWord) {
		return
	}
	why := fmt.Sprintf("thread %d has no TLS of its own (clone without CLONE_SETTLS)", tid)
	fmt.Fprintf(os.Stderr, "probe: %s: from now on every probe stops the thread\n", why)
	t.stopRecording(why)
}

// stopRecording turns every site that records in the tracee back into a
// stop, while threads run: the jmps become int3s (unoptimize); a thread
// inside a stub or detour goes on through it (the detours stay), and
// returns hooked in the tracee come back through its trampoline, each
// thread's from its own ring. No site records in the tracee after.
func (t *Tracer) stopRecording(why string) {
	t.recording.stoppedWhy = why
	sts := t.recordSites()
	t.unoptimize(sts)
	for _, st := range sts {
		st.opt, st.trapWhy = nil, why
	}
	notePaths(sts...)
}

// recordSites are the sites whose jmp leads to a record stub.
func (t *Tracer) recordSites() []*site {
	var sts []*site
	for _, st := range t.sites {
		if st.opt != nil && st.opt.record != nil {
			sts = append(sts, st)
		}
	}
	return sts
}

// recordVfork notes that thread parent is stopped until its vfork child
// execs or exits: the child shares its control block, so what its ring
// gets meanwhile is the child's, not reported (as the trapping path).
func (t *Tracer) recordVfork(parent, child int) {
	if in := t.inproc; in != nil {
		t.drainAll()
		in.vforked[child] = parent
		in.quiet[parent] = true
	}
}

// recordVforkParentDone is recordVforkDone of the vfork child of thread
// parent, which is stopped at the end of its vfork.
func (t *Tracer) recordVforkParentDone(parent int) {
	if in := t.inproc; in != nil {
		for child, p := range in.vforked {
			if p == parent {
				t.recordVforkDone(child)
			}
		}
	}
}

// recordVforkDone ends what recordVfork began, at the child's exec or
// exit, or at the end of the parent's vfork, whichever comes first.
func (t *Tracer) recordVforkDone(child int) {
	in := t.inproc
	if in == nil {
		return
	}
	parent, ok := in.vforked[child]
	if !ok {
		return
	}
	t.drainAll()
	delete(in.vforked, child)
	delete(in.quiet, parent)
}
