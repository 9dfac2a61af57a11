package probe

import (
	"cmp"
	"fmt"
	"time"

	"golang.org/x/sys/unix"

	"github.com/probedbg/probe/internal/fault"
	"github.com/probedbg/probe/singlestep"
	"github.com/probedbg/probe/tracee"
)

// loop serves stops until the process is gone or we have detached. A hit
// is followed in one read: Wait -> onTrap -> site -> handlers -> resume.
func (t *Tracer) loop() {
	for !t.detached && t.alive() {
		if b := t.bellTracer(); b != nil && b.allGroupStopped() {
			t.pollWhileStopped(b)
			continue
		}
		ev, err := t.proc.WaitAny()
		if err != nil {
			t.life.err = err
			t.withHandlers(t.emergencyDetach)
			return
		}
		t.withHandlers(func() { t.serveEvent(ev) })
	}
}

func (t *Tracer) dispatch(ev tracee.Event) {
	defer t.reringDoorbell()
	switch ev.Kind {
	case tracee.EventTrap:
		t.stop.time, t.stop.tid, t.stop.cpu = t.now(), ev.Tid, t.mail.cpu(ev.Tid)
		if t.inproc != nil {
			t.stop.stamp = t.inproc.clock.Stamp()
		}
		t.place.Hit(ev.Tid, t.stop.time, t.proc.Slept, t.stop.cpu)
		t.onTrap(ev.Tid)
		t.handled()
		t.stop.time, t.stop.tid, t.stop.stamp = 0, 0, 0
	case tracee.EventSignal:
		t.onSignal(ev.Tid, ev.Sig)
	case tracee.EventGroupStop:
		t.proc.Listen(ev.Tid)
	case tracee.EventSyscall:
		t.onSyscall(ev.Tid)
	case tracee.EventFork:
		t.onFork(ev)
	case tracee.EventExec:
		if !ev.Forked {
			t.onExec(ev)
			return
		}
		// A vfork child leaves our memory: what its parent's thread
		// records from now on is the parent's.
		t.recordVforkDone(ev.Tid)
		if t.follow.on && t.followExec(ev) {
			return
		}
		delete(t.ret.forked, ev.Tid)
		t.proc.Detach(ev.Tid, 0)
	case tracee.EventExit:
		delete(t.step.threads, ev.Tid)
		t.mailboxThreadGone(ev.Tid)
		if ev.Forked {
			delete(t.ret.forked, ev.Tid)
			t.recordVforkDone(ev.Tid)
			return
		}
		if t.inproc != nil {
			// Its returns recorded in the tracee come before its calls
			// left open are found lost.
			t.drainUntil(ev.Tid, t.inproc.clock.Stamp())
		}
		t.threadGone(ev.Tid)
		if !t.recordThreadGone(ev.Tid) {
			delete(t.comms, ev.Tid) // else once its records are handed on
		}
		if ev.Tid == t.pid || !t.proc.Alive() {
			t.life.exit = exitStatus(ev.Status)
		}
	case tracee.EventVforkDone:
		// The parent has not run since its vfork: what its ring got
		// until now was the child's, what comes next is its own (at
		// the child's exec the parent may be running already).
		t.recordVforkParentDone(ev.Tid)
		t.resume(ev.Tid)
	default: // EventStop, EventClone, EventOther
		if ev.Kind == tracee.EventClone && t.inproc != nil {
			// Its hits reach us after it may be gone: its name now.
			t.threadComm(ev.NewTid)
			t.onClone(ev.Tid, ev.NewTid)
		}
		t.resume(ev.Tid)
	}
}

// reringDoorbell rings again a doorbell that a system call we injected
// took: its command is still queued.
func (t *Tracer) reringDoorbell() {
	if t.proc.TookDoorbell() {
		unix.Kill(t.ownBell(), unix.SIGSTOP)
	}
}

// ownBell is where a doorbell our injected call took in t's process is
// rung again: there, for a followed process (its own commands, or the
// root's moved to it), else where the root's rings.
func (t *Tracer) ownBell() int {
	if t.follow.root != nil {
		return t.pid
	}
	return t.bellPid()
}

func exitStatus(ws unix.WaitStatus) ExitStatus {
	es := ExitStatus{Exited: true}
	switch {
	case ws.Exited():
		es.Code = ws.ExitStatus()
	case ws.Signaled():
		es.Signaled, es.Signal = true, ws.Signal()
	}
	return es
}

// onTrap handles a SIGTRAP stop: a probe hit, the end of an out-of-line
// step, or a trap that belongs to the tracee.
func (t *Tracer) onTrap(tid int) {
	regs := &t.stop.regs
	if t.mail.box != nil && t.mailboxTrap(tid, regs) {
		return
	}
	if err := t.proc.GetRegs(tid, regs); err != nil {
		return // the thread died under us
	}
	t.settleMailbox(tid, regs)
	if s := t.step.threads[tid]; s != nil {
		t.onStepDone(tid, s, regs)
		return
	}
	if _, ok := t.step.restarting[tid]; ok {
		t.onRestartStep(tid)
		return
	}
	if t.isForked(tid) {
		t.onForkedTrap(tid, regs)
		return
	}
	addr := regs.PC() - singlestep.BreakpointPCAdjust
	if addr == t.ret.trap && t.ret.trap != 0 {
		t.onReturn(tid, regs)
		return
	}
	if t.inproc != nil && addr == t.inproc.trap && addr != 0 {
		t.onInprocTrap(tid, regs)
		return
	}
	s, via := t.sites[addr], (*jumpOpt)(nil)
	if s == nil {
		if via = t.jumps.detours[addr]; via == nil {
			t.onForeignTrap(tid, regs)
			return
		}
		s = via.site
	}
	// (At a hit of ours: at the program's own SIGTRAP a system call we
	// ran would take the place of its delivery.)
	t.keepRescue(tid)
	t.keepPlain(s)
	var hookRet uint64
	if t.inReturnHook(s, via) {
		hookRet = scratch(regs)
	}
	loadedRet := t.loadedReturn(s, via, regs)
	if via != nil && via.savesR11() && len(s.probes) > 0 {
		// The handlers see the thread's own %r11, which the detour
		// keeps in the red zone while it holds the return address.
		t.restoreR11(regs)
	}
	regs.SetPC(s.addr)
	hit, hooked := t.serveEntry(tid, regs, s, hookRet, loadedRet)
	if len(s.overrides) > 0 && t.override(tid, regs, s, hit) {
		if via != nil && via.savesR11() {
			t.restoreR11(regs) // (a detour taken before the o: probe came)
		}
		t.proc.SetRegs(tid, regs)
		t.proc.Cont(tid, 0)
		return
	}
	if t.resumeOptimized(tid, s, regs, via, hooked) {
		return
	}
	t.runDisplaced(tid, s, regs, hit)
}

// serveEntry does what a hit at site s asks before the thread resumes: the
// entry probes' handlers and the rest (return probes' hook, function
// tracers, captures...). regs are the thread's, rip at s. A return-hook
// detour has loaded the return address (hookRet), and so has a detour
// for the function tracer (loadedRet); else they are 0. hooked: the
// return is hooked, and a return-hook detour must swap it.
func (t *Tracer) serveEntry(tid int, regs *unix.PtraceRegs, s *site, hookRet, loadedRet uint64) (hit *Hit, hooked bool) {
	t.handling(tid, regs, s.addr)
	hit = t.newHit(tid, regs)
	if t.raw.on && len(s.probes) > 0 {
		t.raw.out.Flush() // (the records made at stops before this hit, first)
	}
	for _, p := range s.probes {
		if p.enabled.Load() {
			p.hits.Add(1)
			if t.fetchArgs(p.argsAt(s), hit) && p.handler.Pre != nil {
				fault.Point("entry")
				hit.Probe = p
				hit.Where = cmp.Or(p.shownAt, s.where)
				p.handler.Pre(hit)
			}
		}
	}
	hit.Fields = nil
	if len(s.retInsns) > 0 {
		t.onRetInsn(s, hit)
	}
	if s.fnRet != nil {
		t.goReturn(tid, regs, s, hit)
	}
	if s.unwind != 0 {
		t.onUnwinder(tid, regs, s.unwind, hit)
	}
	// Past plain -pg's call of mcount the tracer and the return probes
	// see the function as at its entry, its return address in its frame.
	entry, seen := regs, true
	if s.frame && (s.fn != nil || len(s.returns) > 0) {
		v, ok := t.entryView(regs, s.frameAbove)
		entry, hit.regs, seen = &v, &v, ok
		if ok {
			defer t.leaveEntryView(tid, regs, entry, s)
		}
	}
	switch {
	case !seen:
	case s.fn != nil && !t.ft.opts.Returns:
		t.traceEntryOnly(entry, s, hit, loadedRet)
	case s.fn != nil && s.fn.isGo:
		t.goEnter(tid, regs, s, hit)
	case len(s.returns) > 0 || s.fn != nil:
		hooked = t.enter(tid, entry, s, hit, hookRet)
	}
	hit.regs = regs
	if len(s.captures) > 0 {
		t.capture(tid, s, hit)
	}
	if s.linker {
		t.onLinkerEvent(tid, regs)
	}
	return hit, hooked
}

// runDisplaced resumes a thread stopped at site s, running the instruction
// the breakpoint displaced: emulated, boosted from its slot, or stepped
// there (post-handlers run after the step).
func (t *Tracer) runDisplaced(tid int, s *site, regs *unix.PtraceRegs, hit *Hit) {
	switch {
	case s.run == runBoost && !s.post:
		regs.SetPC(s.slot)
		t.proc.SetRegs(tid, regs)
		t.proc.Cont(tid, 0)
		return
	case s.run == runEmulate:
		if err := s.insn.Emulate(regs, t.proc); err == nil {
			t.runPost(s, hit)
			t.proc.SetRegs(tid, regs)
			t.proc.Cont(tid, 0)
			return
		}
		// Emulation could not touch the stack: let the copy run and
		// fault as the original would, or, for a branch that has no
		// copy, raise that fault here.
		if s.slot == 0 {
			t.proc.SetRegs(tid, regs)
			t.proc.Cont(tid, int(unix.SIGSEGV))
			return
		}
	}
	regs.SetPC(s.slot)
	t.proc.SetRegs(tid, regs)
	t.step.threads[tid] = s
	t.proc.Step(tid, 0)
}

// newHit fills the one Hit the tracer hands to handlers (a Hit is valid
// only during the handler): one per stop, not an allocation per stop.
func (t *Tracer) newHit(tid int, regs *unix.PtraceRegs) *Hit {
	if t.inproc != nil {
		// What the threads recorded before this stop goes first: events
		// stay in the order they happened.
		stamp := t.stop.stamp
		if stamp == 0 {
			stamp = t.inproc.clock.Stamp()
		}
		t.drainUntil(tid, stamp)
	}
	comm := t.threadComm(tid)
	now := t.stop.time
	if now == 0 {
		now = t.now()
	}
	t.stop.hit = Hit{Pid: t.pid, Tid: tid, Comm: comm, Time: now, CPU: t.cpuOf(tid), regs: regs, Mem: t.proc, tracer: t}
	return &t.stop.hit
}

// threadComm is thread tid's name, read once and kept: a record may be
// handed on after its thread is gone.
func (t *Tracer) threadComm(tid int) string {
	comm, ok := t.comms[tid]
	if !ok {
		comm = tracee.Comm(t.pid, tid)
		t.comms[tid] = comm
	}
	return comm
}

func (t *Tracer) runPost(s *site, hit *Hit) {
	if !s.post || t.isForked(hit.Tid) {
		return
	}
	for _, p := range s.probes {
		if p.enabled.Load() && p.handler.Post != nil {
			hit.Probe = p
			hit.Where = cmp.Or(p.shownAt, s.where)
			p.handler.Post(hit)
		}
	}
}

// onStepDone finishes a displaced instruction: fix rip (and a copied
// call's return address), run post-handlers, resume with any signal that
// arrived during the step.
func (t *Tracer) onStepDone(tid int, s *site, regs *unix.PtraceRegs) {
	if info, err := t.proc.Siginfo(tid); err == nil && info.Code <= 0 {
		// A SIGTRAP sent by someone, not the end of our step: keep it
		// for after the step, which has not run yet.
		t.proc.Defer(tid, info)
		t.proc.Step(tid, 0)
		return
	}
	if regs.PC() == s.slot {
		// A rep-prefixed string instruction stops after each
		// iteration with rip still at its start: one hit per
		// execution, so step on until it is done.
		t.proc.Step(tid, 0)
		return
	}
	delete(t.step.threads, tid)
	s.insn.Fixup(regs, t.proc, s.slot)
	if s.post {
		t.handling(tid, regs, regs.PC())
		t.runPost(s, t.newHit(tid, regs))
	}
	t.proc.SetRegs(tid, regs)
	t.proc.Cont(tid, 0)
}

// onForeignTrap handles a SIGTRAP at no probe: a breakpoint we removed
// while the thread was already trapping on it (run the original
// instruction), or the tracee's own (deliver it).
func (t *Tracer) onForeignTrap(tid int, regs *unix.PtraceRegs) {
	addr := regs.PC() - singlestep.BreakpointPCAdjust
	if addr == t.follow.execEntry && addr != 0 {
		t.onExecEntry(tid, regs)
		return
	}
	if info, err := t.proc.Siginfo(tid); err == nil && info.Code == tracee.SIBreakpoint && t.isRemovedBreakpoint(addr) {
		t.rewriteInsn(addr)
		regs.SetPC(addr)
		t.proc.SetRegs(tid, regs)
		t.proc.Cont(tid, 0)
		return
	}
	t.noteTrapInOurCode(tid, addr)
	t.passTrap(tid)
}

// noteTrapInOurCode makes a trap at addr in our mappings, which nothing
// of ours serves, probe's error: no breakpoint there is the program's,
// and the program goes on with the SIGTRAP, as it would (its death, as
// a bug of ours; the first one is said).
func (t *Tracer) noteTrapInOurCode(tid int, addr uint64) {
	if inAny(t.maps.made, addr) && t.life.err == nil {
		t.life.err = fmt.Errorf("thread %d trapped at %#x, in probe's code, which nothing serves", tid, addr)
	}
}

// onSignal handles a signal-delivery-stop. Signals for the tracee are
// passed on unchanged, except while a displaced instruction is in flight:
// then they wait for the step to finish (as uprobes defers them), unless
// the instruction itself faulted, in which case the fault is delivered at
// the original address.
func (t *Tracer) onSignal(tid, sig int) {
	if t.fixCopyFault(tid, sig) {
		t.proc.Cont(tid, 0)
		return
	}
	if debugFaults && (sig == int(unix.SIGSEGV) || sig == int(unix.SIGBUS) || sig == int(unix.SIGILL)) {
		t.describeFault(tid, sig)
	}
	s := t.step.threads[tid]
	t.leaveRestart(tid) // a step of it faulted: the fault is the program's
	if sig != int(unix.SIGSTOP) && s == nil && t.deferInRestart(tid) {
		return
	}
	if sig != int(unix.SIGSTOP) && s == nil {
		t.leaveSlot(tid, sig)
		t.proc.Cont(tid, sig)
		return
	}
	info, err := t.proc.Siginfo(tid)
	if err != nil {
		t.proc.Cont(tid, sig)
		return
	}
	if sig == int(unix.SIGSTOP) && tracee.SentByUs(&info) {
		t.runRung(tid)
		if !t.detached {
			t.resume(tid)
		}
		return
	}
	if s == nil {
		t.proc.Cont(tid, sig)
		return
	}
	if isFault(sig, info) {
		delete(t.step.threads, tid)
		if t.proc.GetRegs(tid, &t.stop.regs) == nil {
			t.stop.regs.SetPC(s.addr)
			t.proc.SetRegs(tid, &t.stop.regs)
		}
		t.proc.Cont(tid, sig)
		return
	}
	t.proc.Defer(tid, info)
	t.proc.Step(tid, 0)
}

// leaveSlot moves a thread that takes a signal inside a boosted copy back
// to the probed code, so that its handler sees the address the program
// knows: the probed instruction when the copy faulted (re-run, it meets
// the probe again, as the original would fault again), the one after it
// at the jump back. A signal that comes before the copy has run leaves
// the thread in the slot: sent back, it would hit the probe twice.
func (t *Tracer) leaveSlot(tid, sig int) {
	if t.proc.GetRegs(tid, &t.stop.regs) != nil {
		return
	}
	rip := t.stop.regs.PC()
	st := t.slotAt(rip)
	if st == nil {
		return
	}
	switch rip - st.slot {
	case 0:
		info, err := t.proc.Siginfo(tid)
		if err != nil || !isFault(sig, info) {
			return
		}
		t.stop.regs.SetPC(st.addr)
	case uint64(st.insn.Len):
		t.stop.regs.SetPC(st.addr + uint64(st.insn.Len))
	default:
		return
	}
	t.proc.SetRegs(tid, &t.stop.regs)
}

// slotAt returns the site whose out-of-line slot rip is in, or nil.
func (t *Tracer) slotAt(rip uint64) *site {
	inXOL := false
	for _, a := range t.step.xol {
		inXOL = inXOL || a.base <= rip && rip < a.base+a.size
	}
	if !inXOL {
		return nil
	}
	for _, st := range t.sites {
		if st.slot != 0 && rip >= st.slot && rip < st.slot+singlestep.SlotSize {
			return st
		}
	}
	return nil
}

// resume restarts a thread held for commands: a thread in the middle of a
// step goes on stepping.
func (t *Tracer) resume(tid int) {
	if t.step.threads[tid] != nil {
		t.proc.Step(tid, 0)
		return
	}
	t.proc.Cont(tid, 0)
}

func isFault(sig int, info unix.Siginfo) bool {
	switch unix.Signal(sig) {
	case unix.SIGSEGV, unix.SIGBUS, unix.SIGFPE, unix.SIGILL, unix.SIGTRAP:
		return info.Code > 0 && info.Code != tracee.SIBreakpoint
	}
	return false
}

func (t *Tracer) allGroupStopped() bool { return t.proc.AllGroupStopped() }

// bellTracer is the Tracer of the process the doorbell rings at: the
// root's, or once it is gone, the followed one it moved to (moveBell);
// nil if none.
func (t *Tracer) bellTracer() *Tracer {
	if bell := t.bellPid(); bell != t.pid {
		return t.follow.children[bell]
	}
	return t
}

// pollWhileStopped serves the root's commands while every thread of b,
// the process its doorbell rings at, sits in a group-stop: the doorbell
// cannot reach it (SIGCONT will flush a pending SIGSTOP), so commands
// are polled for instead, and run with a thread of b held. (A session
// whose first process had exited waited for a SIGCONT of its stopped
// child, even to say the exit.)
func (t *Tracer) pollWhileStopped(b *Tracer) {
	if ev, ok, err := t.proc.WaitAnyNonBlocking(); err != nil {
		t.life.err = err
		t.withHandlers(t.emergencyDetach)
		return
	} else if ok {
		t.withHandlers(func() { t.serveEvent(ev) })
		return
	}
	select {
	case <-t.cmds.kick:
		tid, err := b.proc.Hold()
		if err != nil {
			return
		}
		// A doorbell rung now stays pending until SIGCONT flushes it, or
		// is swallowed later: either way it is not owed any more.
		t.cmds.answered()
		t.withHandlers(func() { t.runCommands(tid) })
		if !t.detached && t.bellTracer() == b {
			b.proc.Listen(tid)
		}
	case <-time.After(10 * time.Millisecond):
	}
}
