package probe

import (
	"fmt"

	"golang.org/x/sys/unix"

	"github.com/probedbg/probe/codegen"
	"github.com/probedbg/probe/internal/fault"
	"github.com/probedbg/probe/singlestep"
	"github.com/probedbg/probe/symbols"
	"github.com/probedbg/probe/tracee"
)

// Return probes, as uretprobes do them: at the function's entry the return
// address (x86-64: at [sp]; arm64: in x30, retaddr_arm64.go) is replaced
// by the address of a trampoline (a breakpoint in the injected page) and
// kept on a per-thread shadow stack; the trampoline
// trap pops it, runs the return handlers and sends the thread on to the
// real return address.
//
// Go programs must never see a rewritten return address (the runtime walks
// and copies goroutine stacks), so there a return probe is a probe on each
// RET instruction of the function instead.

// Return describes the return a return-probe hit reports.
type Return struct {
	Func      string // the function that returned
	Caller    uint64 // where it returned to
	EntryTime int64  // CLOCK_MONOTONIC nanoseconds at entry; 0 if not known (Go)
}

// enter runs at the entry of a function whose return somebody waits for
// (a return probe, the function tracer): the return address at [sp] is
// swapped for the trampoline and the call pushed on the thread's shadow
// stack. In a return-hook detour the return address is what the detour
// loaded into %r11 (hookRet, else 0) and the detour swaps it itself, after
// the int3: enter only says whether to let it (hooked).
func (t *Tracer) enter(tid int, regs *unix.PtraceRegs, s *site, hit *Hit, hookRet uint64) (hooked bool) {
	inHook := hookRet != 0
	ret := hookRet
	if !inHook {
		var ok bool
		if ret, ok = t.entryReturn(regs); !ok {
			return false
		}
	}
	// A tail call jumps in with its caller's hijacked slot at [sp]: that
	// caller is still live and returns along with it.
	tail := ret == t.ret.trampoline
	cs := t.stackForEntry(tid, regs, ret, hit)
	f := shadowFrame{sp: tracee.SP(regs), ret: ret, site: s, time: hit.Time, hijacked: true}
	switch {
	case s.fn != nil && t.raw.on:
		// Its entry goes among the tracee's records, made from this
		// stop, with whether its return was hooked.
		f.fn, f.mode = s.fn, frameRaw
		if home := t.rescueReturn(tid, f.sp, ret); home != ret {
			f.home = home
		}
		at := *regs // (as the thread entered: the hook may change them)
		defer func() { t.rawEntry(tid, &at, s, hit, ret, hooked) }()
	case s.fn != nil:
		t.traceEnter(cs, &f, s.fn, hit)
	}
	if len(s.returns) == 0 && f.mode == 0 {
		return false
	}
	if tail {
		caller := cs.top()
		if caller == nil || caller.sp != tracee.SP(regs) {
			return false // the caller's frame is gone: nobody to return with
		}
		f.ret = caller.ret // a detour writes the trampoline again: harmless
	}
	t.rescueFrame(tid, f.sp, f.ret) // before the slot is ours
	if !tail && !inHook && !t.hookEntryReturn(regs, t.ret.trampoline) {
		return false
	}
	cs.push(f)
	t.noteStack(cs, tid)
	return true
}

// onReturn handles the trampoline trap: the thread has just executed the
// `ret` of a hijacked function, so its frame is sp-returnPops (x86-64:
// the return-address slot it popped; arm64: sp, as at the entry).
func (t *Tracer) onReturn(tid int, regs *unix.PtraceRegs) {
	ret, ok := t.returnFrom(tid, regs)
	if !ok {
		t.passTrap(tid)
		return
	}
	regs.SetPC(ret)
	t.proc.SetRegs(tid, regs)
	t.proc.Cont(tid, 0)
}

// returnFrom pops the frames a thread on the trampoline returns from,
// reporting their returns, and gives the address it returns to. ok is
// false if no frame of ours returns there.
func (t *Tracer) returnFrom(tid int, regs *unix.PtraceRegs) (ret uint64, ok bool) {
	slot := tracee.SP(regs) - returnPops
	hit := t.newHit(tid, regs)
	cs := t.stackForReturn(tid, slot)
	if f := cs.topOrNil(); f != nil && f.sp < slot && slot-f.sp <= 0xffff && t.popsOnReturn(f.site, slot-f.sp) {
		slot = f.sp // it returned with ret $n
	}
	if cs.has(slot) {
		t.dropDead(cs, slot, true, hit)
	}
	// (With no frame at the slot, the running stack may be another
	// stack's calls, not deeper ones of this: nothing is dropped.)
	if cs == nil || cs.top() == nil || cs.top().sp != slot {
		if cs != nil {
			if ret, ok := cs.recalled(slot); ok {
				return ret, true // a second return of a frame gone
			}
		}
		// No frame of ours returns here (a stack switched under us):
		// nowhere to send the thread, which would die of the trap.
		t.life.err = fmt.Errorf("thread %d returned through the trampoline with no shadow frame (sp %#x)", tid, tracee.SP(regs))
		return 0, false
	}
	if t.raw.on && cs.top().mode&frameRaw != 0 {
		t.rawReturn(tid, regs, slot, hit)
	}
	through := t.inproc != nil && t.inproc.rings.ShadowReturns(tid, slot)
	rawTramp := uint64(0)
	if t.raw.on {
		rawTramp = t.inproc.trampoline
	}
	if ret, ok := cs.returnTarget(slot, through, rawTramp); ok {
		t.handling(tid, regs, ret)
	}
	for range cs.returning(slot, through, rawTramp) {
		fr := cs.pop()
		if fr.hijacked {
			t.rescueReturned(tid, fr.sp)
		}
		ret = fr.returnsTo(through)
		t.returned(cs, &fr, hit)
	}
	return ret, true
}

// popsOnReturn reports whether the function entered at s can return with
// `ret $n`. Only asked when a return lands above the top frame.
func (t *Tracer) popsOnReturn(s *site, n uint64) bool {
	m := t.space.ModuleAt(s.addr)
	if m == nil {
		return false
	}
	sym, ok := m.SymbolAt(s.addr - m.Bias)
	if !ok || sym.Size == 0 || sym.Addr+m.Bias != s.addr {
		return false
	}
	code, err := m.ReadCode(sym.Addr, sym.Size)
	return err == nil && singlestep.ReturnsPopping(code, sym.Addr, n)
}

// returned reports a frame's return: its return probes, the function
// tracer.
func (t *Tracer) returned(cs *callStack, f *shadowFrame, hit *Hit) {
	fault.Point("return")
	if f.mode&frameRecorded != 0 {
		t.ft.emit(FuncReturn, f, hit, cs, t.resultFields(f, hit))
	}
	if len(f.site.returns) == 0 {
		return
	}
	hit.Return = &Return{Func: f.site.funcName, Caller: f.ret, EntryTime: f.time}
	hit.Where = t.returnWhere(f.ret, f.site.funcName)
	t.ret.returning = f.vals
	for _, p := range f.site.returns {
		t.fireReturn(p, hit)
	}
	t.ret.returning = nil
}

// returnWhere is kretprobe's "(caller+off/size <- func)", cached per
// caller: return addresses repeat.
func (t *Tracer) returnWhere(caller uint64, fn string) string {
	key := whereKey{caller, fn}
	if w, ok := t.ret.wheres[key]; ok {
		return w
	}
	sp := t.space
	if t.decoding != nil {
		sp = t.decoding.space // (a recording's: its modules' tables)
	}
	w := sp.Describe(caller) + " <- " + fn
	t.ret.wheres[key] = w
	return w
}

// returnState is the returns the tracer hooked and the call stacks it
// keeps.
type returnState struct {
	trampoline uint64               // where hijacked returns come back: its stub, with a mailbox
	trap       uint64               // the trampoline's int3 (without a mailbox, the trampoline)
	signer     uint64               // arm64: a slot with pacia1716, pacib1716 (retaddr_arm64.go), or 0
	shadow     map[int]*callStack   // per thread, for hijacked returns: the stack it runs on
	parked     map[int][]*callStack // per thread, the other stacks it has calls on (stackswitch.go)
	goStacks   map[int64]*callStack // per goroutine, for Go's function tracer
	goidOff    int                  // offset of runtime.g's goid; 0 if unknown
	gbuf       [maxGoidOff + 8]byte
	wheres     map[whereKey]string
	lost       uint64
	// unrecorded counts calls hooked in the tracee lost in a thread
	// whose ring dropped records (their returns most likely were).
	unrecorded uint64
	// inProgress counts the calls entered and not returned when the
	// tracer let the threads go (detachAll): their returns come after.
	inProgress uint64
	forked     map[int][]forkedReturn     // per adopted vfork child
	returning  map[*Probe][]capturedValue // entry values of the frame returning now
}

type whereKey struct {
	caller uint64
	fn     string
}

// onRetInsn fires the return probes of a Go function at one of its RET
// instructions: the return address is where it was at the entry (x86-64:
// at [sp]; arm64: in x30), the results in registers.
func (t *Tracer) onRetInsn(s *site, hit *Hit) {
	caller, ok := t.entryReturn(hit.regs)
	if !ok {
		return
	}
	saved := hit.Where
	for _, p := range s.retInsns {
		hit.Return = &Return{Func: p.funcName, Caller: caller}
		hit.Where = t.returnWhere(caller, p.funcName)
		t.fireReturn(p, hit)
	}
	hit.Return, hit.Where = nil, saved
}

func (t *Tracer) fireReturn(p *Probe, hit *Hit) {
	if !p.enabled.Load() {
		return
	}
	p.hits.Add(1)
	if !t.fetch(p, hit) {
		return
	}
	if p.handler.Pre != nil {
		hit.Probe = p
		p.handler.Pre(hit)
	}
}

// ensureTrampoline gives the tracer its return trampoline: one int3 in an
// XOL slot, behind a mailbox stub when the process has a mailbox.
func (t *Tracer) ensureTrampoline(anchor int, near uint64) error {
	if t.ret.trampoline != 0 {
		return nil
	}
	if t.mailboxTrampoline(anchor, near) {
		t.hookUnwinders(anchor)
		return nil
	}
	slot, err := t.allocSlot(anchor, near)
	if err != nil {
		return err
	}
	t.rescueTrampoline(slot)
	if _, err := t.proc.WriteAt(trampolineTraps(), int64(slot)); err != nil {
		return fmt.Errorf("write return trampoline: %w", err)
	}
	t.ret.trampoline, t.ret.trap = slot, slot
	t.hookUnwinders(anchor)
	return nil
}

// trampolineTraps is the return trampoline's breakpoint, twice: a
// thread the tracer had taken the stop of when it was killed goes on past
// the first with no signal, and traps on the second.
func trampolineTraps() []byte { return padBreakpoint(2 * len(singlestep.BreakpointInsn)) }

// mailboxTrampoline makes the return trampoline a mailbox stub whose
// fallback is an int3 right after it; false if there is no mailbox.
func (t *Tracer) mailboxTrampoline(anchor int, near uint64) bool {
	if t.ensureMailbox(anchor, near) == nil {
		return false
	}
	routine, _ := t.mailboxRoutine(anchor, codegen.MailboxReturn)
	if routine == 0 {
		return false
	}
	stub := &codegen.MailboxStub{Kind: codegen.MailboxReturn, Routine: routine}
	base, slots, err := t.allocDetour(anchor, near, stub.Size()+len(trampolineTraps()))
	if err != nil {
		return false
	}
	stub.Next = base + uint64(stub.Size())
	t.rescueTrampoline(stub.Next)
	code, id, err := stub.Code(base)
	if err != nil || t.writeSlots([]slotWrite{{base, append(code, trampolineTraps()...)}}) != nil {
		t.freeSlots(base, slots)
		return false
	}
	t.ret.trampoline, t.ret.trap = base, stub.Next
	t.mail.box.retStub, t.mail.box.retID = base, id
	return true
}

// restoreReturns puts back every hijacked return address still on a
// stack, for detach, on every stack a thread has calls on. A slot that no
// longer holds the trampoline was overwritten (its frame abandoned) and is
// not touched.
func (t *Tracer) restoreReturns() {
	for tid := range t.ret.shadow {
		for _, s := range t.ret.threadStacks(tid) {
			t.retireStack(s)
		}
		if t.proc.Thread(tid) == nil || t.proc.GetRegs(tid, &t.stop.regs) != nil {
			continue
		}
		sp := tracee.SP(&t.stop.regs)
		if t.stop.regs.PC() == t.ret.trap+singlestep.BreakpointPCAdjust {
			// Stopped on the trampoline itself: its frame has returned.
			if c, i := t.frameAt(tid, sp-returnPops); c != nil {
				t.stop.regs.SetPC(c.frames[i].ret)
				t.proc.SetRegs(tid, &t.stop.regs)
			}
		}
		// Which of its stacks the thread is on now is not known (it may
		// have switched since its last hooked call): a slot that still
		// holds the trampoline is ours wherever it is, and is put back,
		// but for one in the red zone below sp, where a leaf function's
		// data may sit now.
		for _, s := range t.ret.threadStacks(tid) {
			for i := range s.frames {
				if f := &s.frames[i]; f.hijacked && !f.unhooked && (f.sp >= sp || f.sp < sp-128) {
					t.unhijack(tid, f)
				}
			}
		}
		// arm64: a function not past its prologue's save, or past its
		// epilogue's load, has the trampoline in x30.
		if f := t.ret.shadow[tid].topOrNil(); f != nil && f.hijacked && !f.unhooked {
			t.unhijackLR(tid, &t.stop.regs, f)
		}
		t.unhijackSigLRs(tid)
	}
	t.ret.shadow = map[int]*callStack{}
	t.ret.parked = map[int][]*callStack{}
}

// goRetSites finds the RET instructions of a Go function, where its return
// probes go.
func goRetAddrs(code []byte, entry uint64) ([]uint64, error) {
	addrs, _ := singlestep.Boundaries(code, entry)
	var rets []uint64
	for _, a := range addrs {
		in, err := singlestep.Analyze(code[a-entry:], a)
		if err != nil {
			continue
		}
		if in.Mnemonic == "ret" {
			rets = append(rets, a)
		}
	}
	if len(rets) == 0 {
		return nil, fmt.Errorf("no RET instruction found in the function")
	}
	return rets, nil
}

// isGo reports whether a module was built by the Go toolchain.
func isGo(m *symbols.Mapped) bool { return m.BuiltByGo() }
