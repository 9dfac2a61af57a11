package probe

import (
	"encoding/binary"

	"golang.org/x/sys/unix"

	"github.com/probedbg/probe/symbols"
	"github.com/probedbg/probe/tracee"
)

// The function tracer in Go programs never rewrites a return address (the
// runtime walks and copies goroutine stacks): calls are seen at the entry
// probe and at each RET, on a call stack per goroutine. A goroutine's
// stack moves when it grows, so a frame is placed by its distance from the
// stack's top, which a move keeps.

// goStackTop is the position of a goroutine stack's top: a frame's
// position is goStackTop - (stack.hi - sp), smaller for deeper calls, like
// a thread's sp.
const goStackTop = 1 << 62

// goStack returns the call stack of the goroutine a thread stopped in Go
// code is running, and the position of its sp there. In Go code R14 holds
// the goroutine's g, whose first words are its stack bounds; a thread on
// no goroutine stack we recognise (a system stack, assembly that uses R14)
// is followed by thread instead.
func (t *Tracer) goStack(tid int, regs *unix.PtraceRegs) (*callStack, uint64) {
	key, lane, goid, pos, base := t.goroutineOf(tid, regs)
	cs := t.ret.goLane(key, lane, base)
	cs.goroutine = goid
	return cs, pos
}

// goroutineOf says which call stack a thread stopped in Go code is on:
// its key in goStacks, its lane and goroutine id (0 if not known), the
// position of sp there and the stack's base. In Go code R14 holds the
// goroutine's g, whose first words are its stack bounds; a thread on no
// goroutine stack we recognise (a system stack, assembly that uses R14)
// is followed by thread instead.
func (t *Tracer) goroutineOf(tid int, regs *unix.PtraceRegs) (key, lane, goid int64, pos, base uint64) {
	if g := goRegister(regs); g != 0 {
		// One read for the stack bounds and, when its place is known,
		// the goroutine id: a g is reused by later goroutines, an id
		// is not.
		b := t.ret.gbuf[:16]
		if t.ret.goidOff > 0 {
			b = t.ret.gbuf[:t.ret.goidOff+8]
		}
		if _, err := t.proc.ReadAt(b, int64(g)); err == nil {
			lo, hi := binary.LittleEndian.Uint64(b[:8]), binary.LittleEndian.Uint64(b[8:])
			if lo < tracee.SP(regs) && tracee.SP(regs) <= hi && hi-lo <= 1<<30 {
				lane = int64(g)
				if t.ret.goidOff > 0 {
					goid = int64(binary.LittleEndian.Uint64(b[t.ret.goidOff:]))
					lane = goid
				}
				return lane, lane, goid, goStackTop - (hi - tracee.SP(regs)), goStackTop
			}
		}
	}
	return -int64(tid), int64(tid), 0, tracee.SP(regs), 0
}

// Lane says which call stack the hit is on, as the function tracer's
// events have it (FuncEvent.Lane, Goroutine): the thread, or in a Go
// program the goroutine.
func (h *Hit) Lane() (lane, goroutine int64) {
	t := h.tracer
	if t == nil || h.regs == nil || t.ft == nil || t.decoding != nil || !isGo(t.space.Main()) {
		return int64(h.Tid), 0
	}
	_, lane, goroutine, _, _ = t.goroutineOf(h.Tid, h.regs)
	return lane, goroutine
}

// maxGoidOff bounds the read of a g at each Go event.
const maxGoidOff = 512

// findGoid learns where runtime.g keeps the goroutine id, from DWARF.
func (r *returnState) findGoid(m *symbols.Mapped) {
	if off, err := m.StructFieldOffset("runtime.g", "goid"); err == nil && off >= 16 && off <= maxGoidOff {
		r.goidOff = int(off)
	}
}

func (r *returnState) goLane(key, lane int64, base uint64) *callStack {
	cs := r.goStacks[key]
	if cs == nil {
		cs = &callStack{lane: lane}
		cs.max.base = base
		r.goStacks[key] = cs
	}
	return cs
}

// goEnter is the function tracer at a Go function's entry.
func (t *Tracer) goEnter(tid int, regs *unix.PtraceRegs, s *site, hit *Hit) {
	cs, pos := t.goStack(tid, regs)
	if f := cs.top(); f != nil && f.sp == pos && f.site == s {
		return // the same call restarted after its stack grew
	}
	t.dropDead(cs, pos, false, hit)
	f := shadowFrame{sp: pos, site: s, time: hit.Time}
	if o := &t.ft.opts; o.Stack || o.Callers {
		f.ret, _ = t.entryReturn(regs)
	}
	t.traceEnter(cs, &f, s.fn, hit)
	if f.mode == 0 {
		return
	}
	cs.push(f)
	t.noteStack(cs, tid)
}

// goReturn is the function tracer at a RET of a Go function: sp points at
// the return address, as it did at the entry.
func (t *Tracer) goReturn(tid int, regs *unix.PtraceRegs, s *site, hit *Hit) {
	cs, pos := t.goStack(tid, regs)
	t.dropDead(cs, pos, true, hit) // calls a panic unwound
	if f := cs.top(); f != nil && f.sp == pos && f.fn == s.fnRet {
		fr := cs.pop()
		t.returned(cs, &fr, hit)
	}
}
