package codegen

import (
	"encoding/binary"

	"golang.org/x/sys/unix"
)

// The x86-64 ucontext's words the handler reads and writes (uc_mcontext
// begins at 40; its gregs are r8-r15, rdi, rsi, rbp, rbx, rdx, rax, rcx,
// rsp, rip, eflags).
const (
	ucGregs  = 40
	ucRCX    = ucGregs + 14*8
	ucRSP    = ucGregs + 15*8
	ucRIP    = ucGregs + 16*8
	ucEFLAGS = ucGregs + 17*8
	// uc_sigmask follows uc_mcontext's 32 words.
	ucSigmask = ucGregs + 32*8
)

// guardWords is how many of the ucontext's gregs the guard keeps: r8
// to eflags (not the segments, the trap's number, cr2).
const guardWords = 18

// GuardWords returns regs as the guard keeps them: in the ucontext's
// order.
func GuardWords(regs *unix.PtraceRegs) []uint64 {
	return []uint64{regs.R8, regs.R9, regs.R10, regs.R11, regs.R12, regs.R13, regs.R14, regs.R15,
		regs.Rdi, regs.Rsi, regs.Rbp, regs.Rbx, regs.Rdx, regs.Rax, regs.Rcx, regs.Rsp, regs.Rip, regs.Eflags}
}

// memOp appends an instruction with a [base+disp32] operand: opcode, then
// ModRM with reg (a register, or an opcode's /digit) and mod 10.
func (a *asm) memOp(wide bool, op []byte, reg, base, disp int) {
	a.rex(wide, reg, base)
	a.raw(op...)
	a.raw(0x80 | byte(reg&7)<<3 | byte(base&7))
	if base&7 == regRSP {
		a.raw(0x24) // SIB: base alone
	}
	a.b = binary.LittleEndian.AppendUint32(a.b, uint32(int32(disp)))
}

// rr appends an instruction on two registers (ModRM mod 11, reg and rm).
func (a *asm) rr(wide bool, op byte, reg, rm int) {
	a.rex(wide, reg, rm)
	a.raw(op, 0xc0|byte(reg&7)<<3|byte(rm&7))
}

// rex appends the REX prefix an instruction on reg and rm needs, if any.
func (a *asm) rex(wide bool, reg, rm int) {
	rex := byte(0x40)
	if wide {
		rex |= 8
	}
	if rex |= byte(reg>>3&1)<<2 | byte(rm>>3&1); rex != 0x40 {
		a.raw(rex)
	}
}

// movImm appends `mov $v, %reg32` (which zeroes the upper half).
func (a *asm) movImm(reg int, v uint32) {
	if reg >= 8 {
		a.raw(0x41)
	}
	a.raw(0xb8 + byte(reg&7))
	a.b = binary.LittleEndian.AppendUint32(a.b, v)
}

func (a *asm) syscall(nr uint32) {
	a.movImm(regRAX, nr)
	a.raw(0x0f, 0x05)
}

// label is a place in the code; jumps to it before it is placed are
// patched when it is.
type label struct {
	at     int
	placed bool
	fixes  []int
}

func (a *asm) place(l *label) {
	l.at, l.placed = len(a.b), true
	for _, f := range l.fixes {
		binary.LittleEndian.PutUint32(a.b[f:], uint32(int32(l.at-f-4)))
	}
}

// jump appends op (e9 jmp, e8 call, 0f 8x jcc) to l.
func (a *asm) jump(l *label, op ...byte) {
	a.raw(op...)
	if l.placed {
		a.b = binary.LittleEndian.AppendUint32(a.b, uint32(int32(l.at-len(a.b)-4)))
		return
	}
	l.fixes = append(l.fixes, len(a.b))
	a.raw(0, 0, 0, 0)
}

var (
	opJmp = []byte{0xe9}
	opJz  = []byte{0x0f, 0x84}
	opJnz = []byte{0x0f, 0x85}
	opJs  = []byte{0x0f, 0x88}
)

// Code returns the handler and what follows it, for placement at at:
// the handler first, then the restorer its sigaction names and the
// guard's stub (entries). The page must be within ±2 GiB of at.
func (r *RescueCode) Code(at uint64) (code []byte, entries RescueEntries, err error) {
	a := &asm{at: at}
	// Every register is the kernel's to restore from the ucontext at
	// sigreturn: the handler uses them freely. r12: the ucontext; r13:
	// the tid; r14: the page; r15: the pc the thread trapped with; rbp:
	// the siginfo, until the text is put back.
	var scan, found, held, ours, fail, out, lookup, tramp, mboxRet, mboxEntry, textLoop, textNext, textDone, raise label
	a.rr(true, 0x89, regRDX, regR12) // mov %rdx,%r12
	a.rr(true, 0x89, regRSI, regRBP) // mov %rsi,%rbp
	a.syscall(unix.SYS_GETTID)
	a.rr(false, 0x89, regRAX, regR13) // mov %eax,%r13d
	a.raw(0x4c, 0x8d, 0x35)           // lea page(%rip),%r14
	a.rel32(r.Page)
	a.memOp(true, []byte{0x8b}, regR15, regR12, ucRIP) // mov rip(uc),%r15

	// A guarded thread at the stub's trap: its registers and mask back.
	var pcs label
	a.memOp(true, []byte{0x3b}, regR15, regR14, RescueGuardTrap) // cmp trap,%r15
	a.jump(&pcs, opJnz...)
	a.memOp(true, []byte{0x3b}, regR13, regR14, RescueGuardTid) // cmp tid,%r13
	a.jump(&pcs, opJnz...)
	a.memOp(true, []byte{0x8d}, regRSI, regR14, RescueGuardRegs) // lea regs,%rsi
	a.memOp(true, []byte{0x8d}, regRDI, regR12, ucGregs)         // lea gregs(uc),%rdi
	a.movImm(regRCX, guardWords)
	a.raw(0xf3, 0x48, 0xa5)                                      // rep movsq
	a.memOp(true, []byte{0x8b}, regRAX, regR14, RescueGuardMask) // mov mask,%rax
	a.memOp(true, []byte{0x89}, regRAX, regR12, ucSigmask)       // mov %rax,sigmask(uc)
	a.memOp(true, []byte{0xc7}, 0, regR14, RescueGuardTid)       // movq $0,tid: once
	a.raw(0, 0, 0, 0)
	a.jump(&ours, opJmp...)

	// The pc entries: is the thread at a trap of ours?
	a.place(&pcs)
	a.memOp(true, []byte{0x8b}, regRCX, regR14, RescuePCs)  // mov count,%rcx
	a.memOp(true, []byte{0x8d}, regRSI, regR14, RescuePCAt) // lea entries,%rsi
	a.place(&scan)
	a.rr(true, 0x85, regRCX, regRCX) // test %rcx,%rcx
	a.jump(&held, opJz...)
	a.memOp(true, []byte{0x3b}, regR15, regRSI, 0) // cmp (%rsi),%r15
	a.jump(&found, opJz...)
	a.raw(0x48, 0x83, 0xc6, RescuePCSize) // add $24,%rsi
	a.raw(0x48, 0xff, 0xc9)               // dec %rcx
	a.jump(&scan, opJmp...)

	a.place(&found)
	a.memOp(true, []byte{0x8b}, regRAX, regRSI, 16) // mov kind,%rax
	a.raw(0x83, 0xf8, RescueReturn)                 // cmp $RescueReturn,%eax
	a.jump(&tramp, opJz...)
	a.raw(0x83, 0xf8, RescueMailboxReturn) // cmp $RescueMailboxReturn,%eax
	a.jump(&mboxRet, opJz...)
	a.raw(0x83, 0xf8, RescueMailboxEntry) // cmp $RescueMailboxEntry,%eax
	a.jump(&mboxEntry, opJz...)
	a.memOp(true, []byte{0x8b}, regRAX, regRSI, 8)     // mov to,%rax
	a.memOp(true, []byte{0x89}, regRAX, regR12, ucRIP) // mov %rax,rip(uc)
	a.jump(&ours, opJmp...)

	a.place(&tramp)                                    // ret popped the slot: it was at sp - 8
	a.memOp(true, []byte{0x8b}, regRDI, regR12, ucRSP) // mov rsp(uc),%rdi
	a.raw(0x48, 0x83, 0xef, 8)                         // sub $8,%rdi
	a.jump(&lookup, 0xe8)
	a.rr(true, 0x85, regRAX, regRAX) // test %rax,%rax
	a.jump(&fail, opJz...)
	a.memOp(true, []byte{0x89}, regRAX, regR12, ucRIP) // mov %rax,rip(uc)
	a.jump(&ours, opJmp...)

	a.place(&mboxRet)
	a.memOp(true, []byte{0x8b}, regRBX, regR12, ucRCX)                   // mov rcx(uc),%rbx: the slot
	a.memOp(true, []byte{0x83}, 7, regRBX, SlotReply)                    // cmpq $0,reply(%rbx)
	a.raw(0)                                                             //
	a.jump(&ours, opJnz...)                                              // answered
	a.memOp(true, []byte{0x8b}, regRDI, regRBX, SlotRegs+regOff[regRSP]) // mov sp(slot),%rdi
	a.raw(0x48, 0x83, 0xef, 8)                                           // sub $8,%rdi
	a.jump(&lookup, 0xe8)
	a.rr(true, 0x85, regRAX, regRAX)
	a.jump(&fail, opJz...)
	a.memOp(true, []byte{0x89}, regRAX, regRBX, SlotReply) // mov %rax,reply(%rbx)
	a.jump(&ours, opJmp...)

	a.place(&mboxEntry)
	a.memOp(true, []byte{0x8b}, regRBX, regR12, ucRCX) // mov rcx(uc),%rbx: the slot
	a.memOp(true, []byte{0x83}, 7, regRBX, SlotReply)  // cmpq $0,reply(%rbx)
	a.raw(0)
	a.jump(&ours, opJnz...)                           // answered
	a.memOp(true, []byte{0xc7}, 0, regRBX, SlotReply) // movq $ReplyKeep,reply(%rbx)
	a.b = binary.LittleEndian.AppendUint32(a.b, ReplyKeep)
	a.jump(&ours, opJmp...)

	// Not at a trap of ours: a thread we held when we died goes on from
	// where it is.
	a.place(&held)
	a.raw(0x44, 0x89, 0xe8) // mov %r13d,%eax
	a.raw(0x25)             // and $slots-1,%eax
	a.b = binary.LittleEndian.AppendUint32(a.b, RescueHeldSlots-1)
	a.raw(0x45, 0x3b, 0xac, 0x86) // cmp held(%r14,%rax,4),%r13d
	a.b = binary.LittleEndian.AppendUint32(a.b, RescueHeld)
	a.jump(&fail, opJnz...)
	// Once: its next SIGTRAP is its own (a held word we left set).
	a.raw(0x41, 0xc7, 0x84, 0x86) // movl $0,held(%r14,%rax,4)
	a.b = binary.LittleEndian.AppendUint32(a.b, RescueHeld)
	a.b = binary.LittleEndian.AppendUint32(a.b, 0)

	a.place(&ours)
	a.memOp(true, []byte{0x81}, 4, regR12, ucEFLAGS) // andq $~TF,eflags(uc): no step goes on
	a.b = binary.LittleEndian.AppendUint32(a.b, ^uint32(0x100))
	// The text, once: the first thread puts it all back.
	a.movImm(regRAX, 1)
	a.memOp(true, []byte{0x87}, regRAX, regR14, RescueDone) // xchg %rax,done
	a.rr(true, 0x85, regRAX, regRAX)
	a.jump(&out, opJnz...)
	a.movImm(regRDI, uint32(0xffffff9c)) // AT_FDCWD
	a.memOp(true, []byte{0x8d}, regRSI, regR14, RescuePath)
	a.movImm(regRDX, unix.O_RDWR|unix.O_CLOEXEC)
	a.raw(0x45, 0x31, 0xd2) // xor %r10d,%r10d
	a.syscall(unix.SYS_OPENAT)
	a.raw(0x85, 0xc0) // test %eax,%eax
	a.jump(&out, opJs...)
	a.rr(false, 0x89, regRAX, regRBX)                         // mov %eax,%ebx: the fd
	a.memOp(true, []byte{0x8b}, regRBP, regR14, RescueTexts)  // mov count,%rbp
	a.memOp(true, []byte{0x8d}, regR15, regR14, RescueTextAt) // lea entries,%r15
	a.place(&textLoop)
	a.rr(true, 0x85, regRBP, regRBP)
	a.jump(&textDone, opJz...)
	a.memOp(true, []byte{0x83}, 7, regR15, 8) // cmpq $0,len(%r15)
	a.raw(0)
	a.jump(&textNext, opJz...)
	// In text_poke_bp's order, as the tracer writes: the breakpoint
	// over the first byte, the rest, then the first byte.
	for _, w := range []struct{ src, n, at int }{{-1, 1, 0}, {16 + 1, -1, 1}, {16, 1, 0}} {
		a.rr(false, 0x89, regRBX, regRDI) // mov %ebx,%edi
		if w.src < 0 {
			a.memOp(true, []byte{0x8d}, regRSI, regR14, RescueBreak)
		} else {
			a.memOp(true, []byte{0x8d}, regRSI, regR15, w.src)
		}
		if w.n < 0 {
			a.memOp(true, []byte{0x8b}, regRDX, regR15, 8) // mov len,%rdx
			a.raw(0x48, 0xff, 0xca)                        // dec %rdx
		} else {
			a.movImm(regRDX, uint32(w.n))
		}
		a.memOp(true, []byte{0x8b}, regR10, regR15, 0) // mov addr,%r10
		if w.at != 0 {
			a.raw(0x49, 0xff, 0xc2) // inc %r10
		}
		a.syscall(unix.SYS_PWRITE64)
	}
	a.place(&textNext)
	a.raw(0x49, 0x83, 0xc7, RescueTextSize) // add $48,%r15
	a.raw(0x48, 0xff, 0xcd)                 // dec %rbp
	a.jump(&textLoop, opJmp...)
	a.place(&textDone)
	a.rr(false, 0x89, regRBX, regRDI)
	a.syscall(unix.SYS_CLOSE)
	a.place(&out)
	a.raw(0xc3) // ret

	// The program's SIGTRAP: to its handler, as the signal came (a jump:
	// it returns to our restorer); where it has none, its action back
	// and the signal again (blocked until the handler returns, then
	// delivered as it would have been).
	a.place(&fail)
	a.memOp(true, []byte{0x8b}, regRAX, regR14, RescueOldAct) // mov handler,%rax
	a.raw(0x48, 0x83, 0xf8, 1)                                // cmp $SIG_IGN,%rax
	a.jump(&raise, 0x0f, 0x86)                                // jbe: SIG_DFL or SIG_IGN
	a.movImm(regRDI, uint32(unix.SIGTRAP))
	a.rr(true, 0x89, regRBP, regRSI) // mov %rbp,%rsi
	a.rr(true, 0x89, regR12, regRDX) // mov %r12,%rdx
	a.raw(0xff, 0xe0)                // jmp *%rax
	a.place(&raise)
	a.movImm(regRDI, uint32(unix.SIGTRAP))
	a.memOp(true, []byte{0x8d}, regRSI, regR14, RescueOldAct)
	a.raw(0x31, 0xd2)             // xor %edx,%edx
	a.raw(0x41, 0xba, 8, 0, 0, 0) // mov $8,%r10d
	a.syscall(unix.SYS_RT_SIGACTION)
	a.syscall(unix.SYS_GETPID)
	a.rr(false, 0x89, regRAX, regRDI) // mov %eax,%edi
	a.rr(false, 0x89, regR13, regRSI) // mov %r13d,%esi
	a.movImm(regRDX, uint32(unix.SIGTRAP))
	a.syscall(unix.SYS_TGKILL)
	a.raw(0xc3)

	// lookup: the return address of the thread's frame at slot %rdi, the
	// frame taken; 0 if none.
	var next, none label
	a.place(&lookup)
	a.memOp(true, []byte{0x8b}, regRCX, regR14, RescueFrames)
	a.memOp(true, []byte{0x8d}, regRDX, regR14, RescueFrameAt)
	var loop label
	a.place(&loop)
	a.rr(true, 0x85, regRCX, regRCX)
	a.jump(&none, opJz...)
	a.memOp(true, []byte{0x3b}, regR13, regRDX, 0) // cmp tid(%rdx),%r13
	a.jump(&next, opJnz...)
	a.memOp(true, []byte{0x3b}, regRDI, regRDX, 8) // cmp slot(%rdx),%rdi
	a.jump(&next, opJnz...)
	a.memOp(true, []byte{0x8b}, regRAX, regRDX, 16) // mov ret(%rdx),%rax
	a.memOp(true, []byte{0xc7}, 0, regRDX, 0)       // movq $0,tid(%rdx): taken
	a.raw(0, 0, 0, 0)
	a.raw(0xc3)
	a.place(&next)
	a.raw(0x48, 0x83, 0xc2, RescueFrameSize) // add $24,%rdx
	a.raw(0x48, 0xff, 0xc9)                  // dec %rcx
	a.jump(&loop, opJmp...)
	a.place(&none)
	a.raw(0x31, 0xc0) // xor %eax,%eax
	a.raw(0xc3)

	entries.Restorer = a.pc()
	a.syscall(unix.SYS_RT_SIGRETURN)
	entries.Syscall = a.pc()
	a.raw(0x0f, 0x05, 0xcc) // syscall; int3
	return a.b, entries, a.err
}
