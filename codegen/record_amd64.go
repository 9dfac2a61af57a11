package codegen

import (
	"encoding/binary"
	"fmt"
	"slices"

	"github.com/probedbg/probe/ring"
)

// In-process recording: a probe whose handler only needs the values of
// registers and of the words at sp, at a jump-optimised C entry, runs no
// trap at all. Its stub calls the record routine, which reserves room in
// the calling thread's ring, stamps the record with rdtscp (the TSC and
// the CPU, from TSC_AUX), and the stub copies the values in and commits.
// The tracer drains the rings from its own mapping of the same memory
// (their layout: ring/layout.go).

// The code of a RecordRoutine, from its start: the record routine, the
// tally routine, the hook routine, the return trampoline, an int3 (the trampoline's way
// out when no frame of its thread's returns), and the trampoline's
// address as data.
type routineOffsets struct{ tally, hookFrame, hook, trampoline, trampPops, trap, size int }

var routineAt = func() routineOffsets {
	r := &RecordRoutine{Layout: ring.Layout{Slots: 1, RingSize: 4096}}
	var o routineOffsets
	r.gen(&asm{}, 0, &o)
	return o
}()

// Size is the length of the routine's code.
func (r *RecordRoutine) Size() int { return routineAt.size }

// HookRoutine is where the hook routine of a copy placed at at starts.
func HookRoutine(at uint64) uint64 { return at + uint64(routineAt.hook) }

// HookFrameRoutine is where the hook routine of a copy placed at at
// starts for a stub with FrameEntry: the slot is 8(%rbp).
func HookFrameRoutine(at uint64) uint64 { return at + uint64(routineAt.hookFrame) }

// Trampoline is where the return trampoline of a copy placed at at
// starts.
func Trampoline(at uint64) uint64 { return at + uint64(routineAt.trampoline) }

// TrampolineTrap is the int3 of a copy placed at at.
func TrampolineTrap(at uint64) uint64 { return at + uint64(routineAt.trap) }

// Code returns the routine's bytes for placement at at.
func (r *RecordRoutine) Code(at uint64) ([]byte, error) {
	l := r.Layout
	if err := l.Check(); err != nil {
		return nil, err
	}
	a := &asm{at: at}
	r.gen(a, at+uint64(routineAt.size-8), nil)
	return a.b, a.err
}

// gen appends the routine's code; the trampoline's address is data at
// konst. It notes where the parts start in o, if not nil.
func (r *RecordRoutine) gen(a *asm, konst uint64, o *routineOffsets) {
	r.record(a)
	tally := len(a.b)
	r.tally(a)
	hookFrame := len(a.b)
	a.leaM(regRCX, regRBP, 8) // the slot through the frame (RecordStub.FrameEntry)
	body := a.jmpFwd()
	hook := len(a.b)
	a.leaM(regRCX, regRSP, 8+rsSP) // the thread's sp: the slot
	a.land(body)
	r.hook(a, konst)
	tramp := len(a.b)
	var pops routineOffsets
	r.trampoline(a, konst, &pops)
	trap := len(a.b)
	a.raw(0xcc) // int3
	tr := r.Trampoline
	if tr == 0 {
		tr = a.at + uint64(tramp)
	}
	a.b = binary.LittleEndian.AppendUint64(a.b, tr)
	if o != nil {
		*o = routineOffsets{tally: tally, hookFrame: hookFrame, hook: hook, trampoline: tramp, trampPops: pops.trampPops, trap: trap, size: len(a.b)}
	}
}

// findRing appends the search for the calling thread's ring, by its
// thread id. The fast ways: the ring the id picks (the one a thread
// claims when it is free), then the tid table's, the ring the thread was
// last given; either is its own if it holds the thread's id. Else, once
// per thread, the search: the thread's ring among all of them (a signal
// handler of the thread's may have claimed it), else the first free one
// from the one its id picks, claimed, and the table written. Where the
// thread has none, the code counts the hit (no thread id, or no ring
// free) and returns 0 in %r10 and %rsi. It returns the places of the
// branches to land where the ring is found, in %rsi; it uses %rax, %rcx,
// %rdx, %rsi and %r9.
func (r *RecordRoutine) findRing(a *asm) []int {
	l := r.Layout
	jcc := a.jcc
	land := a.land
	imm32 := func(v uint64) { a.b = binary.LittleEndian.AppendUint32(a.b, uint32(v)) }
	movabs := func(reg byte, v uint64) { // movabs $v,reg (0 %rax, 1 %rcx, 6 %rsi, 9 %r9)
		if reg >= 8 {
			a.raw(0x49, 0xb8+reg-8)
		} else {
			a.raw(0x48, 0xb8+reg)
		}
		a.b = binary.LittleEndian.AppendUint64(a.b, v)
	}

	a.raw(0xf3, 0x48, 0x0f, 0xae, 0xc0) // rdfsbase %rax
	a.raw(0x48, 0x85, 0xc0)             // test %rax,%rax
	noTid := jcc(0x84)                  // je noTid
	a.raw(0x8b, 0x80)                   // mov TidOff(%rax),%eax
	imm32(uint64(uint32(l.TidOff)))
	a.raw(0x85, 0xc0) // test %eax,%eax
	noTid2 := jcc(0x8e)
	a.raw(0x89, 0xc2)  // mov %eax,%edx: the owner
	ringAt := func() { // %rsi: the address of ring %ecx (modulo Slots)
		a.raw(0x89, 0xce)          // mov %ecx,%esi
		a.raw(0x81, 0xe6)          // and $Slots-1,%esi
		imm32(uint64(l.Slots - 1)) //
		a.raw(0x48, 0x69, 0xf6)    // imul $Stride,%rsi,%rsi
		imm32(l.Stride())
		movabs(0, l.Base+ring.FirstRingOff)
		a.raw(0x48, 0x01, 0xc6) // add %rax,%rsi: the ring
	}
	tableEntry := func(base byte) { // %rax: the thread's entry's index; base: the table
		a.raw(0x89, 0xd0) // mov %edx,%eax
		a.raw(0x25)       // and $ring.TidMax-1,%eax
		imm32(ring.TidMax - 1)
		movabs(base, l.Base+ring.TidTableOff)
	}
	probes := func(loop int) { // the next ring, from loop
		a.raw(0xff, 0xc1)       // inc %ecx
		a.raw(0x41, 0xff, 0xc9) // dec %r9d
		a.raw(0x0f, 0x85)       // jne loop
		a.b = binary.LittleEndian.AppendUint32(a.b, uint32(int32(loop-(len(a.b)+4))))
	}
	a.raw(0x89, 0xc1)             // mov %eax,%ecx
	ringAt()                      // the ring the id picks,
	a.raw(0x48, 0x39, 0x16)       // cmp %rdx,(%rsi)
	home := jcc(0x84)             // je found: the thread's
	tableEntry(6)                 // else the table's:
	a.raw(0x0f, 0xb7, 0x0c, 0x46) // movzwl (%rsi,%rax,2),%ecx: the ring + 1
	a.raw(0x85, 0xc9)             // test %ecx,%ecx
	search := jcc(0x84)           // je search
	a.raw(0xff, 0xc9)             // dec %ecx
	ringAt()                      //
	a.raw(0x48, 0x39, 0x16)       // cmp %rdx,(%rsi)
	found := jcc(0x84)            // je found: still the thread's
	land(search)                  // search:
	a.raw(0x31, 0xc9)             // xor %ecx,%ecx: the thread's own, anywhere
	a.raw(0x41, 0xb9)             // mov $Slots,%r9d
	imm32(uint64(l.Slots))        //
	look := len(a.b)              // look:
	ringAt()                      //
	a.raw(0x48, 0x39, 0x16)       // cmp %rdx,(%rsi)
	own := jcc(0x84)              // je store
	probes(look)                  //
	// None: the first free one from the one the id picks.
	a.raw(0x89, 0xd1)                   // mov %edx,%ecx
	a.raw(0x41, 0xb9)                   // mov $Slots,%r9d
	imm32(uint64(l.Slots))              //
	try := len(a.b)                     // try:
	ringAt()                            //
	a.raw(0x48, 0x83, 0x3e, 0x00)       // cmpq $0,(%rsi)
	next := jcc(0x85)                   // jne next
	a.raw(0x31, 0xc0)                   // xor %eax,%eax
	a.raw(0xf0, 0x48, 0x0f, 0xb1, 0x16) // lock cmpxchg %rdx,(%rsi)
	claimed := jcc(0x84)                // je claimed
	a.raw(0x48, 0x39, 0xd0)             // cmp %rdx,%rax: a signal handler of the thread's claimed it meanwhile
	mine := jcc(0x84)                   // je store
	land(next)                          // next:
	probes(try)
	movabs(0, l.Base)
	a.raw(0xf0, 0x48, 0xff, 0x40, ring.NoSlotOff) // lock incq ring.NoSlotOff(%rax)
	a.raw(0x45, 0x31, 0xd2)                       // xor %r10d,%r10d: no ring
	a.raw(0x31, 0xf6, 0xc3)                       // xor %esi,%esi; ret
	land(noTid)
	land(noTid2)
	movabs(0, l.Base)
	a.raw(0xf0, 0x48, 0xff, 0x40, ring.NoTidOff) // lock incq ring.NoTidOff(%rax)
	a.raw(0x45, 0x31, 0xd2)                      // xor %r10d,%r10d
	a.raw(0x31, 0xf6, 0xc3)                      // xor %esi,%esi; ret
	// claimed: a signal handler that ran since the search may have
	// claimed another ring for the thread and put it in the table; then
	// that one is the thread's, and this one goes back.
	land(claimed)
	tableEntry(9)
	a.raw(0x41, 0x0f, 0xb7, 0x04, 0x41) // movzwl (%r9,%rax,2),%eax
	a.raw(0x85, 0xc0)                   // test %eax,%eax
	keep := jcc(0x84)                   // je store
	a.raw(0xff, 0xc8)                   // dec %eax
	a.raw(0x25)                         // and $Slots-1,%eax
	imm32(uint64(l.Slots - 1))          //
	a.raw(0x48, 0x69, 0xc0)             // imul $Stride,%rax,%rax
	imm32(l.Stride())                   //
	movabs(9, l.Base+ring.FirstRingOff) //
	a.raw(0x49, 0x01, 0xc1)             // add %rax,%r9: the table's ring
	a.raw(0x4c, 0x39, 0xce)             // cmp %r9,%rsi
	keep2 := jcc(0x84)                  // je store: this one
	a.raw(0x49, 0x39, 0x11)             // cmp %rdx,(%r9)
	keep3 := jcc(0x85)                  // jne store: not the thread's
	a.raw(0x48, 0xc7, 0x06, 0, 0, 0, 0) // movq $0,(%rsi): given back
	a.raw(0x4c, 0x89, 0xce)             // mov %r9,%rsi
	handler := a.jmpFwd()               // jmp found
	// store: the table gives the thread ring %ecx from now on.
	land(own)
	land(mine)
	land(keep)
	land(keep2)
	land(keep3)
	a.raw(0x41, 0x89, 0xc9) // mov %ecx,%r9d
	a.raw(0x41, 0x81, 0xe1) // and $Slots-1,%r9d
	imm32(uint64(l.Slots - 1))
	a.raw(0x41, 0xff, 0xc1)             // inc %r9d
	tableEntry(1)                       //
	a.raw(0x66, 0x44, 0x89, 0x0c, 0x41) // mov %r9w,(%rcx,%rax,2)
	return []int{home, found, handler}
}

// record appends the record routine.
func (r *RecordRoutine) record(a *asm) {
	l := r.Layout
	jcc := a.jcc
	land := a.land
	imm32 := func(v uint64) { a.b = binary.LittleEndian.AppendUint32(a.b, uint32(v)) }
	mask := l.RingSize - 1

	for _, at := range r.findRing(a) {
		land(at)
	}
	a.raw(0x49, 0x89, 0xf2)                     // mov %rsi,%r10: the ring
	retry := len(a.b)                           // retry:
	a.raw(0x48, 0x8b, 0x46, ring.HeadOff)       // mov ring.HeadOff(%rsi),%rax: h
	a.raw(0x48, 0x89, 0xc1)                     // mov %rax,%rcx
	a.raw(0x48, 0x81, 0xe1)                     // and $mask,%rcx: its offset
	imm32(mask)                                 //
	a.raw(0x41, 0x0f, 0xb7, 0xd0)               // movzwl %r8w,%edx: the length
	a.raw(0x4c, 0x8d, 0x0c, 0x11)               // lea (%rcx,%rdx),%r9
	a.raw(0x49, 0x81, 0xf9)                     // cmp $RingSize,%r9
	imm32(l.RingSize)                           //
	fits := jcc(0x86)                           // jbe fits
	a.raw(0x41, 0xb9)                           // mov $RingSize,%r9d
	imm32(l.RingSize)                           //
	a.raw(0x49, 0x29, 0xc9)                     // sub %rcx,%r9: the padding to the end
	a.raw(0x4c, 0x01, 0xca)                     // add %r9,%rdx
	land(fits)                                  // fits:
	a.raw(0x4c, 0x8d, 0x0c, 0x10)               // lea (%rax,%rdx),%r9: the new head
	a.raw(0x4c, 0x89, 0xc9)                     // mov %r9,%rcx
	a.raw(0x48, 0x2b, 0x8e)                     // sub ring.TailOff(%rsi),%rcx
	imm32(ring.TailOff)                         //
	a.raw(0x48, 0x81, 0xf9)                     // cmp $RingSize,%rcx
	imm32(l.RingSize)                           //
	full := jcc(0x87)                           // ja full
	a.raw(0x4c, 0x0f, 0xb1, 0x4e, ring.HeadOff) // cmpxchg %r9,ring.HeadOff(%rsi)
	a.raw(0x0f, 0x85)                           // jne retry
	a.b = binary.LittleEndian.AppendUint32(a.b, uint32(int32(retry-(len(a.b)+4))))
	// Reserved [h, new head): the record ends there.
	a.raw(0x41, 0x0f, 0xb7, 0xd0)           // movzwl %r8w,%edx
	a.raw(0x4c, 0x89, 0xc9)                 // mov %r9,%rcx
	a.raw(0x48, 0x29, 0xd1)                 // sub %rdx,%rcx: the record's position
	a.raw(0x48, 0x89, 0xca)                 // mov %rcx,%rdx
	a.raw(0x48, 0x29, 0xc2)                 // sub %rax,%rdx: the padding
	a.raw(0x48, 0x83, 0xfa, ring.PadHeader) // cmp $ring.PadHeader,%rdx
	noPad := jcc(0x82)                      // jb noPad: none, or too short for a header (the tracer skips it)
	a.raw(0x49, 0x89, 0xc1)                 // mov %rax,%r9
	a.raw(0x49, 0x81, 0xe1)                 // and $mask,%r9
	imm32(mask)                             //
	a.raw(0x4e, 0x8d, 0x8c, 0x0e)           // lea ring.HeaderSize(%rsi,%r9),%r9
	imm32(ring.HeaderSize)
	a.raw(0x49, 0x89, 0x51, 0x08) // mov %rdx,8(%r9): id 0, the padding's length
	a.raw(0x48, 0xff, 0xc0)       // inc %rax
	a.raw(0x49, 0x89, 0x01)       // mov %rax,(%r9): committed
	land(noPad)                   // noPad:
	a.raw(0x4c, 0x8d, 0x49, 0x01) // lea 1(%rcx),%r9: the record's stamp
	a.raw(0x48, 0x81, 0xe1)       // and $mask,%rcx
	imm32(mask)                   //
	a.raw(0x48, 0x8d, 0xb4, 0x0e) // lea ring.HeaderSize(%rsi,%rcx),%rsi: the record
	imm32(ring.HeaderSize)
	a.raw(0x0f, 0x01, 0xf9)             // rdtscp: %edx:%eax the TSC, %ecx TSC_AUX (node << 12 | cpu)
	a.raw(0x48, 0xc1, 0xe2, 0x20)       // shl $32,%rdx
	a.raw(0x48, 0x09, 0xd0)             // or %rdx,%rax
	a.raw(0x48, 0x89, 0x46, 0x10)       // mov %rax,16(%rsi)
	a.raw(0x81, 0xe1, 0xff, 0x0f, 0, 0) // and $0xfff,%ecx
	a.raw(0x48, 0xc1, 0xe1, 0x10)       // shl $16,%rcx
	a.raw(0x4c, 0x09, 0xc1)             // or %r8,%rcx
	a.raw(0x48, 0x89, 0x4e, 0x08)       // mov %rcx,8(%rsi)
	a.raw(0xc3)                         // ret
	land(full)                          // full:
	drops := r.waitForRoom(a, retry)
	for _, at := range drops {
		land(at)
	}
	a.raw(0x48, 0xff, 0x46, ring.LostOff) // incq ring.LostOff(%rsi): one instruction, whole against signals
	a.raw(0x31, 0xf6, 0xc3)               // xor %esi,%esi; ret
}

// sysFutex is futex's number on x86-64.
const sysFutex = 202

// waitForRoom appends, at a full ring (%rsi; %r9 the new head, %rcx
// the new head less the tail), the wait for the drain to free room:
// when the tracer asks for waits (ring.WaitMaxOff) and still lives, the
// thread sleeps on its ring's tail with futex, the time it waits added
// to ring.WaitedOff, and goes back to retry. It returns the branches to
// take for a drop instead.
//
// No stack is used (a thread taken out of the routine is found by its
// return address at sp), and the system call clobbers only registers
// the stubs and the trampoline have saved.
func (r *RecordRoutine) waitForRoom(a *asm, retry int) []int {
	now := func() { // %rax: the TSC
		a.raw(0x0f, 0x31)             // rdtsc
		a.raw(0x48, 0xc1, 0xe2, 0x20) // shl $32,%rdx
		a.raw(0x48, 0x09, 0xd0)       // or %rdx,%rax
	}
	a.raw(0x4c, 0x89, 0xcf) // mov %r9,%rdi
	a.raw(0x48, 0x29, 0xcf) // sub %rcx,%rdi: the tail seen full
	a.raw(0x49, 0xbb)       // movabs $Base,%r11
	a.b = binary.LittleEndian.AppendUint64(a.b, r.Layout.Base)
	a.raw(0x49, 0x83, 0x7b, ring.WaitMaxOff, 0x00) // cmpq $0,WaitMax(%r11)
	dropping := a.jcc(ccE)                         // je drop: the tracer drops
	now()
	a.raw(0x48, 0x89, 0xc1)                  // mov %rax,%rcx
	a.raw(0x49, 0x2b, 0x4b, ring.AliveOff)   // sub Alive(%r11),%rcx: its last sign of life, how old
	a.raw(0x49, 0x3b, 0x4b, ring.WaitMaxOff) // cmp WaitMax(%r11),%rcx
	gone := a.jcc(ccG)                       // jg drop: the tracer is gone (killed, stopped)
	// From now on the thread waits: the drain, which stores the tail
	// before it reads ring.WaitedOff, wakes it; the lock makes the futex's
	// read of the tail come after this.
	a.raw(0xf0, 0x48, 0x29, 0x46, ring.WaitedOff) // lock sub %rax,ring.WaitedOff(%rsi)
	a.raw(0x89, 0xfa)                             // mov %edi,%edx: sleep while the tail is the one seen
	a.raw(0x48, 0x8d, 0xbe)                       // lea ring.TailOff(%rsi),%rdi
	a.b = binary.LittleEndian.AppendUint32(a.b, ring.TailOff)
	a.raw(0x49, 0x89, 0xf1)                      // mov %rsi,%r9: the ring, kept
	a.raw(0x31, 0xf6)                            // xor %esi,%esi: FUTEX_WAIT (shared: the tracer wakes)
	a.raw(0x4d, 0x8d, 0x53, ring.WaitTimeoutOff) // lea Timeout(%r11),%r10
	a.raw(0xb8)                                  // mov $sysFutex,%eax
	a.b = binary.LittleEndian.AppendUint32(a.b, sysFutex)
	a.raw(0x0f, 0x05)       // syscall
	a.raw(0x4c, 0x89, 0xce) // mov %r9,%rsi
	now()
	a.raw(0xf0, 0x48, 0x01, 0x46, ring.WaitedOff) // lock add %rax,ring.WaitedOff(%rsi)
	a.raw(0x49, 0x89, 0xf2)                       // mov %rsi,%r10
	a.raw(0xe9)                                   // jmp retry
	a.b = binary.LittleEndian.AppendUint32(a.b, uint32(int32(retry-(len(a.b)+4))))
	return []int{dropping, gone}
}

// A stub starts with `lea -RecordStubRedZone(%rsp),%rsp`; its pushfq is
// at RecordStubPushf.
const (
	RecordStubRedZone = mbRedZone
	RecordStubPushf   = 5
)

// The saves of a stub and of the trampoline, from their sp up: r11 r10
// r9 r8 rdi rsi rdx rcx rax rflags; the thread's sp is rsSP above a
// stub's.
var rsSaved = []int{regR11, regR10, regR9, regR8, regRDI, regRSI, regRDX, regRCX, regRAX, regFlags}

const (
	rsArea = 10 * 8
	rsSP   = mbRedZone + rsArea
)

// pushEnds are the offsets, from the first save, where each push ends:
// pushfq, push %rax, %rcx, %rdx, %rsi, %rdi (a byte each), %r8, %r9, %r10,
// %r11 (two each).
var pushEnds = []int{1, 2, 3, 4, 5, 6, 8, 10, 12, 14}

// popEnds are the offsets, from the first restore, where each pop ends:
// pop %r11, %r10, %r9, %r8 (two bytes each), %rdi, %rsi, %rdx, %rcx, %rax,
// popfq (one each).
var popEnds = []int{2, 4, 6, 8, 9, 10, 11, 12, 13, 14}

func (a *asm) saveAll() {
	a.raw(0x9c, 0x50, 0x51, 0x52, 0x56, 0x57)             // pushfq; push %rax,%rcx,%rdx,%rsi,%rdi
	a.raw(0x41, 0x50, 0x41, 0x51, 0x41, 0x52, 0x41, 0x53) // push %r8,%r9,%r10,%r11
}

func (a *asm) restoreAll() {
	a.raw(0x41, 0x5b, 0x41, 0x5a, 0x41, 0x59, 0x41, 0x58) // pop %r11,%r10,%r9,%r8
	a.raw(0x5f, 0x5e, 0x5a, 0x59, 0x58, 0x9d)             // pop %rdi,%rsi,%rdx,%rcx,%rax; popfq
}

// Size is the length of the stub's code (its addresses do not change
// it).
func (s *RecordStub) Size() int {
	c := *s
	c.Routine, c.Next = 0, 0
	b, _ := c.Code(0)
	return len(b)
}

// regByOff is regOff turned round: the register at each offset of
// struct user_regs_struct (built once: per stub it was half the cost of
// generating the function tracer's ~700 stubs for Lua).
var regByOff = func() map[int]int {
	m := map[int]int{}
	for reg, off := range regOff {
		m[off] = reg
	}
	return m
}()

// Code returns the stub's bytes for placement at at.
func (s *RecordStub) Code(at uint64) ([]byte, error) {
	if s.StackWords < 0 || s.StackWords > RecordStackMax || s.Len() > ring.RecordMax {
		return nil, fmt.Errorf("record of %d registers and %d stack words: too long", len(s.Regs), s.StackWords)
	}
	byOff := regByOff
	a := &asm{at: at, frame: s.FrameEntry}
	a.raw(0x48, 0x8d, 0x64, 0x24, 0x80) // lea -0x80(%rsp),%rsp: below the red zone
	a.saveAll()
	if len(s.Tallies) > 0 {
		if err := s.checkTallies(); err != nil {
			return nil, err
		}
		s.tallyBody(a, byOff)
		code := s.leave(a) // (before a.err is read: the order within a return is not the spec's)
		return code, a.err
	}
	var rejects []int
	if s.Filter != nil {
		if err := s.checkFilter(); err != nil {
			return nil, err
		}
		rejects = s.filter(a, s.Filter, byOff)
	}
	a.raw(0x49, 0xb8) // movabs $(Site << 32 | Len),%r8
	a.b = binary.LittleEndian.AppendUint64(a.b, uint64(s.Site)<<32|uint64(s.Len()))
	a.raw(0xe8) // call Routine
	a.rel32(s.Routine)
	a.raw(0x48, 0x85, 0xf6) // test %rsi,%rsi
	skip := a.jcc(ccE)      // je out (or to the hook)
	put := func(i int) { a.storeM(regRAX, regRSI, int32(ring.RecordHeader+8*i)) }
	for i, off := range s.Regs {
		reg, ok := byOff[off]
		if !ok || reg > regFlags {
			return nil, fmt.Errorf("register at %d of the registers' struct: not recordable", off)
		}
		if slices.Contains(rsSaved, reg) || reg == regRSP || reg == regRBP && a.frame {
			a.loadThreadReg(reg)
		} else {
			a.storeM(reg, regRSI, int32(ring.RecordHeader+8*i))
			continue
		}
		put(i)
	}
	for w := range s.StackWords {
		a.loadThreadWord(w)
		put(len(s.Regs) + w)
	}
	if len(s.Reads) > 0 {
		if err := s.copyReads(a, byOff); err != nil {
			return nil, err
		}
	}
	if s.Hook {
		// The values first: the hook writes the return address.
		a.land(skip)
		a.raw(0x45, 0x31, 0xc0) // xor %r8d,%r8d: not hooked
		a.raw(0x4d, 0x85, 0xd2) // test %r10,%r10: no ring, no shadow stack
		none := a.jcc(ccE)
		a.raw(0xe8) // call HookRoutine
		if s.FrameEntry {
			a.rel32(HookFrameRoutine(s.Routine))
		} else {
			a.rel32(HookRoutine(s.Routine))
		}
		a.land(none)
		a.raw(0x48, 0x85, 0xf6) // test %rsi,%rsi
		skip = a.jcc(ccE)
		a.storeM(regR8, regRSI, int32(ring.RecordHeader+8*(len(s.Regs)+s.StackWords)))
	}
	a.raw(0x4c, 0x89, 0x0e) // mov %r9,(%rsi): committed
	a.land(skip)
	if rejects != nil {
		out := a.jmpFwd()
		for _, at := range rejects {
			a.land(at)
		}
		a.raw(0xe8) // call TallyRoutine: the ring, to count the hit rejected
		a.rel32(TallyRoutine(s.Routine))
		a.raw(0x4d, 0x85, 0xd2) // test %r10,%r10
		none := a.jcc(ccE)
		a.incM(regR10, int32(ring.TallyOff+8*s.Rejected))
		a.land(none)
		a.land(out)
	}
	code := s.leave(a)
	return code, a.err
}

// leave appends the stub's way out: the restores, the step back over
// the red zone and the jump to Next.
func (s *RecordStub) leave(a *asm) []byte {
	s.pops = len(a.b)
	a.restoreAll()
	a.raw(0x48, 0x8d, 0xa4, 0x24, mbRedZone, 0x00, 0x00, 0x00) // lea 0x80(%rsp),%rsp
	a.raw(0xe9)                                                // jmp Next
	a.rel32(s.Next)
	return a.b
}

// SavedRegs are the registers of a stub's save area, in order from its
// lowest word: their byte offsets in unix.PtraceRegs.
func SavedRegs() []int {
	offs := make([]int, len(rsSaved))
	for i, r := range rsSaved {
		offs[i] = regOff[r]
	}
	return offs
}

// RoutineRewind is StubRewind for a thread inside the routine (or the
// hook routine) at sp rsp, called from a stub: the call put one word
// above the save area.
func RoutineRewind(rsp uint64) StubRewind {
	return StubRewind{Saved: true, Area: rsp + 8, SP: rsp + 8 + rsSP}
}

// Rewind is StubRewind for a thread at rip, sp rsp, in this stub placed
// at at; false if rip is not one of its instructions' starts.
func (s *RecordStub) Rewind(at, rip, rsp uint64) (StubRewind, bool) {
	code, err := s.Code(at)
	if err != nil || rip < at || rip >= at+uint64(len(code)) {
		return StubRewind{}, false
	}
	off := int(rip - at)
	if off == 0 {
		return StubRewind{SP: rsp}, true
	}
	// Below the red zone, sp is base: what the saves and restores leave
	// of them says where the thread's registers are.
	rw, ok := savesRewind(off-RecordStubPushf, s.pops-RecordStubPushf, rsp)
	if !ok {
		if off == s.pops+popEnds[len(popEnds)-1]+8 { // the jmp: all as it was
			return StubRewind{SP: rsp}, true
		}
		return StubRewind{}, false
	}
	rw.SP += mbRedZone
	return rw, true
}

// savesRewind is StubRewind for code that saves every register at its
// offset 0 and restores them at pops (offsets from the first save), at
// off, sp rsp: SP is the sp before the saves. false: off is outside the
// saved code.
func savesRewind(off, pops int, rsp uint64) (StubRewind, bool) {
	if off == 0 {
		return StubRewind{SP: rsp}, true
	}
	// Until the last push the registers are the thread's: none but sp
	// changes.
	for n, end := range pushEnds[:len(pushEnds)-1] {
		if off == end {
			return StubRewind{SP: rsp + uint64(8*(n+1))}, true
		}
	}
	if off >= pushEnds[len(pushEnds)-1] && off < pops {
		return StubRewind{Saved: true, Area: rsp, SP: rsp + rsArea}, true
	}
	// The restores: the words stay where they were.
	if off == pops {
		return StubRewind{Saved: true, Area: rsp, SP: rsp + rsArea}, true
	}
	for n, end := range popEnds[:len(popEnds)-1] {
		if off == pops+end {
			area := rsp - uint64(8*(n+1))
			return StubRewind{Saved: true, Area: area, SP: area + rsArea}, true
		}
	}
	if off == pops+popEnds[len(popEnds)-1] {
		return StubRewind{SP: rsp}, true
	}
	return StubRewind{}, false
}

// RecordableReg reports whether a stub can record the register at byte
// offset off in unix.PtraceRegs: a general register or the flags.
func RecordableReg(off int) bool {
	for reg, o := range regOff {
		if o == off {
			return reg <= regFlags
		}
	}
	return false
}
