package probe

import (
	"sync/atomic"

	"golang.org/x/sys/unix"

	"github.com/probedbg/probe/singlestep"
	"github.com/probedbg/probe/tracee"
)

// countInProgress adds the calls of live threads whose returns have not
// come to the root's Stats().CallsInProgress.
func (t *Tracer) countInProgress() {
	n := t.callsOpen(func(tid int) bool { return t.proc.Thread(tid) != nil })
	atomic.AddUint64(&t.top().ret.inProgress, uint64(n))
}

// callsOpen is how many calls the call stacks of the threads that live
// says are alive hold: calls whose returns have not come.
func (t *Tracer) callsOpen(live func(tid int) bool) int {
	n := 0
	for tid := range t.ret.shadow {
		if !live(tid) {
			continue
		}
		for _, cs := range t.ret.threadStacks(tid) {
			n += len(cs.frames)
		}
	}
	return n
}

// detachAll stops every thread, finishes or rewinds what each was doing
// with our probes, puts back every original byte and lets every thread go
// with the signal it is owed. anchor is a thread already held, or 0.
func (t *Tracer) detachAll(anchor int) {
	if t.detached {
		return
	}
	t.detached = true
	t.place.Release() // detach must not wait behind other tasks
	ringing := t.cmds.close()
	held := map[int]int{} // tid -> signal to deliver when let go
	if anchor != 0 && !t.proc.Dying(anchor) {
		// (An anchor killed while held is waited for: its exit is how
		// the process's end, and its status, are seen.)
		held[anchor] = 0
	}
	for _, th := range t.proc.Threads() {
		if _, ok := held[th.Tid]; ok {
			continue
		}
		if th.Stopped && !th.GroupStopped {
			held[th.Tid] = 0
			continue
		}
		t.proc.Interrupt(th.Tid)
	}
	t.holdAll(held)
	// Read before any step: a step's forced SIGTRAP resets SIG_IGN.
	trapAct, trapIgnored := t.trapIgnoredBefore(t.heldThreads(held))
	sigreturns := map[uint64]bool{}
	for tid := range held {
		t.leaveMailbox(tid)
		t.leaveRecordCode(tid)
		t.rewindSignalFrames(tid, sigreturns)
	}
	// Every record a thread has committed is handed on before probe
	// lets go (the caller holds the handlers' lock).
	t.drainAll()
	t.countInProgress()
	t.restoreInprocReturns()
	t.restoreReturns()
	t.disarmExecEntry()
	sites := make([]*site, 0, len(t.sites))
	for _, st := range t.sites {
		sites = append(sites, st)
	}
	t.restoreSites(sites)
	t.lowerAllSemaphores()
	t.putBackRedirects(t.proc)
	if ringing {
		// With the original bytes back, the thread sent to take it
		// cannot trap on a probe first.
		t.swallowDoorbell(held)
	}
	for tid := range held {
		if t.proc.Thread(tid) == nil {
			continue
		}
		if s := t.step.threads[tid]; s != nil {
			// Stopped before its copy ran: back to the original, which
			// is now in place again.
			if t.proc.GetRegs(tid, &t.stop.regs) == nil && t.stop.regs.PC() == s.slot {
				t.stop.regs.SetPC(s.addr)
				t.proc.SetRegs(tid, &t.stop.regs)
			}
		}
		t.leaveRestart(tid)
		t.leaveDetour(tid)
		t.detachFromSlot(tid)
	}
	t.reclaimMappings(held)
	if trapIgnored {
		// Every thread held: none can have a SIGTRAP pending that
		// setting SIG_IGN would discard.
		t.restoreTrapIgnored(trapAct, t.heldThreads(held)...)
	}
	for tid, sig := range held {
		if t.proc.Thread(tid) != nil {
			t.proc.Detach(tid, sig)
		}
	}
	t.step.threads = map[int]*site{}
	t.step.restarting = map[int]*restartState{}
}

// heldThreads lists the held threads of the process (not children sharing
// its memory), those with no signal owed first.
func (t *Tracer) heldThreads(held map[int]int) []int {
	var free, owed []int
	for tid, sig := range held {
		if th := t.proc.Thread(tid); th == nil || th.Forked {
			continue
		}
		if sig == 0 {
			free = append(free, tid)
		} else {
			owed = append(owed, tid)
		}
	}
	return append(free, owed...)
}

// swallowDoorbell takes a doorbell SIGSTOP that no thread has taken yet:
// let go with it pending, the process would stop for good. One held
// thread is let run until it stops to take the signal; it may first
// report a stop it already owed (the answer to our interrupt), so it is
// sent on a few times.
func (t *Tracer) swallowDoorbell(held map[int]int) {
	runner := 0
	for tries := 0; tries < 8 && tracee.SignalPending(t.pid, 0, unix.SIGSTOP); tries++ {
		if !t.canRun(held, runner) {
			runner = 0
			for tid := range held {
				if t.canRun(held, tid) {
					runner = tid
					break
				}
			}
		}
		if runner == 0 || t.proc.Cont(runner, 0) != nil {
			return
		}
		delete(held, runner)
		for !t.allHeld(held) {
			ev, err := t.proc.Wait()
			if err != nil {
				return
			}
			t.collect(ev, held)
		}
	}
}

// canRun reports whether held thread tid may be let run to take the
// doorbell: no signal owed, no step of ours under way, and not in a
// group-stop: Cont would park it, not run it (a stopped process keeps the
// doorbell pending harmlessly: SIGCONT discards it).
func (t *Tracer) canRun(held map[int]int, tid int) bool {
	sig, ok := held[tid]
	th := t.proc.Thread(tid)
	return ok && sig == 0 && t.step.threads[tid] == nil && th != nil && !th.GroupStopped
}

// holdAll waits until every thread is held or gone. A held thread that is
// being killed is waited for instead: its exit, not its stop, is owed,
// and the leader's is how the process's end and its status are seen.
func (t *Tracer) holdAll(held map[int]int) {
	for {
		for !t.allHeld(held) {
			ev, err := t.proc.Wait()
			if err != nil {
				return
			}
			t.collect(ev, held)
		}
		dying := false
		for tid := range held {
			if t.proc.Dying(tid) {
				delete(held, tid)
				dying = true
			}
		}
		if !dying {
			return
		}
	}
}

func (t *Tracer) allHeld(held map[int]int) bool {
	for _, th := range t.proc.Threads() {
		if _, ok := held[th.Tid]; !ok {
			return false
		}
	}
	return true
}

// collect records one stop while detaching: the thread stays stopped, in a
// state that is right once the original bytes are back.
func (t *Tracer) collect(ev tracee.Event, held map[int]int) {
	tid := ev.Tid
	switch ev.Kind {
	case tracee.EventExit:
		delete(held, tid)
		delete(t.step.threads, tid)
		if ev.Forked {
			return
		}
		t.threadGone(tid)
		if tid == t.pid || !t.proc.Alive() {
			t.life.exit = exitStatus(ev.Status)
		}
	case tracee.EventFork:
		held[tid] = 0
		if t.releaseChild(ev) {
			held[ev.NewTid] = 0 // shares our memory: let go with us
		}
	case tracee.EventTrap:
		held[tid] = 0
		if t.proc.GetRegs(tid, &t.stop.regs) != nil {
			return
		}
		t.settleMailbox(tid, &t.stop.regs)
		info, _ := t.proc.Siginfo(tid)
		if s := t.step.threads[tid]; s != nil {
			if info.Code > 0 { // the step completed
				delete(t.step.threads, tid)
				s.insn.Fixup(&t.stop.regs, t.proc, s.slot)
				t.proc.SetRegs(tid, &t.stop.regs)
			} else {
				held[tid] = int(unix.SIGTRAP)
			}
			return
		}
		addr := t.stop.regs.PC() - singlestep.BreakpointPCAdjust
		if st := t.step.restarting[tid]; st != nil && (st.slot == 0 && info.Code != tracee.SIBreakpoint || st.slot != 0 && addr == st.slot+4) {
			// A step through a Go restart sequence done (the copy's
			// brk, or a step in place): leaveRestart moves the thread
			// on and keeps the signal that waited. (Let go with the
			// brk's SIGTRAP, gowork died of it in the arm64 guest,
			// at about 1 in 3 detaches.)
			return
		}
		if addr == t.ret.trap && t.ret.trap != 0 {
			// Returning through the trampoline: restoreReturns sends it
			// on to its caller.
			t.lostHits++
			return
		}
		if addr == t.follow.execEntry && addr != 0 {
			// At a new program's entry: it starts there once the byte
			// is back.
			t.stop.regs.SetPC(addr)
			t.proc.SetRegs(tid, &t.stop.regs)
			return
		}
		if t.sites[addr] != nil || t.jumps.detourSite(addr) != nil || info.Code == tracee.SIBreakpoint && t.isRemovedBreakpoint(addr) {
			// Trapped on a probe too late to report it: the original
			// instruction will run after detach.
			t.rewriteInsn(addr)
			t.stop.regs.SetPC(addr)
			t.proc.SetRegs(tid, &t.stop.regs)
			t.lostHits++
			return
		}
		t.noteTrapInOurCode(tid, addr) // (let go with it, as the loop would pass it)
		held[tid] = int(unix.SIGTRAP)
	case tracee.EventSignal:
		info, _ := t.proc.Siginfo(tid)
		if ev.Sig == int(unix.SIGSTOP) && tracee.SentByUs(&info) || t.fixCopyFault(tid, ev.Sig) {
			held[tid] = 0
			return
		}
		if s := t.step.threads[tid]; s != nil && isFault(ev.Sig, info) {
			delete(t.step.threads, tid)
			if t.proc.GetRegs(tid, &t.stop.regs) == nil {
				t.stop.regs.SetPC(s.addr)
				t.proc.SetRegs(tid, &t.stop.regs)
			}
		}
		held[tid] = ev.Sig
	case tracee.EventSyscall:
		held[tid] = 0
		if t.proc.GetRegs(tid, &t.stop.regs) == nil {
			if entry, err := t.proc.SyscallEntry(tid); err == nil && !entry {
				t.settleSkipped(tid, &t.stop.regs)
			}
		}
	default: // stops of every other kind: held as they are
		if t.trapPending(tid) {
			// Job-control stops are reported before pending signals:
			// let it report the SIGTRAP first, to be handled above.
			t.resume(tid)
			return
		}
		held[tid] = 0
	}
}

// trapPending reports whether tid has a SIGTRAP not yet reported: from
// one of our breakpoints, the end of a step, or the tracee's own.
func (t *Tracer) trapPending(tid int) bool {
	return tracee.SignalPending(t.pid, tid, unix.SIGTRAP)
}

// isRemovedBreakpoint reports whether a breakpoint's trap at addr came
// from one no longer there (ours, put back since): not a breakpoint of
// any kind now, so that a program's own (arm64: a brk of another
// immediate than ours) is its own, not run again for ever.
func (t *Tracer) isRemovedBreakpoint(addr uint64) bool {
	b := make([]byte, len(singlestep.BreakpointInsn))
	_, err := t.proc.ReadAt(b, int64(addr))
	return err == nil && !singlestep.IsBreakpoint(b)
}

// rewriteInsn writes the instruction at addr again, unchanged, before a
// thread that trapped there on a breakpoint no longer there runs it
// again. A CPU that kept the old breakpoint (QEMU's TCG: a translation
// of the word made on one vCPU while another put the original back, run
// until the text there is written again) then drops it; else the thread
// traps there again and again, and at our death the trap goes on to the
// program, our rescue knowing nothing of the place (a killed probe's
// breakpoint: Go's handler threw "SIGTRAP: trace trap").
func (t *Tracer) rewriteInsn(addr uint64) {
	b := make([]byte, len(singlestep.BreakpointInsn))
	if _, err := t.proc.ReadAt(b, int64(addr)); err == nil && !singlestep.IsBreakpoint(b) {
		t.proc.WriteAt(b, int64(addr))
	}
}

// emergencyDetach is detach after our own failure: best effort, never
// panicking again.
func (t *Tracer) emergencyDetach() {
	defer func() { recover() }()
	t.rewindInFlight()
	anchor := 0
	if th := t.proc.AnyStopped(); th != nil {
		anchor = th.Tid
	}
	t.detached = false
	t.detachFamily(anchor)
}

// releaseAll lets the process go before anything was installed.
func (t *Tracer) releaseAll() {
	if t.launched {
		unix.Kill(t.pid, unix.SIGKILL)
	}
	t.proc.Release()
	t.detached = true
}
