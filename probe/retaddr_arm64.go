package probe

import (
	"encoding/binary"

	"golang.org/x/sys/unix"

	"github.com/probedbg/probe/codegen"
	"github.com/probedbg/probe/fetch"
	"github.com/probedbg/probe/ring"
	"github.com/probedbg/probe/singlestep"
	"github.com/probedbg/probe/tracee"
)

// On arm64 a call leaves the return address in x30 (the link register):
// a frame is known by sp at its entry, which is sp again once it has
// returned. The hook replaces x30 at the entry, before the function's
// prologue stores it; with pointer authentication the prologue's paciasp
// signs the trampoline (with sp, the frame), which its autiasp accepts.
// Past plain -pg's bl _mcount the prologue has saved x30 in the frame
// record, signed if the function signs it: the hook there signs the
// trampoline itself, with the same key and sp at the entry (entryView,
// leaveEntryView; in the tracee, codegen's frame hook).

const returnPops = 0

// returnInSlot: a frame's key is its sp, not where its return address
// lives (which the function's CFI tells).
const returnInSlot = false

func (t *Tracer) entryReturn(regs *unix.PtraceRegs) (uint64, bool) {
	return regs.Regs[30], true
}

func (t *Tracer) hookEntryReturn(regs *unix.PtraceRegs, to uint64) bool {
	regs.Regs[30] = to
	return true
}

// unhijack puts a frame's original return address back where the
// function saved its x30, if that still holds the trampoline: the place
// is the function's own choice, which its CFI tells (CFA + offset, the
// CFA being the frame's sp at its entry). A saved trampoline signed by
// paciasp gets the original signed the same way, by thread tid (0: none
// held, and a signed one stays).
func (t *Tracer) unhijack(tid int, f *shadowFrame) bool {
	return t.swapSaved(t.proc, tid, f, t.ret.trampoline, f.ret)
}

// unhijackChild is unhijack in the memory of a fork child of thread tid,
// which has the parent's keys: tid signs for it.
func (t *Tracer) unhijackChild(child memory, tid int, f *shadowFrame) {
	t.swapSaved(child, tid, f, t.ret.trampoline, f.ret)
}

// rehook hooks again a frame unhijack gave its return address back: the
// saved x30 holds the trampoline again (or still).
func (t *Tracer) rehook(tid int, f *shadowFrame) bool {
	if _, w, ok := t.savedReturn(t.proc, f); ok && t.stripPAC(w) == t.ret.trampoline {
		return true
	}
	return t.swapSaved(t.proc, tid, f, f.ret, t.ret.trampoline)
}

// swapSaved replaces from by to in the slot where the function of frame
// f saved its return address, in mem, signed as from was there.
func (t *Tracer) swapSaved(mem memory, tid int, f *shadowFrame, from, to uint64) bool {
	slot, w, ok := t.savedReturn(mem, f)
	if !ok || t.stripPAC(w) != from {
		return false
	}
	m := t.space.ModuleAt(f.site.addr) // (savedReturn found it)
	v, ok := t.signedLike(tid, w, from, to, f.sp, m.ReturnKey(f.site.addr, f.site.sym.Size))
	if !ok || v == w {
		return ok
	}
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], v)
	_, err := mem.WriteAt(b[:], int64(slot))
	return err == nil
}

// savedReturn is the slot where the function of frame f saved its return
// address, and the word there in mem.
func (t *Tracer) savedReturn(mem memory, f *shadowFrame) (slot, w uint64, ok bool) {
	if f.site == nil {
		return 0, 0, false
	}
	m := t.space.ModuleAt(f.site.addr)
	if m == nil {
		return 0, 0, false
	}
	off, ok := m.ReturnSaved(f.site.addr, f.site.sym.Size)
	if !ok {
		return 0, 0, false
	}
	slot = uint64(int64(f.sp) + off)
	var b [8]byte
	if _, err := mem.ReadAt(b[:], int64(slot)); err != nil {
		return 0, 0, false
	}
	return slot, binary.LittleEndian.Uint64(b[:]), true
}

// unhijackLR puts back the original return address of the innermost
// hooked frame of a thread stopped with x30 still the trampoline (in
// the function's prologue or epilogue, or a leaf's body).
func (t *Tracer) unhijackLR(tid int, regs *unix.PtraceRegs, f *shadowFrame) bool {
	return t.swapLR(tid, regs, f.sp, t.ret.trampoline, f.ret)
}

// unhijackSigLRs is unhookSigLRs for the tracer's hooked calls.
func (t *Tracer) unhijackSigLRs(tid int) {
	var calls []hookedCall
	if cs := t.ret.shadow[tid]; cs != nil {
		for _, f := range cs.frames {
			if f.hijacked && !f.unhooked {
				calls = append(calls, hookedCall{f.sp, f.ret})
			}
		}
	}
	t.unhookSigLRs(tid, t.ret.trampoline, calls)
}

// swapLR puts to, signed as from was, in the x30 of thread tid if it
// holds from, for the frame entered at sp.
func (t *Tracer) swapLR(tid int, regs *unix.PtraceRegs, sp, from, to uint64) bool {
	if t.stripPAC(regs.Regs[30]) != from {
		return false
	}
	ret, ok := t.signedLike(tid, regs.Regs[30], from, to, sp, 0) // (x30 as the hook left it: before paciasp)
	if !ok {
		return false
	}
	regs.Regs[30] = ret
	return t.proc.SetRegs(tid, regs) == nil
}

// unhookInprocLR gives thread tid, held, its return address back if its
// x30 is the in-process trampoline: it is in its innermost hooked call,
// the last of frames, before the function saved x30 or after it took it
// back (or in a leaf, which never does), or a stub had hooked the call
// when the thread was taken back to the probe.
func (t *Tracer) unhookInprocLR(tid int, frames []ring.ShadowFrame) {
	if len(frames) == 0 || t.proc.GetRegs(tid, &t.stop.regs) != nil {
		return
	}
	f := frames[len(frames)-1]
	t.swapLR(tid, &t.stop.regs, f.Slot, t.inproc.trampoline, f.Ret&^ring.UnhookedBit)
	var calls []hookedCall
	for _, f := range frames {
		if f.Ret&ring.UnhookedBit == 0 {
			calls = append(calls, hookedCall{f.Slot, f.Ret})
		}
	}
	t.unhookSigLRs(tid, t.inproc.trampoline, calls)
}

// hookedCall is a call whose return a trampoline holds: its frame's key
// (sp at its entry) and the address it returns to.
type hookedCall struct{ key, ret uint64 }

// unhookSigLRs gives back the return addresses that the contexts of
// live signal frames on held thread tid's stack keep in x30 as the
// trampoline: a handler (a profiling timer's) that had interrupted a
// hooked function before its prologue saved x30, or after its epilogue
// loaded it, came back after the detach and returned into the
// trampoline, unmapped: SIGSEGV (TestSignalDetachUnderLoad). A
// context's call is the newest of calls (oldest first) that is not the
// handler's, which ran between the signal frame and the sp inside it,
// if it is live in the context: its key at or above the context's sp.
func (t *Tracer) unhookSigLRs(tid int, trampoline uint64, calls []hookedCall) {
	var regs unix.PtraceRegs
	if len(calls) == 0 || t.proc.GetRegs(tid, &regs) != nil {
		return
	}
	inner := tracee.SP(&regs)
	for _, c := range t.liveSigContexts(tid, &regs, map[uint64]bool{}) {
		sp, lr := tracee.SP(&c.regs), c.regs.Regs[30]
		for i := len(calls) - 1; i >= 0 && t.stripPAC(lr) == trampoline; i-- {
			if k := calls[i].key; k >= inner && k < c.at {
				continue // the handler's
			} else if k >= sp {
				if v, ok := t.signedLike(tid, lr, trampoline, calls[i].ret, k, 0); ok {
					t.writeWord(c.at+8*30, v)
				}
			}
			break
		}
		inner = sp
	}
}

// hookInputs is what a record stub records for its return hook: sp, the
// frame's key, and x30, the return address (recordedCaller).
func hookInputs() fetch.Inputs { return fetch.Inputs{Regs: []int{spOff, 30 * 8}} }

// swapInproc replaces from by to where the function of frame f, hooked
// in the tracee by thread tid, saved its x30, in mem (signed as from
// was). The function is the one the tracer's newest frame at f's key
// entered: the caller has drained the thread's records.
func (t *Tracer) swapInproc(mem memory, tid int, f ring.ShadowFrame, from, to uint64) bool {
	cs := t.ret.shadow[tid]
	if cs == nil {
		return false
	}
	for i := len(cs.frames) - 1; i >= 0; i-- {
		if fr := &cs.frames[i]; fr.sp == f.Slot && !fr.hijacked {
			return t.swapSaved(mem, tid, &shadowFrame{sp: f.Slot, site: fr.site}, from, to)
		}
	}
	return false
}

// setLinkRegister sets x30.
func setLinkRegister(r *unix.PtraceRegs, v uint64) { r.Regs[30] = v }

// signedLike is to as from became w: to itself if w is from unsigned,
// else to signed with the key that signed from (A or B: paciasp or
// pacibsp) and the modifier sp, by thread tid running pacia1716 or
// pacib1716 (hint instructions: nops where there is no pointer
// authentication). key: the word is known to have been signed, with
// that key ('A', 'B'; 0: not known, both are tried), so that w equal to
// from is a signature whose code is 0 (a restore that took it for
// unsigned wrote the return address unsigned, and the function's
// autiasp killed the program: TestPointerAuthReturns in about 1 in 20
// runs), and the other key's signature of from, which can equal w too,
// is not taken for it (1 in 128 with 7 bits of code: the trampoline
// signed with key A in a function of key B's, and the program killed by
// SIGSEGV at its return, in 1 of 2 runs of
// TestPointerAuthPg/fentry-pg-pacb-bigframe, whose ~30 distinct frames
// were each a chance).
func (t *Tracer) signedLike(tid int, w, from, to, sp uint64, key byte) (uint64, bool) {
	if w == from && (key == 0 || t.pacMask == 0) {
		return to, true
	}
	if tid == 0 || !t.signerReady(tid) {
		return 0, false
	}
	signers := []uint64{t.ret.signer, t.ret.signer + 8} // (SignCode: key A's, key B's)
	switch key {
	case 'A':
		signers = signers[:1]
	case 'B':
		signers = signers[1:]
	}
	for _, at := range signers {
		if s, ok := t.sign(tid, at, from, sp); ok && s == w {
			return t.sign(tid, at, to, sp)
		}
	}
	return 0, false
}

// sign runs the signing instruction at at in thread tid on v with
// modifier sp (x17, x16).
func (t *Tracer) sign(tid int, at, v, sp uint64) (uint64, bool) {
	regs, err := t.proc.InjectStep(tid, func(r *unix.PtraceRegs) {
		r.Regs[16], r.Regs[17], r.Pc = sp, v, at
	}, at+4)
	return regs.Regs[17], err == nil
}

// signerReady puts pacia1716 and pacib1716 in a slot, once.
func (t *Tracer) signerReady(tid int) bool {
	if t.ret.signer != 0 {
		return true
	}
	slot, err := t.allocSlot(tid, t.ret.trampoline)
	if err != nil {
		return false
	}
	if t.writeSlots([]slotWrite{{slot, singlestep.SignCode}}) != nil {
		t.freeSlot(slot)
		return false
	}
	t.ret.signer = slot
	return true
}

// linkRegister is x30.
func linkRegister(r *unix.PtraceRegs) uint64 { return r.Regs[30] }

// callerInputs is what a record stub records to name a function's
// caller: x30, the return address, not yet signed by the prologue's
// paciasp when the stub runs.
func callerInputs() fetch.Inputs { return fetch.Inputs{Regs: []int{30 * 8}} }

// recordedCaller is the return address in a record made with
// callerInputs.
func recordedCaller(regs *unix.PtraceRegs, words []uint64) (uint64, bool) {
	return linkRegister(regs), true
}

// routineReturn is where a thread inside the record routine returns to
// in its stub: bl left it in x30.
func (t *Tracer) routineReturn(regs *unix.PtraceRegs) (uint64, bool) {
	return linkRegister(regs), true
}

// unhookChildLR gives fork child child of thread tid, held at its first
// stop, its return address back if its x30 is a trampoline: a hooked
// leaf forked, keeping it there. The innermost hooked frame's it is.
func (t *Tracer) unhookChildLR(child, tid int) {
	var regs unix.PtraceRegs
	if t.proc.GetRegs(child, &regs) != nil {
		return
	}
	var sp, ret uint64
	lr := t.stripPAC(regs.Regs[30])
	switch {
	case lr == 0:
		return
	case lr == t.ret.trampoline:
		cs := t.ret.shadow[tid]
		if cs == nil {
			return
		}
		for i := len(cs.frames) - 1; i >= 0 && ret == 0; i-- {
			if f := cs.frames[i]; f.hijacked {
				sp, ret = f.sp, f.ret
			}
		}
	case t.inproc != nil && lr == t.inproc.trampoline:
		if frames := t.shadowOf(tid); len(frames) > 0 {
			f := frames[len(frames)-1]
			sp, ret = f.Slot, f.Ret&^ring.UnhookedBit
		}
	}
	if ret == 0 {
		return
	}
	if v, ok := t.signedLike(tid, regs.Regs[30], lr, ret, sp, 0); ok {
		regs.Regs[30] = v
		t.proc.SetRegs(child, &regs)
	}
}

// slotHooked reports whether the x30 frame f's function saved still
// holds the trampoline; true too when that cannot be read (not saved
// yet, a leaf): not known to be over.
func (t *Tracer) slotHooked(f *shadowFrame) bool {
	_, w, ok := t.savedReturn(t.proc, f)
	return !ok || t.stripPAC(w) == t.ret.trampoline
}

// entryView is a thread's registers just past plain -pg's call of
// _mcount (site.frame) as they were at the function's entry, as far as
// the frame record tells: sp above bytes over x29, x29 and x30 the words
// the prologue's stp x29, x30 put in the record (x30 stripped of the
// signature of a function that signed it: as it came). The arguments'
// registers are not: _mcount took x0 and may write x1-x18. false: the
// frame cannot be read.
func (t *Tracer) entryView(regs *unix.PtraceRegs, above uint64) (unix.PtraceRegs, bool) {
	v := *regs
	var rec [16]byte
	if _, err := t.proc.ReadAt(rec[:], int64(regs.Regs[29])); err != nil {
		return v, false
	}
	v.Sp = regs.Regs[29] + above
	v.Regs[29] = binary.LittleEndian.Uint64(rec[:])
	v.Regs[30] = t.stripPAC(binary.LittleEndian.Uint64(rec[8:]))
	return v, true
}

// leaveEntryView puts in the frame record of site s the x30 a return
// hook in entryView's view wrote (hookEntryReturn), for thread tid:
// signed as the function signed the one there (paciasp, pacibsp, with
// sp at the entry).
func (t *Tracer) leaveEntryView(tid int, regs, view *unix.PtraceRegs, s *site) {
	before, ok := t.readWord(regs.Regs[29] + 8)
	if !ok || t.stripPAC(before) == view.Regs[30] {
		return
	}
	v, ok := t.signedLike(tid, before, t.stripPAC(before), view.Regs[30], view.Sp, s.frameKey)
	if ok {
		t.writeWord(regs.Regs[29]+8, v)
	}
}

// unhookFrameRecord gives back the return address that a stub past
// -pg's call of _mcount may have hooked in the frame record of the
// function thread tid (regs: x29 the frame) is taken out of, back to the
// stub's site (rewindRecordCode), with sp there stub.FrameAbove bytes
// over x29. Its
// record was never committed, so no frame of the tracer's tells where
// the hook wrote, and restoreInprocReturns cannot put it back: the
// function then returned into the trampoline after the detach (SIGTRAP:
// TestPgDetachUnderLoad, at the third of eight detaches). A trampoline
// the hook signed gets the return address signed the same way.
func (t *Tracer) unhookFrameRecord(tid int, regs *unix.PtraceRegs, stub *codegen.RecordStub) {
	fp, above := regs.Regs[29], stub.FrameAbove
	w, ok := t.readWord(fp + 8)
	if !ok || t.stripPAC(w) != t.inproc.trampoline {
		return
	}
	if ret := t.returnTo(tid, fp+above); ret != 0 {
		if v, ok := t.signedLike(tid, w, t.inproc.trampoline, ret, fp+above, stub.FrameKey); ok {
			t.writeWord(fp+8, v)
		}
	}
}

// mcountKeepsArgs: _mcount takes the return address in x0, and is a
// function that may write x1-x18.
const mcountKeepsArgs = false
