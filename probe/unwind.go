package probe

import (
	"golang.org/x/sys/unix"

	"github.com/probedbg/probe/tracee"
)

// An unwinder (a C++ throw, pthread_exit's forced unwind, backtrace())
// reads the return addresses on the stack to find each frame's unwind
// information: where a return was hijacked it would find the trampoline,
// which has none, and terminate the program. So at an unwinder's entry
// the original return addresses go back into the frames above it, and
// when a catch lands, into those still live.

// unwindAction is what an unwinder's entry does to the hijacked returns.
type unwindAction uint8

const (
	unwindRestore unwindAction = iota + 1 // give the originals back
	unwindRehook                          // a catch landed: hijack the live frames again
)

var unwinders = map[string]unwindAction{
	"_Unwind_RaiseException":    unwindRestore,
	"_Unwind_Resume":            unwindRestore,
	"_Unwind_Resume_or_Rethrow": unwindRestore,
	"_Unwind_ForcedUnwind":      unwindRestore,
	"_Unwind_Backtrace":         unwindRestore,
	"__cxa_begin_catch":         unwindRehook,
}

// hookUnwinders puts internal probes on the unwinders of every module
// mapped now (of a stripped library, those it exports: they are
// libgcc_s's and libstdc++'s, and libc's debug file, read for none,
// was a sixth of the function tracer's start). One that cannot be probed is left alone: exceptions through
// hijacked frames would then end the program, as without this.
func (t *Tracer) hookUnwinders(anchor int) {
	for _, m := range t.space.Mapped {
		if isGo(m) {
			continue
		}
		for name, action := range unwinders {
			sym, ok := m.LookupExported(name)
			if !ok || !sym.Func || sym.Size == 0 {
				continue
			}
			r, err := t.inFunction(m, sym, sym.Addr)
			if err != nil {
				continue
			}
			if st, err := t.siteAt(anchor, r); err == nil {
				st.unwind = action
			}
		}
	}
}

// onUnwinder runs at an unwinder's entry on thread tid.
func (t *Tracer) onUnwinder(tid int, regs *unix.PtraceRegs, action unwindAction, hit *Hit) {
	t.onInprocUnwinder(tid, regs, action, hit)
	cs := t.ret.shadow[tid]
	if cs == nil {
		return
	}
	switch action {
	case unwindRestore:
		for i := range cs.frames {
			f := &cs.frames[i]
			if f.hijacked && !f.unhooked && f.sp > tracee.SP(regs) && t.unhijack(tid, f) {
				f.unhooked = true
				cs.unhooked++
			}
		}
	case unwindRehook:
		if cs.unhooked == 0 {
			return
		}
		// The frames the exception unwound are below the catching one;
		// __cxa_begin_catch is called from it, so they are at or below
		// its return-address slot.
		t.dropDead(cs, tracee.SP(regs), false, hit)
		for i := range cs.frames {
			f := &cs.frames[i]
			if !f.unhooked {
				continue
			}
			if t.rehook(tid, f) {
				f.unhooked = false
				cs.unhooked--
			}
		}
	}
}
