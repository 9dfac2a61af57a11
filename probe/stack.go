package probe

import (
	"fmt"

	"github.com/probedbg/probe/singlestep"
	"github.com/probedbg/probe/symbols"
	"github.com/probedbg/probe/tracee"
)

// Frame is one entry of a hit's user stack trace.
type Frame struct {
	PC uint64 // the hit's pc for the first frame, then return addresses
	// Text is "sym+0xoff/0xsize [module]", as ftrace's stacktrace
	// trigger prints a frame ("0x..." when no symbol covers PC).
	Text string
}

// maxFrameSize bounds how far one frame may move the stack pointer; a
// larger step means the unwind went wrong (a stale frame pointer).
const maxFrameSize = 1 << 24

// Stack unwinds the hitting thread's user stack, innermost first, at
// most max frames: the call frame information (.eh_frame, .debug_frame)
// says where each caller's return address is, and a function without
// any is walked by its frame pointer. Return addresses the tracer has
// replaced by its trampoline (return probes, function_graph) are shown
// as the original callers. Call it only from a handler.
func (h *Hit) Stack(max int) []Frame {
	frames, _ := h.walk(max)
	return frames
}

// walk is Stack; outermost: the walk ended at a frame the call frame
// information says is the thread's first (_start, a thread's start in
// clone), not cut short.
func (h *Hit) walk(max int) (frames []Frame, outermost bool) {
	t := h.tracer
	if t == nil || h.regs == nil || max <= 0 {
		return nil, false
	}
	pc, sp, bp := h.regs.PC(), tracee.SP(h.regs), tracee.FP(h.regs)
	if h.Return != nil && t.ret.trampoline != 0 && pc-singlestep.BreakpointPCAdjust == t.ret.trap {
		// At the trampoline the function has returned: the stack is
		// the caller's, with the original return address as its pc.
		pc = h.Return.Caller
	}
	cs := t.ret.shadow[h.Tid]
	frames = make([]Frame, 0, min(max, 32))
	caller := false // pc is a return address: look it up at pc-1, in the call
	for len(frames) < max && pc != 0 {
		look := pc
		if caller {
			look = pc - 1
		}
		m := t.space.ModuleAt(look)
		frames = append(frames, Frame{PC: pc, Text: describeFrame(m, pc, look)})
		if m == nil {
			break
		}
		var u unwound
		rule, ok := m.CallerRule(look)
		switch {
		case ok && rule.Outermost:
			return frames, true
		case ok:
			if u, ok = t.applyRule(rule, sp, bp); !ok {
				return frames, false
			}
		default:
			// No CFI: the frame pointer chain, [fp] the caller's fp
			// and [fp+8] the return address (x86-64's rbp, arm64's
			// frame record).
			if bp < sp || bp-sp > maxFrameSize {
				return frames, false
			}
			u = unwound{retSlot: bp + 8, cfa: bp + 16}
			u.frame = u.cfa - returnPops
			w, ok := t.readWord(bp)
			if !ok {
				return frames, false
			}
			u.fp = w
		}
		var ret uint64
		switch {
		case u.retSlot != 0:
			w, ok := t.readWord(u.retSlot)
			if !ok {
				return frames, false
			}
			ret = t.stripPAC(w)
		case len(frames) == 1:
			ret = linkRegister(h.regs) // the hit's function, before it saves it
		default:
			return frames, false
		}
		ret = t.originalReturn(h.Tid, cs, ret, u.frame)
		pc, sp, bp, caller = ret, u.cfa, u.fp, true
	}
	return frames, false
}

// originalReturn is ret, a return address read in thread tid's frame
// whose slot is frame, or where it goes on if it is one of our
// trampolines: the return address that the tracer (cs, its call stack)
// or the tracee hooked there (0 if not known).
func (t *Tracer) originalReturn(tid int, cs *callStack, ret, frame uint64) uint64 {
	switch {
	case ret == t.ret.trampoline && ret != 0:
		return cs.hijackedAt(frame)
	case t.inproc != nil && ret == t.inproc.trampoline && ret != 0:
		return t.returnTo(tid, frame)
	}
	return ret
}

// hijackedAt returns the original return address of the shadow frame
// whose return-address slot is slot, or 0.
func (cs *callStack) hijackedAt(slot uint64) uint64 {
	if cs == nil {
		return 0
	}
	for i := len(cs.frames) - 1; i >= 0; i-- {
		if f := &cs.frames[i]; f.sp == slot && f.hijacked {
			return f.ret
		}
	}
	return 0
}

// describeFrame formats pc as "sym+0xoff/0xsize [module]"; the symbol is
// the one containing look (pc-1 for a return address, which may be just
// past the end of a function ending in a call that does not return).
func describeFrame(m *symbols.Mapped, pc, look uint64) string {
	if m == nil {
		return fmt.Sprintf("0x%x", pc)
	}
	if sym, ok := m.SymbolAt(look - m.Bias); ok {
		return fmt.Sprintf("%s+0x%x/0x%x [%s]", sym.Name, pc-m.Bias-sym.Addr, sym.Size, m.Name)
	}
	return fmt.Sprintf("0x%x [%s]", pc, m.Name)
}
