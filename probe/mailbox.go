package probe

import (
	"os"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/probedbg/probe/codegen"
	"github.com/probedbg/probe/internal/fault"
	"github.com/probedbg/probe/singlestep"
	"github.com/probedbg/probe/tracee"
)

// The mailbox (codegen.MailboxRoutine): memory shared with the tracee
// where a thread at a jump-optimised C entry or on the return trampoline
// leaves its registers before it traps. The tracer then serves the hit
// with no ptrace request but the PTRACE_CONT: registers come from the
// slot, and what it has to say (hook the return; where to return) goes
// back there. Each ptrace request costs ~1.5-2.5 us here, so this takes a
// hit from trap + GETREGS + CONT to trap + CONT, and a hooked return from
// trap + GETREGS + SETREGS + CONT to trap + CONT.
//
// A SIGTRAP stop of thread T is a mailbox trap only if T's slot is owned
// by T and names a stub of ours (SlotAt, written just before the int3).
// The one way T can stop with its slot claimed but elsewhere is a signal
// handler run inside the claim, so every signal we let a thread take
// while it holds its slot marks it dirty: its stops take the ordinary
// path, GETREGS, until it holds no slot. A mailbox trap seen there is
// settled into the equivalent ordinary stop (settleMailbox), as is every
// one met by detach and the other slow paths.

// mailState is the mailbox of a process and what uses it.
type mailState struct {
	box   *mailbox            // or nil
	tried bool                // ensureMailbox has run
	stubs map[uint64]*jumpOpt // detours with a mailbox stub, by stub id
	dirty map[int]bool        // threads that took a signal holding their slot
	stops atomic.Int64        // stops served from the mailbox
}

// mailbox is one process's shared page and the code that uses it. A
// forked child shares it: thread ids are unique, so their slots are too.
type mailbox struct {
	addr      uint64 // in the tracee
	mem       []byte // our mapping
	entry     uint64 // the entry routine, once made
	entryTrap uint64
	ret       uint64 // the return routine, once made
	retTrap   uint64
	// Where each routine has its trap and runs with SIGTRAP unblocked
	// for a thread that had it blocked.
	entryLayout, retLayout codegen.RoutineLayout
	retStub                uint64 // the return trampoline's stub
	retID                  uint64 // and its id
}

func (m *mailbox) word(slot uint64, off int) *uint64 {
	return (*uint64)(unsafe.Pointer(&m.mem[slot+uint64(off)]))
}

// slotOf is the offset of tid's slot.
func slotOf(tid int) uint64 {
	return uint64(tid&(codegen.MailboxSlots-1)) * codegen.MailboxSlotSize
}

// slotAt is the offset of the slot at tracee address addr (a thread's
// %rcx in the routine), if it is one.
func (m *mailbox) slotAt(addr uint64) (uint64, bool) {
	off := addr - m.addr
	return off, addr >= m.addr && off < codegen.MailboxSize && off%codegen.MailboxSlotSize == 0
}

// owns reports whether tid holds slot.
func (m *mailbox) owns(slot uint64, tid int) bool {
	return atomic.LoadUint64(m.word(slot, codegen.SlotOwner)) == uint64(tid)
}

// claimed returns the id of the stub whose trap tid stopped at, if its
// slot is claimed by tid and whole.
func (m *mailbox) claimed(tid int) (slot, id uint64, ok bool) {
	slot = slotOf(tid)
	if !m.owns(slot, tid) {
		return 0, 0, false
	}
	id = atomic.LoadUint64(m.word(slot, codegen.SlotAt))
	return slot, id, id != 0
}

// regs copies the registers the thread left in slot into regs; rip is
// its trap's, as PTRACE_GETREGS would show after the int3.
func (m *mailbox) regs(slot uint64, regs *unix.PtraceRegs, trap uint64) {
	*regs = *(*unix.PtraceRegs)(unsafe.Pointer(&m.mem[slot+codegen.SlotRegs]))
	regs.SetPC(trap + singlestep.BreakpointPCAdjust)
	tracee.NoRestart(regs)
}

// trapState is the signal state the thread in slot read just before its
// int3, whose forced SIGTRAP may have changed it (tracee.TrapState).
func (m *mailbox) trapState(slot uint64) tracee.TrapState {
	s := tracee.TrapState{Mask: *m.word(slot, codegen.SlotSigMask)}
	for i := range s.Action {
		s.Action[i] = *m.word(slot, codegen.SlotTrapAction+8*i)
	}
	return s
}

// cpu returns the CPU tid stopped on, as it left it in its slot, if
// it stopped at a mailbox trap (its slot claimed and whole, and no signal
// handler run inside the claim), else -1.
func (ms *mailState) cpu(tid int) int {
	m := ms.box
	if m == nil || ms.dirty[tid] {
		return -1
	}
	slot, _, ok := m.claimed(tid)
	if !ok {
		return -1
	}
	v := atomic.LoadUint64(m.word(slot, codegen.SlotCPU))
	if v == ^uint64(0) {
		return -1 // the kernel has no CPU segment for lsl to read
	}
	return int(v & 0xfff) // below: the NUMA node
}

// reply lets the thread in slot go on with the tracer's answer.
func (m *mailbox) reply(slot, v uint64) {
	atomic.StoreUint64(m.word(slot, codegen.SlotReply), v)
	atomic.StoreUint64(m.word(slot, codegen.SlotAt), 0)
}

// release frees slot for a thread that will not run the rest of the
// routine.
func (m *mailbox) release(slot uint64) {
	atomic.StoreUint64(m.word(slot, codegen.SlotAt), 0)
	atomic.StoreUint64(m.word(slot, codegen.SlotOwner), 0)
}

// ensureMailbox maps the mailbox near near, once, if the process allows
// one: C code (no Go runtime), the fsgsbase instructions, our pid
// namespace (gettid must give the ids wait4 gives us), no seccomp filter
// (gettid must not be refused or kill). nil if not.
func (t *Tracer) ensureMailbox(anchor int, near uint64) *mailbox {
	if t.mail.box != nil || t.mail.tried {
		return t.mail.box
	}
	t.mail.tried = true
	if !mailboxCode || t.tuning.NoBoost || t.tuning.NoOptimize || t.tuning.NoMailbox || anchor == 0 ||
		isGo(t.space.Main()) || !hasFSGSBase() || !t.proc.SamePidNamespace() || t.proc.Seccomp() {
		return nil
	}
	addr, mem, err := t.proc.MapShared(anchor, near, codegen.MailboxSize)
	if err != nil {
		return nil
	}
	t.mail.box = &mailbox{addr: addr, mem: mem}
	t.maps.made = append(t.maps.made, mappedRange{addr, codegen.MailboxSize})
	return t.mail.box
}

// mailboxRoutine places the routine of kind in the XOL area, once, and
// returns its address and its trap; 0 if it cannot.
func (t *Tracer) mailboxRoutine(anchor int, kind codegen.MailboxKind) (at, trap uint64) {
	m := t.mail.box
	if m == nil {
		return 0, 0
	}
	at, trap = m.entry, m.entryTrap
	if kind == codegen.MailboxReturn {
		at, trap = m.ret, m.retTrap
	}
	if at != 0 {
		return at, trap
	}
	r := &codegen.MailboxRoutine{Kind: kind, Box: m.addr, Tramp: t.ret.trampoline}
	base, slots, err := t.allocDetour(anchor, m.addr, r.Size())
	if err != nil {
		return 0, 0
	}
	code, l, err := r.Code(base)
	if err != nil || t.writeSlots([]slotWrite{{base, code}}) != nil {
		t.freeSlots(base, slots)
		return 0, 0
	}
	if kind == codegen.MailboxReturn {
		m.ret, m.retTrap, m.retLayout = base, l.Trap, l
		t.rescuePC(l.Trap+singlestep.BreakpointPCAdjust, 0, codegen.RescueMailboxReturn)
	} else {
		m.entry, m.entryTrap, m.entryLayout = base, l.Trap, l
		t.rescuePC(l.Trap+singlestep.BreakpointPCAdjust, 0, codegen.RescueMailboxEntry)
	}
	return base, l.Trap
}

// mailboxTrap serves a SIGTRAP stop of tid from the mailbox, if it is a
// mailbox trap the fast path can take. Otherwise it returns false and the
// caller reads the registers.
func (t *Tracer) mailboxTrap(tid int, regs *unix.PtraceRegs) bool {
	m := t.mail.box
	slot, id, ok := m.claimed(tid)
	if !ok || t.mail.dirty[tid] || t.step.threads[tid] != nil || t.isForked(tid) {
		return false
	}
	if id == m.retID {
		m.regs(slot, regs, t.ret.trap)
		t.stop.flight.slot = slot + 1
		ret, ok := t.returnFrom(tid, regs)
		if !ok {
			t.settleIn(tid, regs, slot, id)
			t.passTrap(tid)
			return true
		}
		t.mailboxTrapState(tid, slot, false)
		m.reply(slot, ret)
		t.proc.Cont(tid, 0)
		t.mail.stops.Add(1)
		return true
	}
	o := t.mail.stubs[id]
	if o == nil {
		return false
	}
	s := o.site
	if !t.fits(s, o) {
		return false // the ordinary path turns it back into an int3
	}
	m.regs(slot, regs, o.at)
	t.mailboxTrapState(tid, slot, false)
	t.stop.flight.slot = slot + 1
	ret := *m.word(slot, codegen.SlotStack)
	var hookRet, loadedRet uint64
	switch {
	case t.inReturnHook(s, o):
		hookRet = ret
	case o.detour.LoadReturn && t.callerEntry(s):
		loadedRet = ret
	}
	regs.SetPC(s.addr)
	_, hooked := t.serveEntry(tid, regs, s, hookRet, loadedRet)
	swap := uint64(codegen.ReplyKeep)
	if hookRet != 0 && hooked {
		swap = codegen.ReplySwap
		if swapFaultArmed {
			// Past the swap, for the test of a detach that finds a
			// thread there.
			m.reply(slot, swap)
			t.stepOut(tid, func(uint64) bool { return m.owns(slot, tid) })
			fault.Point("swapped")
		}
	}
	m.reply(slot, swap)
	t.proc.Cont(tid, 0)
	t.mail.stops.Add(1)
	return true
}

// settleMailbox puts a thread whose registers were read with GETREGS
// where the ordinary path expects it, if it stopped at a mailbox trap:
// at a detour's int3 (just past it, as if it had trapped there) or on the
// trampoline's. It also lifts the dirty mark of a thread that holds no
// slot.
func (t *Tracer) settleMailbox(tid int, regs *unix.PtraceRegs) {
	m := t.mail.box
	if m == nil {
		return
	}
	if trap := regs.PC() - singlestep.BreakpointPCAdjust; trap != 0 && (trap == m.entryTrap || trap == m.retTrap) {
		// Not yet answered (SlotAt still names its stub): else it has
		// been, and runs on from here with the answer. The slot is its
		// own until it frees it, after the answer.
		if slot, ok := m.slotAt(mailboxSlotReg(regs)); ok && m.owns(slot, tid) {
			if id := atomic.LoadUint64(m.word(slot, codegen.SlotAt)); t.mail.settleable(id) {
				m.regs(slot, regs, trap)
				t.settleIn(tid, regs, slot, id)
			}
		}
	}
	if !m.owns(slotOf(tid), tid) {
		delete(t.mail.dirty, tid)
	}
}

// settleable reports whether id names a stub of ours.
func (ms *mailState) settleable(id uint64) bool {
	return id != 0 && (id == ms.box.retID || ms.stubs[id] != nil)
}

// settleIn moves a thread stopped at a mailbox trap, regs holding what it
// left in slot, to the equivalent ordinary stop of stub id, and frees the
// slot.
func (t *Tracer) settleIn(tid int, regs *unix.PtraceRegs, slot, id uint64) {
	m := t.mail.box
	t.mailboxTrapState(tid, slot, true)
	if id == m.retID {
		regs.SetPC(t.ret.trap + singlestep.BreakpointPCAdjust)
	} else {
		o := t.mail.stubs[id]
		regs.SetPC(o.at + singlestep.BreakpointPCAdjust)
		if o.savesR11() {
			// As the detour's own first two instructions leave it.
			t.writeWord(tracee.SP(regs)-8, scratch(regs))
			setScratch(regs, *m.word(slot, codegen.SlotStack))
		}
	}
	if t.proc.SetRegs(tid, regs) == nil {
		m.release(slot)
	}
}

// inMailboxCode reports whether rip is in a mailbox routine, a stub, or
// on the trampoline's int3 not yet executed: where detach must not leave a
// thread.
func (t *Tracer) inMailboxCode(rip uint64) bool {
	m := t.mail.box
	if m == nil {
		return false
	}
	within := func(at uint64, size int) bool { return at != 0 && rip >= at && rip < at+uint64(size) }
	if within(m.entry, (&codegen.MailboxRoutine{}).Size()) ||
		within(m.ret, (&codegen.MailboxRoutine{Kind: codegen.MailboxReturn}).Size()) ||
		within(m.retStub, (&codegen.MailboxStub{Kind: codegen.MailboxReturn}).Size()) ||
		rip == t.ret.trap && m.retStub != 0 {
		return true
	}
	stubSize := (&codegen.MailboxStub{}).Size()
	for _, o := range t.mail.stubs {
		if within(o.stub, stubSize) {
			return true
		}
	}
	return false
}

// leaveMailbox steps a held thread out of the mailbox's code, for detach:
// a thread that traps in the routine is settled, and one past its trap
// runs on with the answer it was given.
func (t *Tracer) leaveMailbox(tid int) {
	if t.mail.box == nil {
		return
	}
	for steps := 0; steps < 500; steps++ {
		if t.proc.GetRegs(tid, &t.stop.regs) != nil {
			return
		}
		t.settleMailbox(tid, &t.stop.regs)
		if !t.inMailboxCode(t.stop.regs.PC()) {
			if steps > 0 {
				t.clearStepFlag(tid)
			}
			return
		}
		if t.reblockTrap(tid, &t.stop.regs) {
			continue
		}
		if !t.stepOnce(tid) {
			return
		}
	}
}

// clearStepFlag takes the trap flag out of a thread's rflags after we
// stepped it through the stub: a pushfq stepped over saves TF set, and the
// popfq that restores it makes it the thread's own, which would trap once
// we are gone. Programs do not set TF themselves.
func (t *Tracer) clearStepFlag(tid int) {
	if t.proc.GetRegs(tid, &t.stop.regs) == nil && clearTrapFlag(&t.stop.regs) {
		t.proc.SetRegs(tid, &t.stop.regs)
	}
}

// mailboxSignal marks a thread that takes a signal while it holds its
// slot (tracee.Process.Delivering).
func (t *Tracer) mailboxSignal(tid int) {
	if m := t.mail.box; m != nil && m.owns(slotOf(tid), tid) {
		t.mail.dirty[tid] = true
		t.keepTrapMaskForSignal(tid, slotOf(tid))
	}
}

// mailboxThreadGone frees the slot of a thread that exited holding it, so
// that a new thread given its id does not find it claimed.
func (t *Tracer) mailboxThreadGone(tid int) {
	delete(t.mail.dirty, tid)
	delete(t.traps.reblocked, tid)
	if m := t.mail.box; m != nil && m.owns(slotOf(tid), tid) {
		m.release(slotOf(tid))
	}
}

// stepOnce single-steps a held thread; a signal that arrives first is
// kept for later. false if the thread cannot be stepped.
func (t *Tracer) stepOnce(tid int) bool {
	if t.proc.StepKeepingSignals(tid) != nil {
		return false
	}
	ev, err := t.proc.WaitThread(tid)
	if err != nil {
		return false
	}
	switch ev.Kind {
	case tracee.EventTrap, tracee.EventStop:
		// (EventStop: an interrupt that was still owed, before the step.)
		return true
	case tracee.EventSignal:
		t.deferSignal(tid)
		return true
	}
	return false
}

// hasFSGSBase reports whether user code may run rdfsbase (the kernel
// enables it, Linux 5.9+, and says so in AT_HWCAP2).
func hasFSGSBase() bool {
	const atHWCAP2, hwcap2FSGSBase = 26, 1 << 1
	b, err := os.ReadFile("/proc/self/auxv")
	if err != nil {
		return false
	}
	for i := 0; i+16 <= len(b); i += 16 {
		tag := *(*uint64)(unsafe.Pointer(&b[i]))
		if tag == atHWCAP2 {
			return *(*uint64)(unsafe.Pointer(&b[i+8]))&hwcap2FSGSBase != 0
		}
	}
	return false
}
