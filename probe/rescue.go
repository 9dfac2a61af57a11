package probe

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/probedbg/probe/codegen"
	"github.com/probedbg/probe/ring"
	"github.com/probedbg/probe/singlestep"
	"github.com/probedbg/probe/tracee"
)

// The rescue (codegen/rescue.go): a SIGTRAP handler of ours in an
// attached process, which never runs while we live, and the page it
// reads if we are killed: every text patch of ours with its original
// bytes, every pc a thread of ours can trap with and where it goes on,
// every return the tracer has hooked, and which threads we hold. We keep
// the page true at every moment we can die: an entry goes in before what
// it describes is written and out after it is undone, its key word last.
//
// Only for an attached process (a launched one dies with us: EXITKILL)
// that does not ignore SIGTRAP. Our action takes the program's place: a SIGTRAP not ours goes on to
// the program's handler, as it came, with the program's signals blocked
// and its SA_RESTART; where the program has no handler (SIG_DFL,
// SIG_IGN), its action comes back and the signal is raised again.

// rt_sigaction's flags for our handler.
const (
	saSiginfo  = 0x4
	saOnstack  = 0x08000000
	saRestorer = 0x04000000
	saRestart  = 0x10000000

	sigIgn = 1
)

// sigtrapState is the process's SIGTRAP action: ours and the program's.
type sigtrapState struct {
	rescue *rescue      // what a SIGTRAP handler of ours needs if we die, or nil
	ours   *trapHandler // that handler, also in a followed child, which inherits it
	// leftoverAct is the program's SIGTRAP action, for when a killed
	// probe's handler, still its action, goes with its mappings.
	leftoverAct [4]uint64
	// The program's SIGTRAP action, and the threads we blocked SIGTRAP
	// in again while their routine had it unblocked (trapstate.go).
	program   trapAction
	reblocked map[int]bool
}

// trapHandler is our SIGTRAP action, and the program's before it.
type trapHandler struct {
	ours, old [4]uint64
}

// rescue is a process's rescue page and what we know of its entries.
type rescue struct {
	addr uint64
	mem  []byte

	texts, pcs rescueTable[uint64] // by address, by pc
	frames     rescueTable[frameKey]
	// popped are frames whose returns have come, per thread: freed at its
	// next stop (until it resumes, the thread may still be at the trap).
	popped map[int][]frameKey
	// checked: threads whose first stop keepRescue has seen.
	checked   map[int]bool
	nextCheck time.Time
}

type frameKey struct {
	tid  int
	slot uint64
}

// rescueTable is one of the page's arrays: entries by key, free ones.
type rescueTable[K comparable] struct {
	base, size, cap, count int // where, entry size, capacity, the count's word
	n                      int
	at                     map[K]int
	free                   []int
}

func newRescueTable[K comparable](base, size, cap, count int) rescueTable[K] {
	return rescueTable[K]{base: base, size: size, cap: cap, count: count, at: map[K]int{}}
}

func (r *rescue) word(off int) *uint64 { return (*uint64)(unsafe.Pointer(&r.mem[off])) }

// publish writes the entry at off: its key word zeroed first and written
// last, so that the handler never takes a half-written entry for one.
func (r *rescue) publish(off int, key, second, third uint64) {
	atomic.StoreUint64(r.word(off), 0)
	atomic.StoreUint64(r.word(off+8), second)
	atomic.StoreUint64(r.word(off+16), third)
	atomic.StoreUint64(r.word(off), key)
}

// entry returns the offset of key's entry, made if need be; -1 if the
// table is full.
func entry[K comparable](r *rescue, tb *rescueTable[K], key K) int {
	if i, ok := tb.at[key]; ok {
		return tb.base + i*tb.size
	}
	var i int
	switch {
	case len(tb.free) > 0:
		i, tb.free = tb.free[len(tb.free)-1], tb.free[:len(tb.free)-1]
	case tb.n < tb.cap:
		i = tb.n
		tb.n++
		atomic.StoreUint64(r.word(tb.count), uint64(tb.n))
	default:
		return -1
	}
	tb.at[key] = i
	return tb.base + i*tb.size
}

// drop frees key's entry, its key word (at keyOff) zeroed.
func drop[K comparable](r *rescue, tb *rescueTable[K], key K, keyOff int) {
	i, ok := tb.at[key]
	if !ok {
		return
	}
	atomic.StoreUint64(r.word(tb.base+i*tb.size+keyOff), 0)
	delete(tb.at, key)
	tb.free = append(tb.free, i)
}

// setupRescue makes the rescue of an attached process, through the held
// anchor; without one the process is as before (a kill -9 of ours kills
// it where a probe stops threads).
func (t *Tracer) setupRescue() {
	sized, _, err := (&codegen.RescueCode{}).Code(0)
	if err != nil || t.launched || t.anchor == 0 {
		return
	}
	act, err := t.proc.TrapAction(t.anchor)
	if err != nil || act[0] == sigIgn {
		// (An ignored SIGTRAP has its own keeping, trapstate.go, which
		// ours would undo: TestTrapStateAttach.)
		return
	}
	if mask, err := t.proc.Sigmask(t.anchor); err != nil || mask&(1<<(unix.SIGTRAP-1)) != 0 {
		return // the step that sets the action would reset it
	}
	addr, mem, err := t.proc.MapShared(t.anchor, 0, codegen.RescueSize)
	if err != nil {
		return
	}
	t.maps.made = append(t.maps.made, mappedRange{addr, codegen.RescueSize})
	gen := &codegen.RescueCode{Page: addr}
	base, slots, err := t.allocDetour(t.anchor, addr, len(sized))
	if err != nil {
		return
	}
	code, entries, err := gen.Code(base)
	if err != nil || t.writeSlots([]slotWrite{{base, code}}) != nil {
		t.freeSlots(base, slots)
		return
	}
	r := &rescue{addr: addr, mem: mem, popped: map[int][]frameKey{}, checked: map[int]bool{}}
	r.texts = newRescueTable[uint64](codegen.RescueTextAt, codegen.RescueTextSize, codegen.RescueTextCap, codegen.RescueTexts)
	r.pcs = newRescueTable[uint64](codegen.RescuePCAt, codegen.RescuePCSize, codegen.RescuePCCap, codegen.RescuePCs)
	r.frames = newRescueTable[frameKey](codegen.RescueFrameAt, codegen.RescueFrameSize, codegen.RescueFrameCap, codegen.RescueFrames)
	copy(mem[codegen.RescueMagic:], codegen.RescueMagicBytes())
	copy(mem[codegen.RescueBreak:], singlestep.BreakpointInsn)
	copy(mem[codegen.RescuePath:], "/proc/self/mem\x00")
	h := &trapHandler{ours: [4]uint64{base, 0, entries.Restorer, 0}}
	r.follow(h, act)
	if t.proc.SetTrapAction(t.anchor, h.ours) != nil {
		return
	}
	t.traps.rescue, t.traps.ours = r, h
	t.proc.Held = t.rescueHeld
	t.proc.Guard = &tracee.Guard{Syscall: entries.Syscall, Save: r.guard, Clear: r.unguard, Mapping: t.rescueMaking}
	for _, th := range t.proc.Threads() {
		if th.Stopped {
			t.rescueHeld(th.Tid, true)
		}
	}
}

// follow makes act the program's action, the one a SIGTRAP not ours
// goes to, and ours block what it blocks and restart what it restarts.
// SA_ONSTACK: a thread whose stack is nearly gone still has its
// alternate one.
func (r *rescue) follow(h *trapHandler, act [4]uint64) {
	h.old = act
	h.ours[1] = saSiginfo | saRestorer | saOnstack | act[1]&saRestart
	h.ours[3] = act[3]
	for i, w := range act {
		atomic.StoreUint64(r.word(codegen.RescueOldAct+8*i), w)
	}
}

// keepRescue makes our handler the SIGTRAP action again where the
// kernel has reset it: a breakpoint's SIGTRAP in a thread that blocks
// SIGTRAP makes it SIG_DFL (and unblocks SIGTRAP there; jemalloc's
// background thread blocks every signal). Checked at a hit of a
// thread's, its first and then every 100 ms, in /proc: a system call we
// ran each time would be one more moment at which our death leaves a
// thread in our registers. (So an action the program sets in place of
// ours while we are attached stays, and the rescue with it: a gap.)
func (t *Tracer) keepRescue(tid int) {
	r, h := t.traps.rescue, t.traps.ours
	if r == nil {
		return
	}
	now := time.Now()
	if r.checked[tid] && now.Before(r.nextCheck) {
		return
	}
	r.checked[tid], r.nextCheck = true, now.Add(100*time.Millisecond)
	if tracee.TrapCaught(t.pid) || tracee.TrapIgnored(t.pid) {
		return
	}
	t.proc.SetTrapAction(tid, h.ours)
}

// removeRescue gives the program its SIGTRAP action back, through the
// held thread runner, if it is still ours; it reports whether the
// rescue's code and page may go.
func (t *Tracer) removeRescue(runner int) bool {
	h := t.traps.ours
	if h == nil {
		return true
	}
	act, err := t.proc.TrapAction(runner)
	if err != nil {
		return false
	}
	// Not guarded: the trap after the call would meet the program's
	// action (SIG_DFL: the program would die of it).
	guard := t.proc.Guard
	t.proc.Guard = nil
	if act[0] == h.ours[0] && t.proc.SetTrapAction(runner, h.old) != nil {
		t.proc.Guard = guard
		return false
	}
	// A thread held now may be inside our handler, which goes on to the
	// program's after the detach: no thread is ours to let go any more.
	clear(t.traps.rescue.mem[codegen.RescueHeld : codegen.RescueHeld+4*codegen.RescueHeldSlots])
	t.dropRescue()
	return true
}

// dropRescue forgets the rescue: its handler is not the action any more
// (a guarded call's trap would go to the program's).
func (t *Tracer) dropRescue() {
	t.traps.rescue, t.traps.ours = nil, nil
	t.proc.Held, t.proc.Rewind, t.proc.Guard = nil, nil, nil
}

// guard keeps thread tid's registers and signal mask in the page, for
// the handler to put back if the thread traps with pc trap (tracee.Guard).
func (r *rescue) guard(tid int, trap uint64, regs *unix.PtraceRegs, mask uint64) {
	atomic.StoreUint64(r.word(codegen.RescueGuardTid), 0)
	atomic.StoreUint64(r.word(codegen.RescueGuardTrap), trap)
	atomic.StoreUint64(r.word(codegen.RescueGuardMask), mask)
	for i, w := range codegen.GuardWords(regs) {
		atomic.StoreUint64(r.word(codegen.RescueGuardRegs+8*i), w)
	}
	atomic.StoreUint64(r.word(codegen.RescueGuardTid), uint64(tid))
}

// rescueMaking notes in the page the executable mapping being made at
// addr, until its first slot says it is ours (0: none).
func (t *Tracer) rescueMaking(addr, size uint64) {
	if r := t.traps.rescue; r != nil {
		atomic.StoreUint64(r.word(codegen.RescueMaking), 0)
		atomic.StoreUint64(r.word(codegen.RescueMaking+8), size)
		atomic.StoreUint64(r.word(codegen.RescueMaking), addr)
	}
}

// unguard forgets them: the thread has them back.
func (r *rescue) unguard(tid int) {
	atomic.CompareAndSwapUint64(r.word(codegen.RescueGuardTid), uint64(tid), 0)
}

// unhookRescuedReturns gives back the returns a killed probe had hooked
// itself, as its rescue page (one of files) mirrors them, where the slot
// still holds an address in its pages; it returns how many.
func (t *Tracer) unhookRescuedReturns(files [][2]uint64, old []mappedRange) (n int) {
	if !returnInSlot {
		return 0 // (arm64: a frame's key is its sp, not where x30 was saved)
	}
	for _, f := range files {
		if !isRescuePage(t.proc, f) {
			continue
		}
		count, _ := t.readWord(f[0] + codegen.RescueFrames)
		for i := range min(count, codegen.RescueFrameCap) {
			at := f[0] + codegen.RescueFrameAt + i*codegen.RescueFrameSize
			tid, ok1 := t.readWord(at)
			slot, ok2 := t.readWord(at + 8)
			ret, ok3 := t.readWord(at + 16)
			if !ok1 || !ok2 || !ok3 || tid == 0 {
				continue
			}
			if w, ok := t.readWord(slot); ok && inAny(old, w) && t.writeWord(slot, ret) {
				n++
			}
		}
	}
	return n
}

// oldRescue settles the SIGTRAP action a killed probe's handler (in one
// of its mappings old) left, with its rescue pages (among files): where
// a page still lists returns it hooked (arm64, which cannot give them
// back: each function saved its x30 where its CFI says), its handler
// stays, to be the one ours goes on to, and so do the mappings
// (keep); its list of held threads is emptied, the threads gone on (its
// text's, emptyOldTexts). Else the
// program gets back its own action, the first that a page kept and that
// is not a handler of ours. Either way that action is the program's,
// for when the mappings go (t.traps.leftoverAct).
func (t *Tracer) oldRescue(ms *mapsSummary, old []mappedRange) (keep bool) {
	files := ms.files
	act, err := t.proc.TrapAction(t.anchor)
	if err != nil || act[0] == 0 || !inAny(old, act[0]) {
		return false
	}
	var prev [4]uint64
	for _, f := range files {
		if !isRescuePage(t.proc, f) {
			continue
		}
		var kept [4]uint64
		for i := range kept {
			kept[i], _ = t.readWord(f[0] + codegen.RescueOldAct + 8*uint64(i))
		}
		if !inAny(old, kept[0]) {
			prev = kept
		}
		if !returnInSlot && t.hooksLeft(f[0], ms) {
			// Its threads held are ours no more either.
			keep = true
			t.proc.WriteAt(make([]byte, 4*codegen.RescueHeldSlots), int64(f[0]+codegen.RescueHeld))
			t.keepOnlyReturns(f[0])
		}
	}
	t.traps.leftoverAct = prev
	if !keep {
		t.proc.SetTrapAction(t.anchor, prev)
	}
	return keep
}

// emptyOldTexts empties the text lists of killed probes' rescue pages
// (among files), the text being back: each entry's length, which a
// thread inside an old handler's loop reads afresh for every entry, and
// then the count. Such a thread, held now, would else go on writing old
// originals over the breakpoints this attach is about to place (they
// would miss their hits; the program is unharmed). It still may with the
// entry it has read (the race, narrowed to one entry).
func (t *Tracer) emptyOldTexts(files [][2]uint64) {
	for _, f := range files {
		if !isRescuePage(t.proc, f) {
			continue
		}
		count, _ := t.readWord(f[0] + codegen.RescueTexts)
		b := make([]byte, min(count, codegen.RescueTextCap)*codegen.RescueTextSize)
		if _, err := t.proc.ReadAt(b, int64(f[0]+codegen.RescueTextAt)); err != nil {
			continue
		}
		for off := 0; off < len(b); off += codegen.RescueTextSize {
			if binary.LittleEndian.Uint64(b[off+8:]) != 0 {
				t.writeWord(f[0]+codegen.RescueTextAt+uint64(off)+8, 0)
			}
		}
		t.writeWord(f[0]+codegen.RescueTexts, 0)
	}
}

// keepOnlyReturns takes out of the rescue page at page every pc entry but
// its trampoline's: with its text back, a thread trapping at one of its
// old sites met a breakpoint of a later probe's, which that probe's
// rescue serves; sent on there by this one, with no text to put back,
// it would trap there for ever.
func (t *Tracer) keepOnlyReturns(page uint64) {
	count, _ := t.readWord(page + codegen.RescuePCs)
	b := make([]byte, min(count, codegen.RescuePCCap)*codegen.RescuePCSize)
	if _, err := t.proc.ReadAt(b, int64(page+codegen.RescuePCAt)); err != nil {
		return
	}
	for off := 0; off < len(b); off += codegen.RescuePCSize {
		if binary.LittleEndian.Uint64(b[off:]) != 0 && binary.LittleEndian.Uint64(b[off+16:]) != codegen.RescueReturn {
			t.writeWord(page+codegen.RescuePCAt+uint64(off), 0)
		}
	}
}

// hooksLeft reports whether the rescue page at page lists a return not
// yet come home. A frame whose thread is gone, or whose thread's stack
// has come back above it (a longjmp past it), never will: it is taken
// out of the page (else the killed probe's handler and mappings stayed
// for ever, one more set at every kill). The threads are held.
func (t *Tracer) hooksLeft(page uint64, ms *mapsSummary) bool {
	count, _ := t.readWord(page + codegen.RescueFrames)
	left := false
	for i := range min(count, codegen.RescueFrameCap) {
		at := page + codegen.RescueFrameAt + i*codegen.RescueFrameSize
		tid, ok := t.readWord(at)
		if !ok || tid == 0 {
			continue
		}
		if key, ok := t.readWord(at + 8); ok && t.frameGone(int(tid), key, ms) {
			t.writeWord(at, 0)
			continue
		}
		left = true
	}
	return left
}

// frameGone reports whether a return hooked in thread tid, its frame's
// key the sp at the function's entry, can no longer come: the thread is
// gone, or its sp is above the key on the same stack (a thread on
// another stack, a signal handler's, may come back to it).
func (t *Tracer) frameGone(tid int, key uint64, ms *mapsSummary) bool {
	if _, err := os.Stat(fmt.Sprintf("/proc/%d/task/%d", t.pid, tid)); errors.Is(err, os.ErrNotExist) {
		return true
	}
	var regs unix.PtraceRegs
	if t.proc.GetRegs(tid, &regs) != nil {
		return false
	}
	sp := tracee.SP(&regs)
	for _, s := range ms.rwPrivate {
		if sp >= s[0] && sp < s[1] {
			return key >= s[0] && key < s[1] && sp > key
		}
	}
	return false
}

// dropLeftoverRescue gives the program its own SIGTRAP action back where
// the action is a killed probe's handler in its mappings, which are gone
// now, through the held thread runner.
func (t *Tracer) dropLeftoverRescue(runner int, gone []mappedRange) {
	if act, err := t.proc.TrapAction(runner); err == nil && inAny(gone, act[0]) {
		t.proc.SetTrapAction(runner, t.traps.leftoverAct)
	}
}

// isRescuePage reports whether file mapping f is a rescue page.
func isRescuePage(mem memory, f [2]uint64) bool {
	magic := make([]byte, len(codegen.RescueMagicBytes()))
	if f[1]-f[0] != codegen.RescueSize {
		return false
	}
	_, err := mem.ReadAt(magic, int64(f[0]))
	return err == nil && string(magic) == string(codegen.RescueMagicBytes())
}

// rescueHeld marks tid held, or not; a stop also frees the frames it
// returned from.
func (t *Tracer) rescueHeld(tid int, held bool) {
	r := t.traps.rescue
	if r == nil {
		return
	}
	p := r.held(tid)
	if !held {
		atomic.CompareAndSwapUint32(p, uint32(tid), 0)
		return
	}
	atomic.StoreUint32(p, uint32(tid))
	r.dropPopped(tid)
}

// held is tid's word among the held threads.
func (r *rescue) held(tid int) *uint32 {
	return (*uint32)(unsafe.Pointer(&r.mem[codegen.RescueHeld+4*(tid%codegen.RescueHeldSlots)]))
}

// dropPopped frees the frames tid has returned from.
func (r *rescue) dropPopped(tid int) {
	for _, key := range r.popped[tid] {
		drop(r, &r.frames, key, 0)
	}
	delete(r.popped, tid)
}

// rescueThreadGone frees what the page held for a thread that exited.
func (t *Tracer) rescueThreadGone(tid int) {
	if r := t.traps.rescue; r != nil {
		r.dropPopped(tid)
		atomic.CompareAndSwapUint32(r.held(tid), uint32(tid), 0)
	}
}

// rescueText puts in the page, before they are patched, bytes at addr
// and their originals.
func (t *Tracer) rescueText(addr uint64, orig []byte) {
	r := t.traps.rescue
	if r == nil || len(orig) > codegen.RescueTextMax {
		return
	}
	off := entry(r, &r.texts, addr)
	if off < 0 {
		return
	}
	atomic.StoreUint64(r.word(off+8), 0)
	atomic.StoreUint64(r.word(off), addr)
	copy(r.mem[off+16:off+16+codegen.RescueTextMax], orig)
	atomic.StoreUint64(r.word(off+8), uint64(len(orig)))
}

// rescueUntext takes out of the page text put back.
func (t *Tracer) rescueUntext(addr uint64) {
	if r := t.traps.rescue; r != nil {
		drop(r, &r.texts, addr, 8)
	}
}

// rescuePC tells the handler what to do with a thread that traps with pc
// from (codegen.RescueGoOn and the rest).
func (t *Tracer) rescuePC(from, to uint64, kind int) {
	r := t.traps.rescue
	if r == nil || from == 0 {
		return
	}
	off := entry(r, &r.pcs, from)
	if off < 0 {
		return
	}
	r.publish(off, from, to, uint64(kind))
}

// rescueSite puts in the page what a site's breakpoint needs: its text,
// and where a thread trapped on it, or in its copy, goes on.
func (t *Tracer) rescueSite(st *site) {
	if t.traps.rescue == nil {
		return
	}
	t.rescueText(st.addr, st.origBytes())
	for k := 0; k < len(st.orig); k += len(singlestep.BreakpointInsn) {
		// (Every breakpoint of padBreakpoint's.)
		t.rescuePC(st.addr+uint64(k)+singlestep.BreakpointPCAdjust, st.addr, codegen.RescueGoOn)
	}
	if singlestep.BreakpointPCAdjust > 0 {
		// A thread whose stop we took goes on from one past the int3
		// if we die: over a one-byte instruction that is the next, and
		// over a longer one the padding's next int3, until the first
		// thread in our handler has put the text back; then it runs
		// the instruction from its second byte (a rip-relative lea
		// without its REX.W made a 32-bit address: SIGSEGV, one kill
		// in four with two threads through a function that stops).
		// So every such thread is put back on the int3 before we take
		// its stop (tracee/rewind.go), and one we die before taking
		// traps with pc at the int3.
		t.proc.Rewind = t.rewindsTo
		if _, ok := t.traps.rescue.pcs.at[st.addr]; !ok {
			t.rescuePC(st.addr, st.addr, codegen.RescueGoOn)
		}
	}
	if st.slot != 0 {
		// Sent to the copy, past it (the step's end), or on the
		// breakpoint that follows a copy that has no jump back.
		end, next := st.slot+uint64(st.insn.Len), st.addr+uint64(st.insn.Len)
		t.rescuePC(st.slot, st.addr, codegen.RescueGoOn)
		t.rescuePC(end, next, codegen.RescueGoOn)
		t.rescuePC(end+singlestep.BreakpointPCAdjust, next, codegen.RescueGoOn)
	}
}

// rewindsTo reports whether a thread that trapped with pc is one past the
// breakpoint of a site.
func (t *Tracer) rewindsTo(pc uint64) bool {
	return t.sites[pc-singlestep.BreakpointPCAdjust] != nil
}

// rescueTrampoline tells the handler of the trampoline's traps at trap.
func (t *Tracer) rescueTrampoline(trap uint64) {
	for k := range 2 {
		t.rescuePC(trap+uint64(k*len(singlestep.BreakpointInsn))+singlestep.BreakpointPCAdjust, 0, codegen.RescueReturn)
	}
}

// rescueFrame mirrors a return the tracer has hooked: thread tid's
// return address at slot, ret.
func (t *Tracer) rescueFrame(tid int, slot, ret uint64) {
	r := t.traps.rescue
	if r == nil {
		return
	}
	ret = t.rescueReturn(tid, slot, ret)
	off := entry(r, &r.frames, frameKey{tid, slot})
	if off < 0 {
		return
	}
	r.publish(off, uint64(tid), slot, ret)
}

// rescueReturn is where a return hooked at slot goes if we die: ret, but
// for the tracee's trampoline (a call hooked in the tracee tail-called
// the function), the return address of the tracee's own frame at the
// slot. A later tail call hooked in the tracee drops that frame, and we
// send the return home from its record then; without us, the thread
// goes there straight (a frame left in the ring is dropped as dead by
// the next return below it).
func (t *Tracer) rescueReturn(tid int, slot, ret uint64) uint64 {
	if t.inproc == nil || ret != t.inproc.trampoline {
		return ret
	}
	for _, f := range t.shadowOf(tid) {
		if home := f.Ret &^ ring.UnhookedBit; f.Slot == slot && home != t.ret.trampoline && home != t.inproc.trampoline {
			return home
		}
	}
	return ret
}

// rescueReturned notes that a hooked return of tid's at slot has come.
func (t *Tracer) rescueReturned(tid int, slot uint64) {
	if r := t.traps.rescue; r != nil {
		r.popped[tid] = append(r.popped[tid], frameKey{tid, slot})
	}
}
