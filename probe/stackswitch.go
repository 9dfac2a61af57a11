package probe

import (
	"golang.org/x/sys/unix"

	"github.com/probedbg/probe/symbols"
	"github.com/probedbg/probe/tracee"
)

// A thread may run on more than one stack: swapcontext coroutines, fibers,
// a handler on sigaltstack. A call stack (callStack) is one stack's chain
// of live calls; t.ret.shadow holds the one the thread runs on, t.ret.parked the
// others. A frame deeper than a return's on the same stack was abandoned
// (longjmp, an exception), but one on another stack is live, waiting for
// the thread to switch back: so a frame is only ever dropped from its own
// stack.
//
// Which stack an entry is on: when the newest frame of the running stack
// is its direct caller (the caller's return-address slot, from the CFI at
// the return address, is that frame's), it is that one, the common case.
// Otherwise the entry's caller chain is unwound (as Hit.Stack does) to the
// first return-address slot that is a live frame's: that frame's stack is
// the entry's, and every frame of ours the unwind passed over is dead. An
// entry with no such frame above it starts a stack of its own.

// maxParked bounds the stacks a thread keeps besides the running one: a
// coroutine never resumed leaves its calls behind for good.
const maxParked = 64

// maxWalk bounds the frames an entry's caller chain is unwound through.
const maxWalk = 256

// stackForEntry returns the call stack that an entry of thread tid with
// registers regs, its return address ret at [sp], is on, made the running
// one, with the frames it shows are dead dropped.
func (t *Tracer) stackForEntry(tid int, regs *unix.PtraceRegs, ret uint64, hit *Hit) *callStack {
	cs := t.ret.threadStack(tid)
	sp := tracee.SP(regs)
	if t.isTrampoline(ret) {
		// A tail call: the caller's slot is [sp] itself.
		if c, i := t.frameAt(tid, sp); c != nil {
			t.ret.runOn(tid, c)
			t.dropAbove(c, i+1, hit)
			return c
		}
		return t.stackAt(tid, cs, sp, hit)
	}
	top := cs.top()
	if top == nil && len(t.ret.parked[tid]) == 0 {
		return cs
	}
	if top != nil && top.sp > sp && t.callerSlot(ret, sp, tracee.FP(regs)) == top.sp {
		return cs // called by the newest frame: nothing to drop
	}
	c, i, end, ok := t.enclosingFrame(tid, ret, sp, tracee.FP(regs))
	if !ok {
		return t.stackAt(tid, cs, sp, hit)
	}
	// The frames of ours the unwind passed over, in [sp, end), are on
	// this stack and not callers of this entry: over, and so is every
	// call made below each of them, and below the caller found.
	if c != nil {
		t.dropAbove(c, i+1, hit)
	}
	for _, s := range t.ret.threadStacks(tid) {
		for j := range s.frames {
			if f := &s.frames[j]; f.sp >= sp && f.sp < end {
				t.dropAbove(s, j, hit)
				break
			}
		}
	}
	if c == nil {
		// No live call above it: a stack of its own, or one whose
		// calls are all over.
		if cs.top() != nil {
			c = &callStack{lane: int64(tid)}
		} else {
			c = cs
		}
	}
	t.ret.runOn(tid, c)
	t.pruneParked(tid, hit)
	return c
}

// stackForReturn returns the call stack of thread tid whose frame has its
// return-address slot at slot, made the running one; the running stack if
// none has.
func (t *Tracer) stackForReturn(tid int, slot uint64) *callStack {
	cs := t.ret.shadow[tid]
	if cs == nil || len(t.ret.parked[tid]) == 0 {
		return cs
	}
	for i := len(cs.frames) - 1; i >= 0; i-- {
		if cs.frames[i].sp == slot {
			return cs
		}
	}
	if c, _ := t.frameAt(tid, slot); c != nil {
		t.ret.runOn(tid, c)
		return c
	}
	return cs
}

// threadStacks lists every call stack of thread tid, the running one first.
func (r *returnState) threadStacks(tid int) []*callStack {
	var out []*callStack
	if cs := r.shadow[tid]; cs != nil {
		out = append(out, cs)
	}
	return append(out, r.parked[tid]...)
}

// frameAt finds the live frame of thread tid whose return-address slot is
// slot: its stack and index, or nil.
func (t *Tracer) frameAt(tid int, slot uint64) (*callStack, int) {
	for _, s := range t.ret.threadStacks(tid) {
		for j := len(s.frames) - 1; j >= 0; j-- {
			if s.frames[j].sp == slot {
				return s, j
			}
		}
	}
	return nil, -1
}

// runOn makes c thread tid's running stack, parking the one it was on.
func (r *returnState) runOn(tid int, c *callStack) {
	cs := r.shadow[tid]
	if cs == c {
		return
	}
	parked := r.parked[tid][:0]
	for _, s := range r.parked[tid] {
		if s != c {
			parked = append(parked, s)
		}
	}
	if cs != nil && cs.top() != nil {
		parked = append(parked, cs)
	}
	r.parked[tid] = parked
	r.shadow[tid] = c
}

// pruneParked drops the oldest parked stacks of tid beyond maxParked, and
// those left empty; their calls are lost.
func (t *Tracer) pruneParked(tid int, hit *Hit) {
	parked := t.ret.parked[tid]
	kept := parked[:0]
	for i, s := range parked {
		if s.top() == nil || len(parked)-i > maxParked {
			t.dropAbove(s, 0, hit)
			continue
		}
		kept = append(kept, s)
	}
	if len(kept) == 0 {
		delete(t.ret.parked, tid)
		return
	}
	t.ret.parked[tid] = kept
}

// stackAt is the stack of an entry at sp whose caller chain is not known:
// cs, the running one, if the frames of cs at or below sp are over (their
// slots written since); else a new one. A frame whose slot still holds
// the trampoline may be a live call of another stack (and swapcontext may
// have copied the trampoline into a saved context, so giving its return
// address back would not do): it is left alone.
func (t *Tracer) stackAt(tid int, cs *callStack, sp uint64, hit *Hit) *callStack {
	if t.dropOver(cs, sp, hit) {
		return cs
	}
	c := &callStack{lane: int64(tid)}
	t.ret.runOn(tid, c)
	t.pruneParked(tid, hit)
	return c
}

// dropOver loses the frames from the top of cs whose slots are at or
// below pos and no longer hold the trampoline: calls over, whose slots
// later calls have written. It stops at one whose slot still holds it,
// and then reports false: that one may be a live call of another stack
// (coroutines' stacks are anywhere in the heap, below sp or above it).
func (t *Tracer) dropOver(cs *callStack, pos uint64, hit *Hit) bool {
	for f := cs.top(); f != nil && f.sp <= pos; f = cs.top() {
		if f.hijacked && !f.unhooked && t.slotHooked(f) {
			return false
		}
		t.lose(cs, hit, false)
	}
	return true
}

// dropAbove loses the frames of s from index i up: calls over although
// their returns were never seen.
func (t *Tracer) dropAbove(s *callStack, i int, hit *Hit) {
	for len(s.frames) > i {
		t.lose(s, hit, true)
	}
}

// callerSlot is the frame of the caller of a function just entered (sp at
// its entry, ret its return address, bp its frame pointer), from the CFI
// at ret: the sp of the caller's entry (returnPops below its CFA; on
// x86-64 the slot of its return address); 0 if unknown.
func (t *Tracer) callerSlot(ret, sp, bp uint64) uint64 {
	u, ok := t.unwindStep(ret, sp+returnPops, bp, true)
	if !ok {
		return 0
	}
	return u.frame
}

// enclosingFrame unwinds the caller chain of an entry (ret at [sp], bp its
// rbp) to the first return-address slot that is a live frame's of thread
// tid: its stack and index (nil if the chain ends first), and end, the
// address up to which the walk went (that slot, or the top of the
// stack). ok is false if the chain could not be followed.
func (t *Tracer) enclosingFrame(tid int, ret, sp, bp uint64) (c *callStack, i int, end uint64, ok bool) {
	pc, sp, caller := ret, sp+returnPops, true
	for n := 0; n < maxWalk; n++ {
		if pc == 0 {
			return nil, -1, sp, true // a zero return address ends the chain
		}
		u, ok := t.unwindStep(pc, sp, bp, caller)
		if !ok {
			return nil, -1, 0, false
		}
		if u.frame == 0 {
			return nil, -1, sp, true // the outermost frame: the top of the stack
		}
		if c, i := t.frameAt(tid, u.frame); c != nil {
			return c, i, u.frame, true
		}
		if u.retSlot == 0 {
			// A caller whose return address would still be in x30:
			// none called it; a context's first function, made by
			// hand (arm64's __startcontext has no CFI of its own).
			return nil, -1, sp, true
		}
		w, ok := t.readWord(u.retSlot)
		if !ok {
			return nil, -1, 0, false
		}
		pc, sp, bp = t.stripPAC(w), u.cfa, u.fp
	}
	return nil, -1, 0, false
}

// unwound is one step up a stack: the caller's frame (the sp of the
// frame's entry, returnPops below the CFA; 0 at the outermost frame), the
// slot that holds the return address (0 while it is in the link register
// of arm64), the caller's sp (the CFA) and its frame pointer.
type unwound struct {
	frame, retSlot, cfa, fp uint64
}

// unwindStep takes one step up a stack from pc (a return address if
// caller), sp and bp by the call frame information. Without a rule for
// pc (no CFI, a signal frame's expressions) it fails: a frame pointer
// could lead past frames unseen, which must not be taken for abandoned.
func (t *Tracer) unwindStep(pc, sp, bp uint64, caller bool) (u unwound, ok bool) {
	look := pc
	if caller {
		look = pc - 1
	}
	rule, found := callerRuleIn(t.space.ModuleAt(look), look)
	if !found && caller {
		// A return address made by hand at a function's first
		// instruction (makecontext's __start_context), not after a
		// call: the first frame of a context, which nothing called.
		// (Its CFI, the CIE's default, would read the word above it,
		// uc_link, as a return address.)
		if _, found = callerRuleIn(t.space.ModuleAt(pc), pc); found {
			return unwound{cfa: sp, fp: bp}, true
		}
	}
	switch {
	case !found:
		return u, false
	case rule.Outermost:
		return unwound{cfa: sp, fp: bp}, true
	}
	return t.applyRule(rule, sp, bp)
}

// applyRule is the caller's frame by a CFI rule, from sp and bp.
func (t *Tracer) applyRule(rule symbols.CallerRule, sp, bp uint64) (u unwound, ok bool) {
	base := sp
	if rule.CFAFromFP {
		base = bp
	}
	u.cfa = uint64(int64(base) + rule.CFAOffset)
	u.frame = u.cfa - returnPops
	if !rule.RetInLR {
		u.retSlot = uint64(int64(u.cfa) + rule.RetOffset)
	}
	u.fp = bp
	if rule.FPSaved {
		w, ok := t.readWord(uint64(int64(u.cfa) + rule.FPOffset))
		if !ok {
			return u, false
		}
		u.fp = w
	}
	if u.cfa < sp+returnPops || u.cfa-sp > maxFrameSize {
		return u, false
	}
	return u, true
}

// callerRuleIn is m.CallerRule(pc), no rule when m is nil.
func callerRuleIn(m *symbols.Mapped, pc uint64) (symbols.CallerRule, bool) {
	if m == nil {
		return symbols.CallerRule{}, false
	}
	return m.CallerRule(pc)
}
