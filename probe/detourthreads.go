package probe

import (
	"maps"
	"slices"

	"golang.org/x/sys/unix"

	"github.com/probedbg/probe/codegen"
	"github.com/probedbg/probe/internal/fault"
	"github.com/probedbg/probe/singlestep"
	"github.com/probedbg/probe/tracee"
)

// Threads and detours: a thread let go from a detour or past its jmp,
// stepped out of one before it is taken away, and a site turned back
// into a breakpoint (unoptimize) while threads run.

// stepOut single-steps a stopped thread out of the ranges about to be
// covered by jmps (inside), as kprobes waits for such a thread to leave:
// the covered instructions are straight-line code, so a few steps do it.
// It returns the thread's rip; ok is false if the thread cannot be
// stepped (gone, or a stop other than the step's and a signal's).
func (t *Tracer) stepOut(tid int, inside func(uint64) bool) (rip uint64, ok bool) {
	for steps := 0; ; steps++ {
		if err := t.proc.GetRegs(tid, &t.stop.regs); err != nil {
			return 0, false
		}
		if !inside(t.stop.regs.PC()) {
			return t.stop.regs.PC(), true
		}
		if steps == 2*codegen.JumpSize || !t.stepOnce(tid) {
			return 0, false
		}
	}
}

// detourSite returns the site whose detour's int3 is at addr, or nil. A
// removed site keeps its detour: a thread trapping there late finds no
// probes and runs on through the copies.
func (j *jumpState) detourSite(addr uint64) *site {
	if o := j.detours[addr]; o != nil {
		return o.site
	}
	return nil
}

// keepPlain turns s back into an int3 if it has a jmp but its needs are
// no longer what the detour was made for (a return probe, post-handler or
// tracer added at its address, or the return probes gone): the ordinary
// path resumes at the displaced instruction's successor, which must then
// be original code, not the jmp's bytes.
func (t *Tracer) keepPlain(s *site) {
	if s.opt != nil && !t.fits(s, s.opt) {
		t.unoptimize([]*site{s})
		s.opt = nil
	}
}

// resumeOptimized lets a thread stopped at a site resume from a detour,
// after the int3 there. Trapped at a detour's int3 (via): without a
// register write when the detour does what is left (a plain one at a plain
// site; a return-hook one whose hijack enter wants, hooked), else at its
// copies. Trapped on the int3 the jmp replaced (a stop taken before the
// jmp was written): at the copies of the site's detour. false: the
// ordinary path must run the displaced instruction.
func (t *Tracer) resumeOptimized(tid int, s *site, regs *unix.PtraceRegs, via *jumpOpt, hooked bool) bool {
	switch {
	case via != nil && t.inReturnHook(s, via) && hooked:
		if swapFaultArmed {
			// Past the swap, for the test of a detach that finds a
			// thread there.
			t.stepOut(tid, func(rip uint64) bool { return rip != via.skip })
			fault.Point("swapped")
		}
		t.proc.Cont(tid, 0)
	case via != nil && via.detour.LoadReturn && t.callerEntry(s):
		t.proc.Cont(tid, 0) // the detour puts %r11 back itself
	case via != nil && (s.plainEntry() || t.inReturnHook(s, via)):
		t.passDetour(tid, regs, via)
	case via == nil && s.opt != nil && t.fits(s, s.opt):
		// enter, if it ran, hijacked through memory; %r11 was never
		// saved.
		regs.SetPC(s.opt.copies)
		t.proc.SetRegs(tid, regs)
		t.proc.Cont(tid, 0)
	default:
		if via != nil && via.savesR11() {
			// Leaving a return-hook detour before it puts %r11
			// back: do it here.
			t.restoreR11(regs)
		}
		return false
	}
	return true
}

// restoreR11 puts into regs the %r11 a return-hook detour saved at
// -8(%rsp) (see codegen.Detour.ReturnHook).
func (t *Tracer) restoreR11(regs *unix.PtraceRegs) {
	if r11, ok := t.readWord(tracee.SP(regs) - 8); ok {
		setScratch(regs, r11)
	}
}

// passDetour resumes a thread trapped at o's int3 through the copies,
// without o's return hook.
func (t *Tracer) passDetour(tid int, regs *unix.PtraceRegs, o *jumpOpt) {
	if o.hook() {
		regs.SetPC(o.skip)
		t.proc.SetRegs(tid, regs)
	}
	t.proc.Cont(tid, 0)
}

// leaveDetour moves a held thread whose rip is inside a detour to the
// equivalent original instruction, once the original bytes are back.
func (t *Tracer) leaveDetour(tid int) {
	if len(t.jumps.detours) == 0 || t.proc.GetRegs(tid, &t.stop.regs) != nil {
		return
	}
	rip := t.stop.regs.PC()
	for _, o := range t.jumps.detours {
		if rip < o.base || rip >= o.base+uint64(o.detour.Size()) {
			continue
		}
		if slot, ok := o.detour.CallSlot(rip, o.base); ok {
			// Between the copy's push of the return address and its
			// jmp through the pointer: as at the entry of the callee.
			if target, ok := t.readWord(slot); ok {
				t.stop.regs.SetPC(target)
				t.proc.SetRegs(tid, &t.stop.regs)
				t.jumps.detourExits.Add(1)
			}
			return
		}
		if orig, savedR11, ok := o.detour.Original(rip, o.base); ok {
			if savedR11 {
				t.restoreR11(&t.stop.regs)
			}
			t.stop.regs.SetPC(orig)
			t.proc.SetRegs(tid, &t.stop.regs)
			t.jumps.detourExits.Add(1)
			if o.hook() && rip >= o.skip {
				// Its return address is swapped already: restoreReturns
				// puts it back.
				t.jumps.swappedExits.Add(1)
			}
		}
		return
	}
}

// unoptimize turns the jmps of sites about to be restored while threads
// run back into int3s first, in text_poke_bp's order: int3 over the jmp
// opcode, then the tail, so that no thread ever fetches a half-written
// jmp. restoreSites then puts back the first byte.
func (t *Tracer) unoptimize(sites []*site) {
	for _, st := range sites {
		if st.opt == nil {
			continue
		}
		brk := len(singlestep.BreakpointInsn)
		t.proc.WriteAt(singlestep.BreakpointInsn, int64(st.addr))
		tail := append(padBreakpoint(len(st.orig)), st.origBytes()[len(st.orig):]...)
		t.proc.WriteAt(tail[brk:], int64(st.addr)+int64(brk))
		// Branches re-aimed into the detour stay so (putBackRedirects).
	}
}

// unoptimizeAround turns back into an int3 the jmp that covers addr, if
// one does: a new site there would be written into the jmp's bytes. So
// too a jmp whose redirected branch is at addr or close after it: the
// new site would run the branch's original bytes out of line.
func (t *Tracer) unoptimizeAround(addr uint64) {
	for _, o := range t.jumps.detours {
		st := o.site
		near := slices.ContainsFunc(o.detour.Redirects, func(r codegen.Redirect) bool { return nearRedirect([]uint64{addr}, r, st.addr) })
		if st.opt == o && (st.addr < addr && addr < st.addr+uint64(o.detour.Covered) || near) {
			t.unoptimize([]*site{st})
			st.opt = nil
		}
	}
}

// copyDetours gives a followed child the parent's detours: its memory is
// a copy, jmps and detours included.
func (c *Tracer) copyDetours(parent *Tracer) {
	for at, o := range parent.jumps.detours {
		cp := *o
		if s := c.sites[o.site.addr]; s != nil && s.opt == o {
			cp.site, s.opt = s, &cp
		}
		c.jumps.detours[at] = &cp
	}
	c.jumps.redirects = maps.Clone(parent.jumps.redirects)
	for id, o := range parent.mail.stubs {
		c.mail.stubs[id] = c.jumps.detours[o.at]
	}
}
