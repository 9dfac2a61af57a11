package tracee

import (
	"encoding/binary"
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"
)

// NoRestart keeps the kernel from restarting, over registers we set, a
// system call the thread was stopped in (orig_rax -1).
func NoRestart(r *unix.PtraceRegs) { r.Orig_rax = ^uint64(0) }

// SIBreakpoint is the si_code of a software breakpoint's SIGTRAP: int3
// raises it from the kernel (SI_KERNEL), not as TRAP_BRKPT.
const SIBreakpoint = 0x80

// syscallInsn is `syscall`; the CPU runs it from any address.
var syscallInsn = []byte{0x0f, 0x05}

const syscallInsnAlign = 1

// setSyscall sets regs up to run system call nr with args at insn.
func setSyscall(regs *unix.PtraceRegs, insn, nr uint64, args []uint64) {
	regs.Rax = nr
	argRegs := []*uint64{&regs.Rdi, &regs.Rsi, &regs.Rdx, &regs.R10, &regs.R8, &regs.R9}
	for i, a := range args {
		*argRegs[i] = a
	}
	regs.Rip = insn
	NoRestart(regs)
}

// restartPending reports whether a thread stopped with regs is returning
// from a system call that the kernel restarts when it resumes (rax one of
// the -ERESTART* codes, orig_rax the call).
func restartPending(regs *unix.PtraceRegs) bool {
	if int64(regs.Orig_rax) < 0 {
		return false
	}
	switch int64(regs.Rax) {
	case -512, -513, -514, -516: // ERESTARTSYS, ERESTARTNOINTR, ERESTARTNOHAND, ERESTART_RESTARTBLOCK
		return true
	}
	return false
}

// asResumed is regs as a resume without a signal would make them, for a
// handler's sigreturn to restore: a call to be restarted back at its
// syscall instruction, its number again in rax (sigreturn sets orig_rax
// to -1, so the kernel would not restart it: the program would see
// -ERESTARTSYS).
func asResumed(regs unix.PtraceRegs) unix.PtraceRegs {
	if !restartPending(&regs) {
		return regs
	}
	if int64(regs.Rax) == -516 { // ERESTART_RESTARTBLOCK
		regs.Rax = unix.SYS_RESTART_SYSCALL
	} else {
		regs.Rax = regs.Orig_rax
	}
	regs.Rip -= uint64(len(syscallInsn))
	return regs
}

func ptraceGetRegs(tid int, regs *unix.PtraceRegs) error {
	return ptracePtr(unix.PTRACE_GETREGS, tid, 0, unsafe.Pointer(regs))
}

func ptraceSetRegs(tid int, regs *unix.PtraceRegs) error {
	return ptracePtr(unix.PTRACE_SETREGS, tid, 0, unsafe.Pointer(regs))
}

// PACMask is 0: x86-64 has no pointer authentication.
func (p *Process) PACMask(tid int) uint64 { return 0 }

// FPRegsSize is the size of the floating-point registers PTRACE_GETFPREGS
// reads (FXSAVE's layout: the SSE registers xmm0-15 at 160).
const FPRegsSize = 512

// GetFPRegs reads the floating-point and SSE registers of a stopped
// thread into buf.
func (p *Process) GetFPRegs(tid int, buf *[FPRegsSize]byte) error {
	return ptracePtr(unix.PTRACE_GETFPREGS, tid, 0, unsafe.Pointer(buf))
}

// ThreadPointer returns stopped thread tid's thread pointer (its %fs
// base), where its C library keeps its thread-local variables; regs are
// its general registers, which hold it on x86-64.
func (p *Process) ThreadPointer(tid int, regs *unix.PtraceRegs) (uint64, error) {
	return regs.Fs_base, nil
}

// setCall sets regs up to call the function at fn with integer args
// (SysV: rdi, rsi, rdx, rcx, r8, r9), returning to ret: pushed below
// the red zone, the stack aligned as a call leaves it.
func setCall(p *Process, regs *unix.PtraceRegs, fn, ret uint64, args []uint64) error {
	sp := (regs.Rsp-256)&^15 - 8
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], ret)
	if _, err := p.WriteAt(b[:], int64(sp)); err != nil {
		return fmt.Errorf("write the return address at %#x: %w", sp, err)
	}
	argRegs := []*uint64{&regs.Rdi, &regs.Rsi, &regs.Rdx, &regs.Rcx, &regs.R8, &regs.R9}
	for i, a := range args {
		*argRegs[i] = a
	}
	regs.Rsp, regs.Rip, regs.Rax = sp, fn, 0
	NoRestart(regs)
	return nil
}

// SkipSyscall makes thread tid, at a syscall-entry stop with registers
// regs, skip the system call: the kernel runs none for number -1, and the
// thread still reports its syscall-exit stop, where its result is set.
func (p *Process) SkipSyscall(tid int, regs *unix.PtraceRegs) error {
	regs.Orig_rax = ^uint64(0)
	return p.SetRegs(tid, regs)
}
