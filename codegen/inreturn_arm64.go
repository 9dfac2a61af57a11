package codegen

import "github.com/probedbg/probe/ring"

// In-process return hooks on arm64: inreturn_amd64.go's design with the
// link register. A call's frame is known by sp at its entry (its key, in
// a frame's first word), which is sp again once it has returned. The
// hook routine, called by a stub at the entry, replaces the thread's x30
// (in the stub's save area) with the trampoline before the function's
// prologue stores it: where the prologue signs it (paciasp), it signs
// the trampoline with the frame's sp, and the epilogue's autiasp accepts
// it. The original, unsigned at the entry, goes on the shadow stack.
//
// A frame whose key is at or below an entry's sp is dead (a longjmp went
// past it) and is dropped, as on x86-64; but where the function saved
// the trampoline is its CFI's to tell, so the tracee cannot give a
// dropped frame its return address back. Should one return after all (a
// frame dropped from under a handler on an alternate stack above the
// thread's), the trampoline finds no frame and stops at its brk, every
// register as the function returned, for the tracer to send it on.
//
// Neither writes NZCV: every test is a cbz, cbnz or tbnz.

// topFrame appends, for the stack top word in x15 and the ring in x12:
// in x14 the frame past the top (the top frame at x14 + ring.ShadowOff - 16).
func (a *a64) topFrame() {
	a.andLow(x14, x15, 32) // the depth
	a.addShifted(x14, x12, x14, 4)
}

// casTop appends the store of x9 as the stack's top word if it is still
// x15 (ldxr/stxr: a signal handler of the thread's that ran in between
// makes it fail), then a branch back to again either way. It uses x14
// and x17.
func (a *a64) casTop(again int) {
	a.addImm(x14, x12, ring.ShadowTopOff)
	a.ldxr(x17, x14)
	a.eor(x17, x17, x15)
	changed := a.branch(brCBNZ, x17, 0, -1)
	a.stxr(x17, x9, x14)
	a.branch(brB, 0, 0, again)
	a.land(changed)
	a.emit(a64Clrex)
	a.branch(brB, 0, 0, again)
}

// popTop appends the pop of the top frame (top word in x15), for a
// return that will not come or one that came, then back to again.
func (a *a64) popTop(again int) {
	a.mov64(x9, 1<<32-1) // generation + 1, depth - 1
	a.add(x9, x15, x9)
	a.casTop(again)
}

// hook appends the hook routine. A stub calls it (bl) with the thread's
// ring in x12, its saves at sp; it returns x9 = 1 if the return is
// hooked, else 0, and uses x0 and x13-x18. A tail call finds x30
// already the trampoline, its caller's frame at the same sp: it returns
// along with the caller, a frame of its own at the same key. Its first
// entry is for a stub past plain -pg's call of _mcount
// (HookFrameRoutine), which has put the key in x13: there the return
// address is in the frame record, at [x29, #8], signed if the function
// signed it (x0: 1 with key A, 2 with key B; the modifier is the key,
// sp at the entry): then x1 is the stub's copy of it stripped (xpaclri
// strips x30 alone, which here must stay the way back to the stub, for
// a thread taken out of the routine to find its stub), and the
// trampoline goes there signed the same way, for the function's autiasp
// (or retaa) to accept.
// It returns the index of its mov of the trampoline's address, and
// notes where its plain entry is in o.
func (r *RecordRoutine) hook(a *a64, o *routineOffsets) int {
	a.addImm(x18, xFP, 8) // the slot
	body := a.branch(brB, 0, 0, -1)
	o.hook = len(a.w)
	a.addImm(x13, xSP, rsArea) // the thread's sp: the frame's key
	a.addImm(x18, xSP, rsLR)   // x30 in the save area
	a.movReg(0, xZR)           // unsigned
	a.land(body)
	konst := a.mov64(x16, 0)
	again := len(a.w)
	a.ldr(x17, x18, 0) // the return address
	unsigned := a.branch(brCBZ, 0, 0, -1)
	a.movReg(x17, 1) // signed: the stub's stripped copy
	a.land(unsigned)
	a.ldr(x15, x12, ring.ShadowTopOff)
	a.topFrame()
	a.eor(x9, x17, x16)
	notTail := a.branch(brCBNZ, x9, 0, -1)
	noCaller := a.branch(brCBZW, x15, 0, -1)
	a.ldr(x9, x14, ring.ShadowOff-16)
	a.eor(x9, x9, x13)
	notCaller := a.branch(brCBNZ, x9, 0, -1)
	a.ldr(x17, x14, ring.ShadowOff-8) // the caller's return address
	tail := a.branch(brB, 0, 0, -1)
	a.land(notTail)
	empty := a.branch(brCBZW, x15, 0, -1)
	a.ldr(x9, x14, ring.ShadowOff-16)
	a.sub(x9, x13, x9)
	live := a.branch(brTBNZ, x9, 63, -1) // the top frame's key is above ours: a caller
	a.popTop(again)
	for _, i := range []int{tail, empty, live} {
		a.land(i)
	}
	a.andLow(x9, x15, 32)
	a.lsr(x9, x9, uint32(log2(ring.ShadowFrames)))
	full := a.branch(brCBNZ, x9, 0, -1)
	a.str(x13, x14, ring.ShadowOff)
	a.str(x17, x14, ring.ShadowOff+8)
	a.mov64(x9, 1<<32|1)
	a.add(x9, x15, x9)
	a.addImm(x14, x12, ring.ShadowTopOff)
	a.ldxr(x17, x14)
	a.eor(x17, x17, x15)
	changed := a.branch(brCBNZ, x17, 0, -1)
	a.stxr(x17, x9, x14)
	a.branch(brCBNZW, x17, 0, again)
	// Hooked: the thread's x30 (or saved x30) is the trampoline, signed
	// as the function signed its own.
	a.movReg(x17, x16)
	plain := a.branch(brCBZ, 0, 0, -1)
	a.movReg(x16, x13)
	keyB := a.branch(brTBNZ, 0, 1, -1)
	a.emit(a64Pacia1716)
	signed := a.branch(brB, 0, 0, -1)
	a.land(keyB)
	a.emit(a64Pacib1716)
	a.land(plain)
	a.land(signed)
	a.str(x17, x18, 0)
	a.mov(x9, 1)
	a.emit(a64Ret)
	a.land(changed)
	a.emit(a64Clrex)
	a.branch(brB, 0, 0, again)
	for _, i := range []int{noCaller, notCaller, full} {
		a.land(i)
	}
	a.movReg(x9, xZR)
	a.emit(a64Ret)
	return konst
}

// trampoline appends the return trampoline: the thread arrives from a
// hooked function's ret, sp its frame's key, x30 the trampoline. It
// returns the index of its bl to the record routine, to be landed, and
// of its movs of the trampoline's address; it notes its ret and brk in
// o.
func (r *RecordRoutine) trampoline(a *a64, o *routineOffsets) (call int, konsts []int) {
	saves(a)
	a.mov64(x9, uint64(ReturnRecord)<<32|uint64(ring.RecordHeader+8*ReturnValues))
	call = a.branch(brBL, 0, 0, -1)
	noRing := a.branch(brCBZ, x12, 0, -1)
	a.addImm(x13, xSP, rsArea) // the key
	again := len(a.w)
	a.ldr(x15, x12, ring.ShadowTopOff)
	a.topFrame()
	empty := a.branch(brCBZW, x15, 0, -1)
	a.ldr(x9, x14, ring.ShadowOff-16)
	a.sub(x9, x13, x9)
	above := a.branch(brTBNZ, x9, 63, -1) // a caller's: done
	over := a.branch(brCBNZ, x9, 0, -1)   // below ours: over
	// Ours: the return address goes to the save area before the frame
	// goes, so a thread taken out of here goes home either way. Frames
	// of tail calls share the key, and are popped with it.
	a.ldr(x9, x14, ring.ShadowOff-8)
	a.str(x9, xSP, rsLR)
	a.land(over)
	a.popTop(again)
	a.land(empty)
	a.land(above)
	noRecord := a.branch(brCBZ, x10, 0, -1)
	a.str(x13, x10, ring.RecordHeader)
	// x0 and x1 from the save area: the record routine may have made
	// a system call (waitForRoom).
	a.ldp(x15, x16, xSP, 0)
	a.str(x15, x10, ring.RecordHeader+8)
	a.str(x16, x10, ring.RecordHeader+16)
	// errno: a thread with a ring has a thread pointer. (With no offset
	// known, the word at it, which the tracer does not read.)
	a.emit(a64MrsTP | x13)
	a.mov64(x14, uint64(int64(r.Errno)))
	a.ldrswReg(x13, x13, x14)
	a.str(x13, x10, ring.RecordHeader+24)
	a.stlr(x11, x10) // committed
	a.land(noRecord)
	a.ldr(x9, xSP, rsLR)
	konsts = append(konsts, a.mov64(x16, 0))
	a.eor(x9, x9, x16)
	lost := a.branch(brCBZ, x9, 0, -1)
	restores(a)
	o.trampRet = len(a.w)
	a.emit(a64Ret) // home: x30 is the return address
	a.land(lost)
	a.land(noRing)
	restores(a) // every register as the function returned
	o.trap = len(a.w)
	a.emit(a64Brk)
	return call, konsts
}

// TrampolineRewind is StubRewind for a thread at pc rip, sp rsp, in the
// return trampoline of the copy placed at at, or in the record routine
// it called (called): SP is the thread's sp once returned, its frame's
// key; with Saved, its registers are at Area (and x30 there is where it
// returns, once its frame is popped). false: rip is not in the
// trampoline.
func TrampolineRewind(at, rip, rsp uint64, called bool) (StubRewind, bool) {
	if called {
		return StubRewind{Saved: true, Area: rsp, SP: rsp + rsArea}, true
	}
	start, trap := Trampoline(at), TrampolineTrap(at)
	if rip < start || rip > trap || rip%4 != 0 {
		return StubRewind{}, false
	}
	switch k := int(rip-start) / 4; {
	case k == 0 || rip == trap || k == routineAt.trampRet-routineAt.trampoline:
		return StubRewind{SP: rsp}, true // nothing saved, or all restored
	case k < stubSaves:
		return StubRewind{SP: rsp + rsArea}, true // saving
	}
	// From the saves to sp put back (the restores leave the area as it
	// was).
	return StubRewind{Saved: true, Area: rsp, SP: rsp + rsArea}, true
}
