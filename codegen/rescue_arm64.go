package codegen

import (
	"encoding/binary"

	"golang.org/x/sys/unix"

	"github.com/probedbg/probe/singlestep"
)

// The arm64 ucontext's words the handler reads and writes: uc_mcontext
// (a sigcontext: fault_address, x0-x30, sp, pc, pstate) begins at 176,
// after uc_sigmask's 128 bytes.
const (
	ucSigmask = 40
	ucRegs    = 176 + 8
	ucSP      = ucRegs + 31*8
	ucPC      = ucSP + 8
)

// guardWords is how many of the sigcontext's words the guard keeps:
// x0-x30, sp, pc, pstate.
const guardWords = 34

// GuardWords returns regs as the guard keeps them: in the sigcontext's
// order, which is ptrace's.
func GuardWords(regs *unix.PtraceRegs) []uint64 {
	return append(append([]uint64(nil), regs.Regs[:]...), regs.Sp, regs.Pc, regs.Pstate)
}

// syscall appends the system call nr, its arguments already in x0-x5.
func (a *a64) syscall(nr uint64) {
	a.mov(8, nr)
	a.emit(a64Svc)
}

// Code returns the handler and what follows it, for placement at at:
// the handler first, then the restorer its sigaction names and the
// guard's stub (entries). The handler reaches the page by its absolute
// address, from anywhere.
//
// brk leaves pc at itself, and a thread whose stop the tracer had taken
// goes on at that pc with no signal, so it traps again and comes here:
// no instruction's tail is ever run as code. There is no mailbox on
// arm64, so RescueGoOn and RescueReturn are the only kinds.
func (r *RescueCode) Code(at uint64) (code []byte, entries RescueEntries, err error) {
	a := &a64{at: at}
	// Every register is the kernel's to restore from the ucontext at
	// sigreturn, but x30: the handler returns to the restorer through
	// it. x19: the ucontext; x20: the tid; x21: the page; x22: the pc the
	// thread trapped with; x26: the siginfo.
	const uc, tid, page, pc, info = 19, 20, 21, 22, 26
	a.movReg(uc, 2)
	a.movReg(info, 1)
	a.syscall(unix.SYS_GETTID)
	a.movReg(tid, 0)
	a.mov64(page, r.Page)
	a.ldr(pc, uc, ucPC)

	// A guarded thread at the stub's trap: its registers and mask back.
	var fails, ours []int
	a.ldr(x9, page, RescueGuardTrap)
	a.eor(x9, x9, pc)
	notGuard := a.branch(brCBNZ, x9, 0, -1)
	a.ldr(x9, page, RescueGuardTid)
	a.eor(x9, x9, tid)
	notGuard2 := a.branch(brCBNZ, x9, 0, -1)
	a.addImm(x10, page, RescueGuardRegs)
	a.addImm(x11, uc, ucRegs)
	a.mov(x12, guardWords)
	copyWord := len(a.w)
	a.ldr(x13, x10, 0)
	a.str(x13, x11, 0)
	a.addImm(x10, x10, 8)
	a.addImm(x11, x11, 8)
	a.subImm(x12, x12, 1)
	a.branch(brCBNZ, x12, 0, copyWord)
	a.ldr(x9, page, RescueGuardMask)
	a.str(x9, uc, ucSigmask)
	a.str(xZR, page, RescueGuardTid) // once
	ours = append(ours, a.branch(brB, 0, 0, -1))
	a.land(notGuard)
	a.land(notGuard2)

	// The pc entries: is the thread at a trap of ours?
	a.ldr(x9, page, RescuePCs)
	a.addImm(x10, page, RescuePCAt)
	scan := len(a.w)
	held := a.branch(brCBZ, x9, 0, -1)
	a.ldr(x11, x10, 0)
	a.eor(x11, x11, pc)
	found := a.branch(brCBZ, x11, 0, -1)
	a.addImm(x10, x10, RescuePCSize)
	a.subImm(x9, x9, 1)
	a.branch(brB, 0, 0, scan)

	a.land(found)
	a.ldr(x11, x10, 16) // the kind
	a.subImm(x12, x11, RescueReturn)
	tramp := a.branch(brCBZ, x12, 0, -1)
	a.subImm(x12, x11, RescueGoOn)
	fails = append(fails, a.branch(brCBNZ, x12, 0, -1))
	a.ldr(x11, x10, 8) // to
	a.str(x11, uc, ucPC)
	ours = append(ours, a.branch(brB, 0, 0, -1))

	// On the trampoline: ret left sp as at the entry, the frame's key.
	a.land(tramp)
	a.ldr(x13, uc, ucSP)
	a.ldr(x9, page, RescueFrames)
	a.addImm(x10, page, RescueFrameAt)
	loop := len(a.w)
	fails = append(fails, a.branch(brCBZ, x9, 0, -1))
	a.ldr(x11, x10, 0)
	a.eor(x11, x11, tid)
	next := a.branch(brCBNZ, x11, 0, -1)
	a.ldr(x11, x10, 8)
	a.eor(x11, x11, x13)
	next2 := a.branch(brCBNZ, x11, 0, -1)
	a.ldr(x11, x10, 16) // the return address
	a.str(xZR, x10, 0)  // the frame taken
	a.str(x11, uc, ucPC)
	ours = append(ours, a.branch(brB, 0, 0, -1))
	a.land(next)
	a.land(next2)
	a.addImm(x10, x10, RescueFrameSize)
	a.subImm(x9, x9, 1)
	a.branch(brB, 0, 0, loop)

	// Not at a trap of ours: a thread we held when we died goes on from
	// where it is.
	a.land(held)
	a.andLow(x9, tid, log2(RescueHeldSlots))
	a.addImm(x10, page, RescueHeld)
	a.addShifted(x10, x10, x9, 2)
	a.ldrW(x11, x10, 0)
	a.eor(x11, x11, tid)
	fails = append(fails, a.branch(brCBNZ, x11, 0, -1))
	a.emit(0xb9000000 | x10<<5 | xZR) // str wzr, [x10]: once (its next SIGTRAP is its own)

	for _, i := range ours {
		a.land(i)
	}
	// The text, once: the first thread puts it all back.
	a.mov(x9, 1)
	a.addImm(x10, page, RescueDone)
	swap := len(a.w)
	a.ldaxr(x11, x10)
	a.stlxr(x12, x9, x10)
	a.branch(brCBNZW, x12, 0, swap)
	var outs []int
	again := a.branch(brCBNZ, x11, 0, -1)
	const fd, left, entry = 23, 24, 25
	open := func() {
		a.mov(0, uint64(0xffffffffffffff9c)) // AT_FDCWD
		a.addImm(1, page, RescuePath)
		a.mov(2, unix.O_RDWR|unix.O_CLOEXEC)
		a.mov(3, 0)
		a.syscall(unix.SYS_OPENAT)
	}
	open()
	outs = append(outs, a.branch(brTBNZ, 0, 63, -1))
	a.movReg(fd, 0)
	a.ldr(left, page, RescueTexts)
	a.addImm(entry, page, RescueTextAt)
	textLoop := len(a.w)
	textDone := a.branch(brCBZ, left, 0, -1)
	a.ldr(x9, entry, 8) // the length
	textNext := a.branch(brCBZ, x9, 0, -1)
	// In text_poke_bp's order, as the tracer writes: the breakpoint over
	// the first instruction, the rest, then the first instruction.
	brk := uint64(len(singlestep.BreakpointInsn))
	for _, w := range []struct {
		src  int
		rest bool
	}{{-1, false}, {16, true}, {16, false}} {
		a.movReg(0, fd)
		switch {
		case w.src < 0:
			a.addImm(1, page, RescueBreak)
		case w.rest:
			a.addImm(1, entry, uint64(w.src)+brk)
		default:
			a.addImm(1, entry, uint64(w.src))
		}
		a.mov(2, brk)
		a.ldr(3, entry, 0) // the address
		if w.rest {
			a.sub(2, x9, 2) // the length less the first
			a.addImm(3, 3, brk)
		}
		a.syscall(unix.SYS_PWRITE64)
	}
	a.land(textNext)
	a.addImm(entry, entry, RescueTextSize)
	a.subImm(left, left, 1)
	a.branch(brB, 0, 0, textLoop)
	a.land(textDone)
	a.movReg(0, fd)
	a.syscall(unix.SYS_CLOSE)
	for _, i := range outs {
		a.land(i)
	}
	a.emit(a64Ret)

	// The text is back, and a thread trapped at one of its words all
	// the same: the CPU ran a breakpoint no longer there (QEMU's TCG
	// keeps a translation of the word made on one vCPU as another wrote
	// the original back, until that word is written again: a thread
	// trapped there for seconds, again and again). The word written
	// again, once more for each such trap.
	a.land(again)
	a.ldr(left, page, RescueTexts)
	a.addImm(entry, page, RescueTextAt)
	scanText := len(a.w)
	var gone []int
	gone = append(gone, a.branch(brCBZ, left, 0, -1))
	a.ldr(x9, entry, 8) // the length: one instruction's only
	a.subImm(x12, x9, brk)
	other := a.branch(brCBNZ, x12, 0, -1)
	a.ldr(x12, entry, 0)
	a.eor(x12, x12, pc)
	other2 := a.branch(brCBNZ, x12, 0, -1)
	open()
	gone = append(gone, a.branch(brTBNZ, 0, 63, -1))
	a.movReg(fd, 0)
	a.addImm(1, entry, 16)
	a.mov(2, brk)
	a.movReg(3, pc)
	a.syscall(unix.SYS_PWRITE64)
	a.movReg(0, fd)
	a.syscall(unix.SYS_CLOSE)
	gone = append(gone, a.branch(brB, 0, 0, -1))
	a.land(other)
	a.land(other2)
	a.addImm(entry, entry, RescueTextSize)
	a.subImm(left, left, 1)
	a.branch(brB, 0, 0, scanText)
	for _, i := range gone {
		a.land(i)
	}
	a.emit(a64Ret)

	// The program's SIGTRAP: to its handler, as the signal came (a
	// branch through x16, which a `bti c` accepts: it returns to our
	// restorer); where it has none, its action back and the signal again
	// (blocked until the handler returns, then delivered as it would
	// have been).
	for _, i := range fails {
		a.land(i)
	}
	a.ldr(x16, page, RescueOldAct)
	a.lsr(x17, x16, 1)
	raise := a.branch(brCBZ, x17, 0, -1) // SIG_DFL or SIG_IGN
	a.mov(0, uint64(unix.SIGTRAP))
	a.movReg(1, info)
	a.movReg(2, uc)
	a.emit(0xd61f0000 | x16<<5) // br x16
	a.land(raise)
	a.mov(0, uint64(unix.SIGTRAP))
	a.addImm(1, page, RescueOldAct)
	a.mov(2, 0)
	a.mov(3, 8)
	a.syscall(unix.SYS_RT_SIGACTION)
	a.syscall(unix.SYS_GETPID)
	a.movReg(1, tid)
	a.mov(2, uint64(unix.SIGTRAP))
	a.syscall(unix.SYS_TGKILL)
	a.emit(a64Ret)

	entries.Restorer = a.pc()
	a.syscall(unix.SYS_RT_SIGRETURN)
	entries.Syscall = a.pc()
	a.emit(a64Svc, binary.LittleEndian.Uint32(singlestep.BreakpointInsn))
	return a.bytes(), entries, a.err
}
