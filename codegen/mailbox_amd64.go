package codegen

import (
	"encoding/binary"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/probedbg/probe/singlestep"
)

// The slot holds what the routine stores (this fails to compile if not).
const _ = MailboxSlotSize - slotEnd

// The registers end where SlotCPU starts (this fails to compile if not).
const _ = SlotCPU - SlotRegs - unsafe.Sizeof(unix.PtraceRegs{})

// cpuNodeSeg is the selector of the GDT entry whose limit the kernel sets
// to each CPU's (node << 12 | cpu), for vgetcpu: GDT_ENTRY_CPUNODE*8 + 3,
// the same on every x86-64 kernel.
const cpuNodeSeg = 15*8 + 3

// The stack below the red zone holds, from sp up: r11, rdx, rcx, rax,
// rflags; the thread's own sp is 168 above.
const (
	mbSaved   = 5 * 8
	mbRedZone = 128
	mbSP      = mbRedZone + mbSaved
)

// The registers' places in unix.PtraceRegs, by Offsetof. (Not as a
// local's field's address less its own, as uintptrs: the stack may move
// in between, and did under -race, every offset off by the move.)
var regOff = func() map[int]int {
	var r unix.PtraceRegs
	return map[int]int{
		regRAX: int(unsafe.Offsetof(r.Rax)), regRCX: int(unsafe.Offsetof(r.Rcx)),
		regRDX: int(unsafe.Offsetof(r.Rdx)), regRBX: int(unsafe.Offsetof(r.Rbx)),
		regRSP: int(unsafe.Offsetof(r.Rsp)), regRBP: int(unsafe.Offsetof(r.Rbp)),
		regRSI: int(unsafe.Offsetof(r.Rsi)), regRDI: int(unsafe.Offsetof(r.Rdi)),
		regR8: int(unsafe.Offsetof(r.R8)), regR9: int(unsafe.Offsetof(r.R9)),
		regR10: int(unsafe.Offsetof(r.R10)), regR11: int(unsafe.Offsetof(r.R11)),
		regR12: int(unsafe.Offsetof(r.R12)), regR13: int(unsafe.Offsetof(r.R13)),
		regR14: int(unsafe.Offsetof(r.R14)), regR15: int(unsafe.Offsetof(r.R15)),
		regFlags: int(unsafe.Offsetof(r.Eflags)), regCS: int(unsafe.Offsetof(r.Cs)),
		regSS: int(unsafe.Offsetof(r.Ss)), regDS: int(unsafe.Offsetof(r.Ds)),
		regES: int(unsafe.Offsetof(r.Es)), regFS: int(unsafe.Offsetof(r.Fs)),
		regGS: int(unsafe.Offsetof(r.Gs)), regFSBase: int(unsafe.Offsetof(r.Fs_base)),
		regGSBase: int(unsafe.Offsetof(r.Gs_base)),
	}
}()

// Register numbers as the ModRM byte has them (r8-r15: 8-15), and the
// rest of what PtraceRegs holds.
const (
	regRAX = iota
	regRCX
	regRDX
	regRBX
	regRSP
	regRBP
	regRSI
	regRDI
	regR8
	regR9
	regR10
	regR11
	regR12
	regR13
	regR14
	regR15
	regFlags
	regCS
	regSS
	regDS
	regES
	regFS
	regGS
	regFSBase
	regGSBase
)

// asm is a little x86-64 assembler for the prefix.
type asm struct {
	at  uint64 // where the code goes
	b   []byte
	err error
	// frame: the code reads the thread's sp, rbp and stack words as at
	// the function's entry, through its frame (RecordStub.FrameEntry).
	frame bool
}

func (a *asm) pc() uint64    { return a.at + uint64(len(a.b)) }
func (a *asm) raw(b ...byte) { a.b = append(a.b, b...) }

// rel32 appends the displacement to target from the end of an
// instruction that ends with it.
func (a *asm) rel32(target uint64) {
	disp, ok := rel32(a.pc()+4, target)
	if !ok && a.err == nil {
		a.err = &singlestep.OutOfRangeError{Addr: a.at, Slot: a.at, Target: target}
	}
	a.b = binary.LittleEndian.AppendUint32(a.b, uint32(disp))
}

// store appends `mov %reg, disp(%rcx)`.
func (a *asm) store(reg, disp int) {
	rex := byte(0x48)
	if reg >= 8 {
		rex |= 0x04
	}
	a.raw(rex, 0x89, 0x80|byte(reg&7)<<3|1)
	a.b = binary.LittleEndian.AppendUint32(a.b, uint32(disp))
}

// load appends `mov disp(%rcx), %reg`.
func (a *asm) load(reg, disp int) {
	rex := byte(0x48)
	if reg >= 8 {
		rex |= 0x04
	}
	a.raw(rex, 0x8b, 0x80|byte(reg&7)<<3|1)
	a.b = binary.LittleEndian.AppendUint32(a.b, uint32(disp))
}

// sigSyscall appends rt_sigprocmask(how, set, oldset, 8) or
// rt_sigaction(sig, act, oldact, 8) (nr), the two pointers into the slot
// at %r8 (noSlot: NULL).
func (a *asm) sigSyscall(nr, arg1 uint32, set, old int) {
	a.raw(0xb8) // mov $nr,%eax
	a.b = binary.LittleEndian.AppendUint32(a.b, nr)
	a.raw(0xbf) // mov $arg1,%edi
	a.b = binary.LittleEndian.AppendUint32(a.b, arg1)
	for _, arg := range []struct {
		disp       int
		lea, clear []byte
	}{{set, []byte{0x49, 0x8d, 0xb0}, []byte{0x31, 0xf6}}, {old, []byte{0x49, 0x8d, 0x90}, []byte{0x31, 0xd2}}} {
		if arg.disp == noSlot {
			a.raw(arg.clear...) // xor %esi,%esi / xor %edx,%edx
			continue
		}
		a.raw(arg.lea...) // lea disp(%r8),%rsi / %rdx
		a.b = binary.LittleEndian.AppendUint32(a.b, uint32(arg.disp))
	}
	a.raw(0x41, 0xba, 8, 0, 0, 0) // mov $8,%r10d: the kernel's sizeof(sigset_t)
	a.raw(0x0f, 0x05)             // syscall (clobbers rax, rcx, r11)
}

const noSlot = -1

// withSlotInR8 appends code around body that may make system calls: the
// slot (%rcx) and the stub (%rdx) wait in %r8 and %r9, and the registers
// the calls use are the thread's again afterwards, from the slot.
func (a *asm) withSlotInR8(body func()) {
	a.raw(0x49, 0x89, 0xc8) // mov %rcx,%r8
	a.raw(0x49, 0x89, 0xd1) // mov %rdx,%r9
	body()
	a.raw(0x4c, 0x89, 0xc1) // mov %r8,%rcx
	a.raw(0x4c, 0x89, 0xca) // mov %r9,%rdx
	for _, reg := range []int{regRSI, regRDI, regR8, regR9, regR10} {
		a.load(reg, SlotRegs+regOff[reg])
	}
}

// ifTrapBlocked appends body, run only if the thread had SIGTRAP blocked
// (bit 4 of SlotSigMask, in the slot at %rcx).
func (a *asm) ifTrapBlocked(body func()) {
	a.raw(0xf6, 0x81) // testb $0x10,SlotSigMask(%rcx)
	a.b = binary.LittleEndian.AppendUint32(a.b, SlotSigMask)
	a.raw(1 << (unix.SIGTRAP - 1))
	a.raw(0x0f, 0x84) // je past
	jz := len(a.b)
	a.raw(0, 0, 0, 0)
	body()
	binary.LittleEndian.PutUint32(a.b[jz:], uint32(len(a.b)-jz-4))
}

// storeRAX appends `mov %rax, disp(%rcx)`.
func (a *asm) storeRAX(disp int) { a.store(regRAX, disp) }

// loadStack appends `mov disp(%rsp), %rax`.
func (a *asm) loadStack(disp int) {
	a.raw(0x48, 0x8b, 0x84, 0x24)
	a.b = binary.LittleEndian.AppendUint32(a.b, uint32(disp))
}

// restore appends the pops that undo the saves, and the step back over
// the red zone (lea leaves the flags as popfq put them).
func (a *asm) restore() {
	a.raw(0x41, 0x5b, 0x5a, 0x59, 0x58, 0x9d)                  // pop %r11,%rdx,%rcx,%rax; popfq
	a.raw(0x48, 0x8d, 0xa4, 0x24, mbRedZone, 0x00, 0x00, 0x00) // lea 0x80(%rsp),%rsp
}

// release appends `movq $0, SlotOwner(%rcx)`: the slot is free again.
func (a *asm) release() { a.raw(0x48, 0xc7, 0x01, 0, 0, 0, 0) }

// The stub: save, name itself, jump to the routine; then its fallback
// tail (the stub's id, where the routine returns when the slot is taken)
// and its done tail, stubDone past it.
const stubDone = 14 + 5

// Size is the length of the stub's code.
func (s *MailboxStub) Size() int {
	b, _, _ := (&MailboxStub{Kind: s.Kind}).Code(0)
	return len(b)
}

// Code returns the stub's bytes for placement at at, and its id: the
// address the routine writes to the slot's SlotAt, its fallback tail.
func (s *MailboxStub) Code(at uint64) (code []byte, id uint64, err error) {
	a := &asm{at: at}
	a.raw(0x48, 0x8d, 0x64, 0x24, 0x80)       // lea -0x80(%rsp),%rsp: below the red zone
	a.raw(0x9c, 0x50, 0x51, 0x52, 0x41, 0x53) // pushfq; push %rax,%rcx,%rdx,%r11
	a.raw(0x48, 0x8d, 0x15)                   // lea id(%rip),%rdx
	id = a.pc() + 4 + 5                       // past this lea and the jmp
	a.rel32(id)
	a.raw(0xe9) // jmp routine
	a.rel32(s.Routine)
	a.restore() // id: the fallback
	a.raw(0xe9)
	a.rel32(s.Next)
	a.restore() // id+stubDone: done
	switch s.Kind {
	case MailboxEntry:
		a.raw(0xe9)
		a.rel32(s.Done)
	case MailboxReturn:
		a.raw(0xff, 0x64, 0x24, 0xf8) // jmp *-8(%rsp): where the routine put Reply
	}
	return a.b, id, a.err
}

// Size is the length of the routine's code.
func (r *MailboxRoutine) Size() int {
	b, _, _ := (&MailboxRoutine{Kind: r.Kind}).Code(0)
	return len(b)
}

// Code returns the routine's bytes for placement at at, and their layout.
func (r *MailboxRoutine) Code(at uint64) (code []byte, l RoutineLayout, err error) {
	a := &asm{at: at}
	a.raw(0xb8) // mov $SYS_gettid,%eax
	a.b = binary.LittleEndian.AppendUint32(a.b, unix.SYS_GETTID)
	a.raw(0x0f, 0x05)                    // syscall (clobbers rcx, r11)
	a.raw(0x41, 0x89, 0xc3)              // mov %eax,%r11d: the owner
	a.raw(0x25, MailboxSlots-1, 0, 0, 0) // and $255,%eax
	a.raw(0xc1, 0xe0, mailboxSlotShift)  // shl $9,%eax: * MailboxSlotSize
	a.raw(0x48, 0x8d, 0x0d)              // lea Box(%rip),%rcx
	a.rel32(r.Box)
	a.raw(0x48, 0x01, 0xc1)             // add %rax,%rcx: the slot
	a.raw(0x31, 0xc0)                   // xor %eax,%eax
	a.raw(0xf0, 0x4c, 0x0f, 0xb1, 0x19) // lock cmpxchg %r11,(%rcx)
	a.raw(0x0f, 0x85)                   // jne taken
	jne := len(a.b)
	a.raw(0, 0, 0, 0)
	for _, reg := range []int{regRBX, regRBP, regRSI, regRDI, regR8, regR9, regR10, regR12, regR13, regR14, regR15} {
		a.store(reg, SlotRegs+regOff[reg])
	}
	for i, reg := range []int{regR11, regRDX, regRCX, regRAX, regFlags} {
		a.loadStack(8 * i)
		a.storeRAX(SlotRegs + regOff[reg])
	}
	a.raw(0x48, 0x8d, 0x84, 0x24) // lea mbSP(%rsp),%rax: the thread's sp
	a.b = binary.LittleEndian.AppendUint32(a.b, mbSP)
	a.storeRAX(SlotRegs + regOff[regRSP])
	a.raw(0x48, 0x8b, 0x00) // mov (%rax),%rax
	a.storeRAX(SlotStack)
	for _, s := range []struct {
		modrm byte
		reg   int
	}{{0xc8, regCS}, {0xd0, regSS}, {0xd8, regDS}, {0xc0, regES}, {0xe0, regFS}, {0xe8, regGS}} {
		a.raw(0x48, 0x8c, s.modrm) // mov %sreg,%rax
		a.storeRAX(SlotRegs + regOff[s.reg])
	}
	a.raw(0xf3, 0x48, 0x0f, 0xae, 0xc0) // rdfsbase %rax
	a.storeRAX(SlotRegs + regOff[regFSBase])
	a.raw(0xf3, 0x48, 0x0f, 0xae, 0xc8) // rdgsbase %rax
	a.storeRAX(SlotRegs + regOff[regGSBase])
	// The signal state an int3's forced SIGTRAP may change (see
	// SlotSigMask), and SIGTRAP unblocked for the trap if it is blocked.
	a.withSlotInR8(func() {
		a.sigSyscall(unix.SYS_RT_SIGPROCMASK, unix.SIG_BLOCK, noSlot, SlotSigMask)
		a.sigSyscall(unix.SYS_RT_SIGACTION, uint32(unix.SIGTRAP), noSlot, SlotTrapAction)
	})
	a.ifTrapBlocked(func() {
		a.withSlotInR8(func() {
			a.raw(0x49, 0xc7, 0x80) // movq $SIGTRAP's bit,slotTrapSet(%r8)
			a.b = binary.LittleEndian.AppendUint32(a.b, slotTrapSet)
			a.b = binary.LittleEndian.AppendUint32(a.b, 1<<(unix.SIGTRAP-1))
			a.sigSyscall(unix.SYS_RT_SIGPROCMASK, unix.SIG_UNBLOCK, slotTrapSet, noSlot)
			l.Unblocked = a.pc()
		})
	})
	// The CPU, for the tracer's CPU column and placement, which would
	// otherwise read the thread's /proc stat. lsl (~20 ns here) and not
	// rdpid (~1 ns), which not every CPU has: one path everywhere. A
	// failed lsl leaves %eax as it was: all ones.
	a.raw(0x48, 0x83, 0xc8, 0xff)          // or $-1,%rax
	a.raw(0x41, 0xbb, cpuNodeSeg, 0, 0, 0) // mov $cpuNodeSeg,%r11d
	a.raw(0x41, 0x0f, 0x03, 0xc3)          // lsl %r11d,%eax
	a.storeRAX(SlotCPU)
	a.store(regRDX, SlotAt) // last: the slot is whole
	l.Trap = a.pc()
	a.raw(singlestep.BreakpointInsn...)
	// Unanswered, back to the trap: a thread the tracer had taken the
	// stop of when it was killed goes on from here with no signal, and
	// must trap again, for the rescue (rescue.go) to answer.
	a.raw(0x48, 0x83, 0x79, SlotReply, 0x00) // cmpq $0,Reply(%rcx)
	a.raw(0x74, byte(int8(int64(l.Trap)-int64(a.pc())-2)))
	a.ifTrapBlocked(func() {
		a.withSlotInR8(func() {
			a.sigSyscall(unix.SYS_RT_SIGPROCMASK, unix.SIG_SETMASK, SlotSigMask, noSlot)
			l.Reblocked = a.pc()
		})
	})
	switch r.Kind {
	case MailboxEntry:
		tramp := r.Tramp
		if tramp == 0 {
			tramp = at // never swapped in: no hooks without a trampoline
		}
		a.raw(0x48, 0x83, 0x79, SlotReply, ReplyKeep) // cmpq $ReplyKeep,Reply(%rcx)
		a.raw(0x74, 7+8)                              // je past the swap
		a.raw(0x48, 0x8d, 0x05)                       // lea Tramp(%rip),%rax
		a.rel32(tramp)
		a.raw(0x48, 0x89, 0x84, 0x24) // mov %rax,mbSP(%rsp): over the return address
		a.b = binary.LittleEndian.AppendUint32(a.b, mbSP)
	case MailboxReturn:
		a.raw(0x48, 0x8b, 0x41, SlotReply) // mov Reply(%rcx),%rax
		a.raw(0x48, 0x89, 0x84, 0x24)      // mov %rax,mbSP-8(%rsp): where ret read it from
		a.b = binary.LittleEndian.AppendUint32(a.b, mbSP-8)
	}
	a.raw(0x48, 0xc7, 0x41, SlotReply, 0, 0, 0, 0) // movq $0,Reply(%rcx): taken
	a.release()
	a.raw(0x48, 0x83, 0xc2, stubDone) // add $stubDone,%rdx
	taken := a.pc() + 2
	a.raw(0xff, 0xe2) // jmp *%rdx: the stub's done tail
	binary.LittleEndian.PutUint32(a.b[jne:], uint32(int32(taken-(a.at+uint64(jne)+4))))
	a.raw(0xff, 0xe2) // taken: jmp *%rdx, the stub's fallback
	return a.b, l, a.err
}
