package probe

import (
	"cmp"
	"fmt"

	"golang.org/x/sys/unix"

	"github.com/probedbg/probe/codegen"
	"github.com/probedbg/probe/ring"
	"github.com/probedbg/probe/tracee"
)

// In-process return hooks: a record stub whose site has return probes or
// is traced with returns (function_graph) hooks the return itself
// (codegen's HookRoutine): the thread keeps its hooked calls on a
// shadow stack in its ring's header and returns through an in-process
// trampoline that records the return. Neither stops the thread.
//
// The tracer's call stacks (callStack) follow from the records: an entry
// record pushes a frame (not hijacked: the return address is the
// tracee's to give back), a return record pops every frame at its slot,
// and both drop the frames the tracee dropped, by the same rule (sp).
// The tracee's shadow stack is the one that sends threads home; ours
// only reports. Where they could part (a frame we dropped that the
// tracee had not), a return with no frame of ours is not reported.

// returnRecordable says why return probe p cannot be served from the
// tracee's return records (%ax, %dx and the slot), or "".
func (t *Tracer) returnRecordable(p *Probe) string {
	if !p.handler.Recorded || p.handler.Post != nil {
		return "its actions need the thread stopped"
	}
	if returnsTwice[p.funcName] {
		return "returns twice: it saves its return address"
	}
	low := p.args.Lower()
	in := low.Record
	switch {
	case low.NoRecord != "":
		return low.NoRecord
	case in.Words > 0:
		return "reads the stack at a return"
	case len(in.Reads) > 0:
		return "reads memory at a return"
	}
	for _, off := range in.Regs {
		if off != resultOff && off != result2Off && off != spOff {
			return "reads a register other than %ax, %dx or %sp at a return"
		}
	}
	return ""
}

// replayEnter follows an entry record of a return-hooking site into the
// thread's call stack: the function tracer's entry, and the frame its
// return pops. ret is the return address the entry found at sp; hooked
// says whether the stub hooked the return.
func (t *Tracer) replayEnter(s *site, hit *Hit, ret uint64, hooked bool) {
	cs := t.ret.threadStack(hit.Tid)
	sp := tracee.SP(hit.regs)
	f := shadowFrame{sp: sp, ret: ret, site: s, time: hit.Time}
	if ret == t.inproc.trampoline {
		// A tail call: it returns with its caller, whose frame has
		// the slot.
		if top := cs.top(); top != nil && top.sp == sp {
			f.ret = top.ret
		} else {
			hooked = false
		}
	} else {
		// A tail call from a function whose return the tracer hooked
		// (its trampoline at sp) returns through both: that frame
		// stays. The tracee dropped its own frames at or below sp;
		// one the tracer hooked may be a coroutine's, parked on
		// another stack: stackAt leaves it be.
		pos := sp
		if ret == t.ret.trampoline && ret != 0 {
			pos--
		}
		cs = t.stackAt(hit.Tid, cs, pos, hit)
	}
	if s.fn != nil {
		t.traceEnter(cs, &f, s.fn, hit)
	}
	cs.push(f)
	if !hooked {
		// The tracee's shadow stack was full: its return will not be
		// seen.
		t.lose(cs, hit, false)
		return
	}
	t.noteStack(cs, hit.Tid)
}

// replayReturn follows a return record: the frames at its slot return,
// with %rax and %rdx as the function left them.
func (t *Tracer) replayReturn(rec *ring.Record, hit *Hit) {
	if len(rec.Values) < codegen.ReturnValues {
		return
	}
	slot := rec.Values[0]
	cs := t.stackForReturn(rec.Tid, slot)
	if !cs.has(slot) {
		return
	}
	t.dropDead(cs, slot, true, hit)
	top := cs.top()
	if top == nil || top.sp != slot {
		return
	}
	tracee.SetResults(hit.regs, rec.Values[1], rec.Values[2])
	t.inproc.errno = int32(rec.Values[3])
	tracee.SetSP(hit.regs, slot+returnPops)
	hit.regs.SetPC(top.ret)
	// (A frame the tracer hooked at the slot returns at its own
	// trampoline, next.)
	for f := cs.top(); f != nil && f.sp == slot && !f.hijacked; f = cs.top() {
		fr := cs.pop()
		t.returned(cs, &fr, hit)
	}
}

// shadowOf returns tid's in-process shadow stack, or nil.
func (t *Tracer) shadowOf(tid int) []ring.ShadowFrame {
	if t.inproc == nil {
		return nil
	}
	return t.inproc.rings.Shadow(tid)
}

// restoreInprocReturns puts back every return address the tracee's
// shadow stacks hold where it still is the trampoline, for detach: every
// thread is held, none in the record code, every record drained.
func (t *Tracer) restoreInprocReturns() {
	in := t.inproc
	if in == nil || in.trampoline == 0 {
		return
	}
	for _, tid := range in.rings.Owners() {
		frames := in.rings.Shadow(tid)
		t.unhookInprocLR(tid, frames)
		home := t.slotHomes(tid, frames)
		for _, f := range frames {
			if f.Ret&ring.UnhookedBit == 0 {
				t.swapInproc(t.proc, tid, f, in.trampoline, cmp.Or(home[f.Slot], f.Ret))
			}
		}
		t.retargetHijacked(tid, home)
		in.rings.SetShadow(tid, nil)
	}
}

// slotHomes gives, for each slot of thread tid's hooked calls, where the
// thread returns from it in the end: the return address the first call
// hooked there found, before any trampoline. A slot hooked by both
// shadow stacks (a call hooked in the tracee that tail-called a function
// whose return stops the thread, or the other way round) holds one
// trampoline whose frame remembers the other; put back as it stands,
// after the tracee's frames are gone, it sent the thread to a trampoline
// with no frame: SIGTRAP after the detach (issue 35). The tracee's own
// frames come first: they are the calls in flight, where the tracer's may
// be stale (a ring that dropped records hides calls that came since,
// and a frame of an earlier call at the same slot, with another return
// address, stays; preferring it sent work's return into rec's caller:
// TestInProcessReturnDetachUnderLoad, SIGSEGV). The tracer's stacks
// answer for a slot whose tracee frames hold only the tracer's trampoline
// (a tail call's hook that found it replaced the frame of the first call).
func (t *Tracer) slotHomes(tid int, frames []ring.ShadowFrame) map[uint64]uint64 {
	home := map[uint64]uint64{}
	note := func(slot, ret uint64) {
		if _, ok := home[slot]; !ok && !t.isTrampoline(ret) {
			home[slot] = ret
		}
	}
	for _, f := range frames {
		note(f.Slot, f.Ret&^ring.UnhookedBit)
	}
	for _, cs := range t.ret.threadStacks(tid) {
		for _, f := range cs.frames {
			note(f.sp, cmp.Or(f.home, f.ret))
		}
	}
	return home
}

// isTrampoline reports whether ret is one of our return trampolines.
func (t *Tracer) isTrampoline(ret uint64) bool {
	return ret != 0 && (ret == t.ret.trampoline || t.inproc != nil && ret == t.inproc.trampoline)
}

// retargetHijacked gives the tracer's hooked frames that kept the
// in-process trampoline as their return address the address their slot
// returns to in the end (slotHomes), for restoreReturns to put back.
func (t *Tracer) retargetHijacked(tid int, home map[uint64]uint64) {
	for _, cs := range t.ret.threadStacks(tid) {
		for i := range cs.frames {
			if f := &cs.frames[i]; f.hijacked && f.ret == t.inproc.trampoline && home[f.sp] != 0 {
				f.ret = home[f.sp]
			}
		}
	}
}

// unhijackInprocIn gives a forked child the return addresses its copy of
// thread tid's stack has hooked in the tracee.
func (t *Tracer) unhijackInprocIn(child *tracee.Child, tid int) {
	if t.inproc != nil {
		t.unhookFrames(child, tid, t.inprocFrames(tid))
	}
}

// unhookFrames puts back in mem, a fork child's, the return addresses of
// frames that thread tid hooked in the tracee.
func (t *Tracer) unhookFrames(mem memory, tid int, frames []ring.ShadowFrame) {
	for _, f := range frames {
		if f.Ret&ring.UnhookedBit == 0 {
			t.swapInproc(mem, tid, f, t.inproc.trampoline, f.Ret)
		}
	}
}

// inprocFrames is tid's in-process shadow stack, every record drained
// first: on arm64 the tracer's frames tell where each function saved its
// return address.
func (t *Tracer) inprocFrames(tid int) []ring.ShadowFrame {
	frames := t.shadowOf(tid)
	if len(frames) > 0 && !returnInSlot {
		t.drainAll()
		frames = t.shadowOf(tid)
	}
	return frames
}

// onInprocUnwinder does for the tracee's shadow stack of a thread held at
// an unwinder's entry what onUnwinder does for ours: give the return
// addresses back before an unwind reads them, and hook the live ones
// again once a catch has landed, dropping the calls it unwound.
func (t *Tracer) onInprocUnwinder(tid int, regs *unix.PtraceRegs, action unwindAction, hit *Hit) {
	frames := t.inprocFrames(tid)
	if len(frames) == 0 {
		return
	}
	tramp := t.inproc.trampoline
	switch action {
	case unwindRestore:
		for i := range frames {
			f := &frames[i]
			if f.Slot > tracee.SP(regs) && f.Ret&ring.UnhookedBit == 0 && t.swapInproc(t.proc, tid, *f, tramp, f.Ret) {
				f.Ret |= ring.UnhookedBit
			}
		}
	case unwindRehook:
		// The calls the exception unwound are at or below the slot of
		// the catching frame's call to __cxa_begin_catch.
		live := frames[:0]
		for _, f := range frames {
			if f.Slot <= tracee.SP(regs) {
				if f.Ret&ring.UnhookedBit == 0 {
					t.swapInproc(t.proc, tid, f, tramp, f.Ret)
				}
				continue
			}
			if ret := f.Ret &^ ring.UnhookedBit; f.Ret != ret && t.swapInproc(t.proc, tid, f, ret, tramp) {
				f.Ret = ret
			}
			live = append(live, f)
		}
		frames = live
		if cs := t.ret.shadow[tid]; cs != nil {
			t.dropDead(cs, tracee.SP(regs), false, hit)
		}
	}
	t.inproc.rings.SetShadow(tid, frames)
}

// onInprocTrap handles a thread at the in-process trampoline's int3: it
// returned through the trampoline, and its shadow stack has no frame for
// the slot. Nowhere to send it.
func (t *Tracer) onInprocTrap(tid int, regs *unix.PtraceRegs) {
	t.life.err = fmt.Errorf("thread %d returned through the in-process trampoline with no frame (sp %#x)", tid, tracee.SP(regs))
	t.passTrap(tid)
}
