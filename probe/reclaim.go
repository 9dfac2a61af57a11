package probe

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"

	"golang.org/x/sys/unix"

	"github.com/probedbg/probe/tracee"
)

// What a session maps in the tracee (the rings, the mailbox, the
// out-of-line pages) is removed at detach, once nothing there can still
// use it: each attach left ~8.9 GB of address space behind before (one
// more per attach, issue 35). Every original byte and return address is
// back by then, and every held thread has been taken out of our code;
// what could still lead into it is a thread that a signal handler took
// out of a stub: the handler's frame holds the stub's address, to go
// back to. So each held thread's registers are looked at, and its stack,
// from its red zone to the top of the stack's mapping (at most stackScan
// bytes), for signal frames: a word that is the address of the
// rt_sigreturn code a handler returns through, with the interrupted
// context above it. A frame whose pc is in a mapping of ours (arm64: any
// frame, whose layout we do not follow) keeps them all mapped, as
// before, harmless (PROBE_DEBUG_RECLAIM=1 says why). Stale words of a
// handler long returned can only keep them too: address space, never the
// program.

// detachFromSlot moves thread tid, held for the detach, out of a boosted
// slot where it stopped before running the copy (to the original
// instruction, back in place: it runs once) or at the jump back (past
// it): the slot's page is about to go.
func (t *Tracer) detachFromSlot(tid int) {
	if t.proc.GetRegs(tid, &t.stop.regs) != nil {
		return
	}
	if t.outOfSlot(&t.stop.regs) {
		t.proc.SetRegs(tid, &t.stop.regs)
	}
}

// outOfSlot moves regs, of a thread at the start of a boosted slot or at
// its jump back, to the original instruction or past it (detachFromSlot);
// false if they are elsewhere.
func (t *Tracer) outOfSlot(regs *unix.PtraceRegs) bool {
	st := t.slotAt(regs.PC())
	if st == nil || st.run != runBoost {
		return false
	}
	switch regs.PC() - st.slot {
	case 0:
		regs.SetPC(st.addr)
	case uint64(st.insn.Len):
		// (At the jump back only if the copy is the instruction's
		// length: an arm64 copy may be several instructions.)
		if code, err := st.insn.XOL(st.slot); err != nil || len(code) != st.insn.Len {
			return false
		}
		regs.SetPC(st.addr + uint64(st.insn.Len))
	default:
		return false
	}
	return true
}

// mappingState is what is mapped in the tracee by us.
type mappingState struct {
	// made are the tracee's mappings this session made (rings, mailbox,
	// out-of-line pages): detach removes them (reclaimMappings).
	made []mappedRange
	// left are a killed probe's mappings the attach could not remove (a
	// thread was in them), with its memory files (rings): detach tries
	// again.
	left      []mappedRange
	leftFiles [][2]uint64
}

// mappedRange is a mapping of ours in the tracee.
type mappedRange struct{ addr, size uint64 }

// stackScan bounds how much of a thread's stack reclaimMappings reads.
const stackScan = 8 << 20

// reclaimMappings unmaps this session's mappings from the tracee if no
// held thread can still reach them, and those an earlier, killed probe
// left that the attach could not take back yet (a thread was in them).
func (t *Tracer) reclaimMappings(held map[int]int) {
	if len(t.maps.made)+len(t.maps.left) == 0 || !t.proc.Alive() {
		return
	}
	runner := 0
	for _, tid := range t.heldThreads(held) {
		if held[tid] == 0 && t.step.threads[tid] == nil && !t.proc.Dying(tid) {
			runner = tid
			break
		}
	}
	if runner == 0 {
		return
	}
	tids := slices.Collect(maps.Keys(held)) // (vfork children too: they share the memory)
	// While our handler is the action, the system calls we inject are
	// guarded (tracee.Guard): a kill -9 of ours during one leaves the
	// thread right. So all but the rescue's own mappings go first.
	rescue, others := t.rescueMappings()
	if len(others) > 0 && t.unmapUnreached(runner, tids, others) {
		t.maps.made = rescue
	}
	if !t.removeRescue(runner) {
		return // (our SIGTRAP handler, still the action, needs its code)
	}
	if len(t.maps.left) > 0 {
		// (Hooks the killed probe's stubs made after the attach, a
		// thread then inside one, are given back first.)
		if _, hooked := t.unhookLeftoverReturns(t.maps.leftFiles, t.maps.left); !hooked && t.unmapUnreached(runner, tids, t.maps.left) {
			// (Every thread held: none meets the action in between.)
			t.dropLeftoverRescue(runner, t.maps.left)
			t.maps.left, t.maps.leftFiles = nil, nil
		}
	}
	if t.unmapUnreached(runner, tids, t.maps.made) {
		t.maps.made = nil
	}
}

// rescueMappings splits this session's mappings into the rescue's (its
// page, and the pages its handler's code is in) and the others.
func (t *Tracer) rescueMappings() (rescue, others []mappedRange) {
	r, h := t.traps.rescue, t.traps.ours
	for _, m := range t.maps.made {
		if r != nil && (m.contains(r.addr) || m.contains(h.ours[0])) {
			rescue = append(rescue, m)
		} else {
			others = append(others, m)
		}
	}
	return rescue, others
}

// unmapUnreached unmaps ranges, through the held thread runner, if none
// of the held threads tids can reach them; but a live patch's trampoline
// stays as long as the patch. It reports whether it did.
func (t *Tracer) unmapUnreached(runner int, tids []int, ranges []mappedRange) bool {
	ms, err := readMapsSummary(t.pid)
	if err != nil {
		return false
	}
	code := map[uint64]bool{}
	for _, tid := range tids {
		if where, ok := t.reachesMapped(tid, ranges, &ms, code); ok {
			if os.Getenv("PROBE_DEBUG_RECLAIM") != "" {
				fmt.Fprintf(os.Stderr, "probe: pid %d: its pages stay mapped: thread %d %s\n", t.pid, tid, where)
			}
			return false
		}
	}
	_, live, err := readPatches(t.pid, t.proc)
	if err != nil && !errors.Is(err, errNoMarker) {
		return false
	}
	for _, m := range ranges {
		if !m.holdsTrampoline(live) {
			t.proc.Unmap(runner, m.addr, m.size)
		}
	}
	return true
}

// reachesMapped reports whether thread tid is in one of ours (mappings
// of ours), or a signal frame on its stack interrupted it there, and
// where.
func (t *Tracer) reachesMapped(tid int, ours []mappedRange, ms *mapsSummary, code map[uint64]bool) (string, bool) {
	var regs unix.PtraceRegs
	if t.proc.GetRegs(tid, &regs) != nil {
		return "has registers we could not read", true
	}
	// (Only the pc: the other registers hold data, which may be any
	// number, and return addresses are back in place.)
	if pc := regs.PC(); inAny(ours, pc) {
		return fmt.Sprintf("is at %#x", pc), true
	}
	// The live signal frames, by unwinding: on arm64 a leaf handler
	// keeps its return address in x30 and leaves no word on the stack
	// for the scan below to find.
	for _, c := range t.liveSigContexts(tid, &regs, code) {
		if inAny(ours, c.regs.PC()) {
			return fmt.Sprintf("has a live signal frame interrupting %#x", c.regs.PC()), true
		}
	}
	lo, buf, why := t.stackWords(&regs, ms)
	if why != "" {
		return why, true
	}
	pcAt := t.framePC()
	for _, i := range t.sigFrames(buf, ms, code) {
		at := lo + uint64(i)
		if pcAt < 0 {
			return fmt.Sprintf("has a signal frame at %#x", at), true
		}
		if i+pcAt+8 > len(buf) {
			return fmt.Sprintf("has a signal frame at %#x past what we read", at), true
		}
		if pc := binary.LittleEndian.Uint64(buf[i+pcAt:]); inAny(ours, pc) {
			return fmt.Sprintf("has a signal frame at %#x interrupting %#x", at, pc), true
		}
	}
	return "", false
}

// stackWords reads the stack of a thread with registers regs, from its
// red zone (a leaf function's live words) to the top of the stack's
// mapping, at most stackScan bytes: where it starts (8-aligned) and the
// bytes; or why it cannot.
func (t *Tracer) stackWords(regs *unix.PtraceRegs, ms *mapsSummary) (lo uint64, buf []byte, why string) {
	sp := tracee.SP(regs)
	lo = sp - 128
	hi := uint64(0)
	for _, s := range ms.rwPrivate {
		if sp >= s[0] && sp < s[1] {
			lo, hi = max(lo, s[0]), min(s[1], sp+stackScan)
		}
	}
	if hi == 0 {
		return 0, nil, fmt.Sprintf("has its stack (sp %#x) in no mapping", sp)
	}
	if top, ok := t.goStackTop(regs, hi); ok {
		hi = top
	}
	buf = make([]byte, hi-lo&^7)
	if n, err := t.proc.ReadAt(buf, int64(lo&^7)); err != nil || n != len(buf) {
		return 0, nil, fmt.Sprintf("has a stack we could not read at %#x", lo)
	}
	return lo &^ 7, buf, ""
}

// maxGoStack is the most a Go stack can be (the runtime's maxstacksize
// on 64-bit targets).
const maxGoStack = 1 << 30

// goStackTop is, for a thread of a Go program with registers regs, the
// top of the stack its sp is on, by its g's bounds (g.stack, g's first
// field, lo then hi, as the runtime's assembly reads them), if they hold
// sp and lie below end, the top of sp's mapping. A Go program's stacks
// (goroutines', each M's g0 and gsignal) are pieces of the heap's
// mappings: a scan to the mapping's top ran over other threads'
// gsignal stacks, and a stale frame there, of a handler long returned
// that had interrupted one of our stubs, kept our pages in every Go
// program. A signal frame a thread will return through is on the stack
// its handler runs on (gsignal, where the handler's g is gsignal), above
// sp. Not a pure Go program (a cgo program's C threads have anything
// where Go keeps g), a thread whose g does not bound sp (a handler
// before it sets gsignal, a switch of stacks under way), and the scan
// goes to the mapping's top, as before.
func (t *Tracer) goStackTop(regs *unix.PtraceRegs, end uint64) (uint64, bool) {
	if !t.space.Main().PureGo() {
		return 0, false
	}
	g, ok := t.goG(regs)
	if !ok || g == 0 {
		return 0, false
	}
	lo, okLo := t.readWord(g)
	hi, okHi := t.readWord(g + 8)
	if sp := tracee.SP(regs); !okLo || !okHi || sp < lo || sp >= hi || hi > end || hi-lo > maxGoStack {
		return 0, false
	}
	return hi, true
}

// sigFrames returns the offsets in a stack's words (stackWords) of the
// signal frames on it: words that are the address of the rt_sigreturn
// code a handler returns through, the interrupted context above them.
// (Stale words of a handler long returned are found too.)
func (t *Tracer) sigFrames(buf []byte, ms *mapsSummary, code map[uint64]bool) []int {
	var at []int
	for i := 0; i+8 <= len(buf); i += 8 {
		if v := binary.LittleEndian.Uint64(buf[i:]); inRanges(ms.exec, v) && t.isSigreturn(v, code) {
			at = append(at, i)
		}
	}
	return at
}

// rewindSignalFrames does for the contexts that signal frames on held
// thread tid's stack saved what leaveRecordCode does for its registers:
// a handler that interrupted the record code returns out of it. Above
// all the return trampoline: a program's timer signal (a -pg build's
// SIGPROF, every 10 ms of CPU) lands there now and then, and its handler
// came back after the detach into a trampoline whose thread's call
// frames detach had dropped: SIGTRAP at the trampoline's int3, the
// program dead. So is one that interrupted a boosted slot's copy, as
// detachFromSlot moves a held thread (a Go program's SIGURG there kept
// our pages). Only the frames that unwinding the thread's calls finds
// (liveSigContexts) are written: a stale one of a handler long returned,
// its words now in some live frame's locals, must never be.
func (t *Tracer) rewindSignalFrames(tid int, code map[uint64]bool) {
	var regs unix.PtraceRegs
	if t.proc.GetRegs(tid, &regs) != nil {
		return
	}
	for _, c := range t.liveSigContexts(tid, &regs, code) {
		moved := c.regs
		// (Or one that interrupted a boosted slot's copy, as a held
		// thread there is moved: a Go program's SIGURG in a stopping
		// probe's slot kept our pages.)
		record := t.inproc != nil && t.inRecordCode(moved.PC()) && t.rewindRecordCode(tid, &moved)
		if !record && !t.outOfSlot(&moved) {
			continue
		}
		// Only the words that change.
		old := sigframeRegPtrs(&c.regs)
		for k, p := range sigframeRegPtrs(&moved) {
			if *p != *old[k] {
				t.writeWord(c.at+uint64(8*k), *p)
			}
		}
		if record {
			t.jumps.detourExits.Add(1)
		}
	}
}

// maxSigWalk bounds the frames liveSigContexts unwinds.
const maxSigWalk = 512

// sigContext is the context a signal frame saved: its registers, at at
// on the stack in sigframeRegPtrs' order.
type sigContext struct {
	at   uint64
	regs unix.PtraceRegs
}

// liveSigContexts returns the contexts of the signal frames thread tid's
// calls return through, innermost first: unwinding from regs by the call
// frame information, a frame whose return address is the rt_sigreturn
// code is a handler's, its signal frame at a fixed place from its CFA
// (sigContextFromCFA); the walk goes on in the context it interrupted. A
// frame the information does not describe ends the walk.
func (t *Tracer) liveSigContexts(tid int, regs *unix.PtraceRegs, code map[uint64]bool) []sigContext {
	var out []sigContext
	pc, sp, bp, lr := regs.PC(), tracee.SP(regs), tracee.FP(regs), linkRegister(regs)
	first, caller := true, false // first: its return address may be in lr (arm64)
	cs := t.ret.shadow[tid]
	for range maxSigWalk {
		u, ok := t.unwindStep(pc, sp, bp, caller)
		if !ok {
			break
		}
		var ret uint64
		switch {
		case u.retSlot != 0:
			w, ok := t.readWord(u.retSlot)
			if !ok {
				return out
			}
			ret = t.stripPAC(w)
		case first && !returnInSlot:
			ret = lr
		default:
			return out
		}
		if ret = t.originalReturn(tid, cs, ret, u.frame); ret == 0 {
			return out
		}
		if !t.isSigreturn(ret, code) {
			pc, sp, bp, first, caller = ret, u.cfa, u.fp, false, true
			continue
		}
		c := sigContext{at: u.cfa + sigContextFromCFA}
		for k, p := range sigframeRegPtrs(&c.regs) {
			w, ok := t.readWord(c.at + uint64(8*k))
			if !ok {
				return out
			}
			*p = w
		}
		out = append(out, c)
		// (The interrupted pc is no return address: no -1 to look it up.)
		pc, sp, bp, lr, first, caller = c.regs.PC(), tracee.SP(&c.regs), tracee.FP(&c.regs), linkRegister(&c.regs), true, false
	}
	return out
}

func (m mappedRange) contains(v uint64) bool { return v >= m.addr && v < m.addr+m.size }

// holdsTrampoline reports whether a live patch's trampoline is in m.
func (m mappedRange) holdsTrampoline(live []Patch) bool {
	return slices.ContainsFunc(live, func(lp Patch) bool { return m.contains(lp.Tramp) })
}

// inAny reports whether v is in one of ranges.
func inAny(ranges []mappedRange, v uint64) bool {
	return slices.ContainsFunc(ranges, func(m mappedRange) bool { return m.contains(v) })
}

// isSigreturn reports whether v is the address of rt_sigreturn code,
// which a signal handler returns through (cached in code).
func (t *Tracer) isSigreturn(v uint64, code map[uint64]bool) bool {
	if is, ok := code[v]; ok {
		return is
	}
	is := false
	b := make([]byte, len(sigreturnCode[0]))
	if n, _ := t.proc.ReadAt(b, int64(v)); n == len(b) {
		for _, c := range sigreturnCode {
			is = is || bytes.HasPrefix(b, c)
		}
	}
	code[v] = is
	return is
}
