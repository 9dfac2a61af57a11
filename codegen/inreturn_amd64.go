package codegen

import (
	"encoding/binary"
	"slices"

	"github.com/probedbg/probe/ring"
)

// In-process return hooks: a record stub with Hook calls the hook
// routine, which swaps the return address at the thread's sp for the
// return trampoline and keeps the original on the thread's shadow stack
// in its ring's header (ring.ShadowOff, ring.ShadowTopOff). The function returns
// into the trampoline, which pops the frame, records the return (a
// ReturnRecord) and goes home. No trap, no system call.
//
// A frame is {the return-address slot, the original return address}. The
// stack's top word is a generation << 32 | the depth: a push or pop is
// one (unlocked) cmpxchg of it, after the frame is written, so a signal
// handler that hooks calls of its own in the middle of one makes it
// start again, never lose a frame (only the thread competes for its
// stack).
//
// Calls whose returns never come (longjmp, an exception) leave frames
// whose slots are at or below sp: an entry at sp drops every frame at or
// below it, and a return every one below its own, as the tracer's own
// shadow stacks do. A dropped frame whose slot still holds the
// trampoline gets its return address back: if it lived on another stack
// (a coroutine's) it returns home, untraced. So every slot that holds the
// trampoline has its frame, and the trampoline always finds one; should it
// not, it stops at an int3 (TrampolineTrap) rather than run on.

// Condition codes of jcc rel32 (0x0f, cc).
const (
	ccAE = 0x83
	ccE  = 0x84
	ccNE = 0x85
	ccA  = 0x87
	ccB  = 0x82
	ccS  = 0x88
	ccL  = 0x8c
	ccG  = 0x8f
)

// jcc appends a jcc rel32 to be landed later; it returns its place.
func (a *asm) jcc(cc byte) int {
	a.raw(0x0f, cc, 0, 0, 0, 0)
	return len(a.b) - 4
}

// jmpFwd appends a jmp rel32 to be landed later.
func (a *asm) jmpFwd() int {
	a.raw(0xe9, 0, 0, 0, 0)
	return len(a.b) - 4
}

// land makes the branch whose displacement is at at go here.
func (a *asm) land(at int) { binary.LittleEndian.PutUint32(a.b[at:], uint32(len(a.b)-at-4)) }

// jccBack appends a jcc back to the code at offset to (cc 0: jmp).
func (a *asm) jccBack(cc byte, to int) {
	if cc == 0 {
		a.raw(0xe9)
	} else {
		a.raw(0x0f, cc)
	}
	a.b = binary.LittleEndian.AppendUint32(a.b, uint32(int32(to-(len(a.b)+4))))
}

// mem appends a REX.W instruction op with a register and a disp32(%base)
// operand.
func (a *asm) mem(op []byte, reg, base int, disp int32) {
	a.raw(0x48 | byte(reg>>3&1)<<2 | byte(base>>3&1))
	a.raw(op...)
	a.raw(0x80 | byte(reg&7)<<3 | byte(base&7))
	if base&7 == regRSP {
		a.raw(0x24) // SIB: no index
	}
	a.b = binary.LittleEndian.AppendUint32(a.b, uint32(disp))
}

// ripMem appends a REX.W instruction op with a register and the memory at
// target, rip-relative.
func (a *asm) ripMem(op []byte, reg int, target uint64) {
	a.raw(0x48 | byte(reg>>3&1)<<2)
	a.raw(op...)
	a.raw(0x05 | byte(reg&7)<<3)
	a.b = binary.LittleEndian.AppendUint32(a.b, uint32(target-(a.pc()+4)))
}

func (a *asm) loadM(reg, base int, disp int32)  { a.mem([]byte{0x8b}, reg, base, disp) }
func (a *asm) storeM(reg, base int, disp int32) { a.mem([]byte{0x89}, reg, base, disp) }
func (a *asm) leaM(reg, base int, disp int32)   { a.mem([]byte{0x8d}, reg, base, disp) }

// cmpMR appends `cmp %reg,disp(%base)`: the flags of memory - reg.
func (a *asm) cmpMR(base int, disp int32, reg int) { a.mem([]byte{0x39}, reg, base, disp) }

// cmpxchgM appends `cmpxchg %reg,disp(%base)`, not locked: only the
// thread and its signal handlers write there.
func (a *asm) cmpxchgM(reg, base int, disp int32) { a.mem([]byte{0x0f, 0xb1}, reg, base, disp) }

// addRR appends `add %src,%dst`.
func (a *asm) addRR(dst, src int) {
	a.raw(0x48|byte(src>>3&1)<<2|byte(dst>>3&1), 0x01, 0xc0|byte(src&7)<<3|byte(dst&7))
}

// topFrame appends, for the stack top word in %rax: its depth in %rdx,
// and in %rdi the frame past the top, so the top frame is at
// ring.ShadowOff-16(%rdi) (the ring in %r10).
func (a *asm) topFrame() {
	a.raw(0x89, 0xc2)             // mov %eax,%edx
	a.raw(0x48, 0x89, 0xd7)       // mov %rdx,%rdi
	a.raw(0x48, 0xc1, 0xe7, 0x04) // shl $4,%rdi
	a.addRR(regRDI, regR10)
}

// popTop appends the pop of the top frame (top word in %rax): one
// cmpxchg, which fails if a signal handler changed the stack meanwhile.
func (a *asm) popTop() {
	a.raw(0xba, 0xff, 0xff, 0xff, 0xff) // mov $0xffffffff,%edx
	a.addRR(regRDX, regRAX)             // generation + 1, depth - 1
	a.cmpxchgM(regRDX, regR10, ring.ShadowTopOff)
}

// dropTop appends the drop of the top frame, whose return will not come:
// its slot gets the return address back if it still holds the
// trampoline (its address at konst).
func (a *asm) dropTop(konst uint64) {
	a.loadM(regR8, regRDI, ring.ShadowOff-16) // its slot
	a.loadM(regRDX, regR8, 0)
	a.ripMem([]byte{0x3b}, regRDX, konst) // cmp konst(%rip),%rdx
	keep := a.jcc(ccNE)
	a.loadM(regRDX, regRDI, ring.ShadowOff-8)
	a.storeM(regRDX, regR8, 0)
	a.land(keep)
	a.popTop()
}

// hook appends the hook routine. A stub calls it with the thread's ring
// in %r10, its saves below the thread's sp, and the slot of the return
// address in %rcx (hookEntries); it returns %r8 = 1 if the return is
// hooked, else 0, and uses %rax, %rcx, %rdx, %rdi, %r8, %r11.
// A tail call finds its caller's hooked slot at sp (the trampoline): it
// returns along with the caller, a frame of its own at the same slot.
func (r *RecordRoutine) hook(a *asm, konst uint64) {
	again := len(a.b)
	a.loadM(regR11, regRCX, 0) // the return address
	a.loadM(regRAX, regR10, ring.ShadowTopOff)
	a.topFrame()
	a.ripMem([]byte{0x3b}, regR11, konst) // cmp konst(%rip),%r11: the trampoline?
	notTail := a.jcc(ccNE)
	a.raw(0x85, 0xd2) // test %edx,%edx
	noCaller := a.jcc(ccE)
	a.cmpMR(regRDI, ring.ShadowOff-16, regRCX)
	notCaller := a.jcc(ccNE)
	a.loadM(regR11, regRDI, ring.ShadowOff-8) // the caller's return address
	toPush := a.jmpFwd()
	a.land(notTail)
	a.raw(0x85, 0xd2) // test %edx,%edx
	empty := a.jcc(ccE)
	a.cmpMR(regRDI, ring.ShadowOff-16, regRCX)
	live := a.jcc(ccA) // the top frame's slot is above ours: a caller
	a.dropTop(konst)
	a.jccBack(0, again)
	a.land(toPush)
	a.land(empty)
	a.land(live)
	a.raw(0x81, 0xfa) // cmp $ring.ShadowFrames,%edx
	a.b = binary.LittleEndian.AppendUint32(a.b, ring.ShadowFrames)
	full := a.jcc(ccAE)
	a.storeM(regRCX, regRDI, ring.ShadowOff)
	a.storeM(regR11, regRDI, ring.ShadowOff+8)
	a.raw(0x48, 0xba) // movabs $(1 << 32 | 1),%rdx
	a.b = binary.LittleEndian.AppendUint64(a.b, 1<<32|1)
	a.addRR(regRDX, regRAX)
	a.cmpxchgM(regRDX, regR10, ring.ShadowTopOff)
	a.jccBack(ccNE, again)
	a.ripMem([]byte{0x8b}, regRDX, konst) // mov konst(%rip),%rdx
	a.storeM(regRDX, regRCX, 0)           // hooked
	a.raw(0x41, 0xb8, 1, 0, 0, 0)         // mov $1,%r8d
	a.raw(0xc3)
	a.land(noCaller)
	a.land(notCaller)
	a.land(full)
	a.raw(0x45, 0x31, 0xc0, 0xc3) // xor %r8d,%r8d; ret
}

// trampoline appends the return trampoline: the thread arrives from a
// hooked function's ret, its slot just above sp.
func (r *RecordRoutine) trampoline(a *asm, konst uint64, o *routineOffsets) {
	start := len(a.b)
	a.raw(0x48, 0x8d, 0x64, 0x24, 0xf8) // lea -8(%rsp),%rsp: sp at the slot
	a.saveAll()
	a.raw(0x49, 0xb8) // movabs $(ReturnRecord << 32 | its length),%r8
	a.b = binary.LittleEndian.AppendUint64(a.b, uint64(ReturnRecord)<<32|uint64(ring.RecordHeader+8*ReturnValues))
	a.raw(0xe8) // call the record routine
	a.rel32(a.at)
	a.raw(0x4d, 0x85, 0xd2) // test %r10,%r10
	noRing := a.jcc(ccE)
	a.leaM(regRCX, regRSP, rsArea) // the slot
	a.raw(0x45, 0x31, 0xdb)        // xor %r11d,%r11d: no return address yet
	again := len(a.b)
	a.loadM(regRAX, regR10, ring.ShadowTopOff)
	a.topFrame()
	a.raw(0x85, 0xd2) // test %edx,%edx
	empty := a.jcc(ccE)
	a.cmpMR(regRDI, ring.ShadowOff-16, regRCX)
	above := a.jcc(ccA) // a caller's: done
	pop := a.jcc(ccE)
	a.dropTop(konst) // below the slot: over
	a.jccBack(0, again)
	a.land(pop)
	// The slot gets the return address back before the frame goes: a
	// thread taken out of here goes home either way. Frames of tail
	// calls share the slot, and are popped with it.
	a.loadM(regR11, regRDI, ring.ShadowOff-8)
	a.storeM(regR11, regRCX, 0)
	a.popTop()
	a.jccBack(0, again)
	a.land(empty)
	a.land(above)
	a.raw(0x48, 0x85, 0xf6) // test %rsi,%rsi
	noRecord := a.jcc(ccE)
	a.storeM(regRCX, regRSI, ring.RecordHeader)
	a.loadStack(8 * slices.Index(rsSaved, regRAX))
	a.storeM(regRAX, regRSI, ring.RecordHeader+8)
	a.loadStack(8 * slices.Index(rsSaved, regRDX))
	a.storeM(regRAX, regRSI, ring.RecordHeader+16)
	// errno: a thread with a ring has a thread pointer. (With no offset
	// known, the word at %fs:0, not read by the tracer: the same code,
	// the same length.)
	a.raw(0x64, 0x48, 0x63, 0x04, 0x25) // movslq %fs:Errno,%rax
	a.b = binary.LittleEndian.AppendUint32(a.b, uint32(r.Errno))
	a.storeM(regRAX, regRSI, ring.RecordHeader+24)
	a.raw(0x4c, 0x89, 0x0e) // mov %r9,(%rsi): committed
	a.land(noRecord)
	a.raw(0x4d, 0x85, 0xdb) // test %r11,%r11
	lost := a.jcc(ccE)
	if o != nil {
		o.trampPops = len(a.b) - start
	}
	a.restoreAll()
	a.raw(0xc3) // ret: home, through the slot
	a.land(lost)
	a.land(noRing) // to the int3 that follows
}

// TrampolineRewind is StubRewind for a thread at rip, sp rsp, in the
// return trampoline of the copy placed at at, or in its record routine
// called from there (called): SP is the thread's sp once returned, just
// above the slot of the frame it returns from; with Saved, its registers
// are at Area. false: rip is not in the trampoline.
func TrampolineRewind(at, rip, rsp uint64, called bool) (StubRewind, bool) {
	if called {
		return StubRewind{Saved: true, Area: rsp + 8, SP: rsp + 8 + rsArea + 8}, true
	}
	start, trap := Trampoline(at), TrampolineTrap(at)
	if rip < start || rip >= trap {
		return StubRewind{}, false
	}
	off := int(rip - start)
	if off == 0 {
		return StubRewind{SP: rsp}, true
	}
	const lea = 5
	rw, ok := savesRewind(off-lea, routineAt.trampPops-lea, rsp)
	rw.SP += 8
	return rw, ok
}
