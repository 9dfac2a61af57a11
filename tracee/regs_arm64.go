package tracee

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// NoRestart does nothing on arm64: the kernel rewinds a system call to be
// restarted (pc back to the svc, x0 its first argument) before it stops
// the thread for the signal, so registers put back restart it and
// registers of ours restart nothing.
func NoRestart(r *unix.PtraceRegs) {}

// SIBreakpoint is the si_code of a software breakpoint's SIGTRAP: brk
// raises TRAP_BRKPT.
const SIBreakpoint = 1

// syscallInsn is `svc #0`.
var syscallInsn = []byte{0x01, 0x00, 0x00, 0xd4}

const syscallInsnAlign = 4

// setSyscall sets regs up to run system call nr with args at insn.
func setSyscall(regs *unix.PtraceRegs, insn, nr uint64, args []uint64) {
	regs.Regs[8] = nr
	copy(regs.Regs[:6], args)
	regs.Pc = insn
}

// restartPending is false on arm64: see NoRestart.
func restartPending(regs *unix.PtraceRegs) bool { return false }

// ntPRStatus and ntPRFPReg are the regsets of the general and the
// floating-point/SIMD registers (<elf.h> NT_PRSTATUS, NT_PRFPREG); arm64
// has no PTRACE_GETREGS.
const (
	ntPRStatus = 1
	ntPRFPReg  = 2
)

// asResumed is regs as a resume without a signal would make them: as
// they are, a call to be restarted settled before (settleRestart).
func asResumed(regs unix.PtraceRegs) unix.PtraceRegs { return regs }

func ptraceGetRegs(tid int, regs *unix.PtraceRegs) error {
	iov := unix.Iovec{Base: (*byte)(unsafe.Pointer(regs)), Len: uint64(unsafe.Sizeof(*regs))}
	return ptracePtr(unix.PTRACE_GETREGSET, tid, ntPRStatus, unsafe.Pointer(&iov))
}

func ptraceSetRegs(tid int, regs *unix.PtraceRegs) error {
	iov := unix.Iovec{Base: (*byte)(unsafe.Pointer(regs)), Len: uint64(unsafe.Sizeof(*regs))}
	return ptracePtr(unix.PTRACE_SETREGSET, tid, ntPRStatus, unsafe.Pointer(&iov))
}

// ntARMPACMask is the regset of the pointer authentication masks (<elf.h>
// NT_ARM_PAC_MASK: data_mask, insn_mask).
const ntARMPACMask = 0x406

// PACMask returns the bits of a code address that hold its pointer
// authentication code, as stopped thread tid's kernel says (they depend
// on the address space's size); 0 without pointer authentication.
func (p *Process) PACMask(tid int) uint64 {
	var m [2]uint64
	iov := unix.Iovec{Base: (*byte)(unsafe.Pointer(&m[0])), Len: 16}
	if ptracePtr(unix.PTRACE_GETREGSET, tid, ntARMPACMask, unsafe.Pointer(&iov)) != nil {
		return 0
	}
	return m[1]
}

// FPRegsSize is the size of struct user_fpsimd_state: v0-v31, 16 bytes
// each, then fpsr and fpcr.
const FPRegsSize = 528

// GetFPRegs reads the SIMD and floating-point registers of a stopped
// thread into buf.
func (p *Process) GetFPRegs(tid int, buf *[FPRegsSize]byte) error {
	iov := unix.Iovec{Base: &buf[0], Len: FPRegsSize}
	return ptracePtr(unix.PTRACE_GETREGSET, tid, ntPRFPReg, unsafe.Pointer(&iov))
}

// ntARMTLS is the regset of the thread pointer (<elf.h> NT_ARM_TLS:
// tpidr_el0, then tpidr2_el0 where SME has it).
const ntARMTLS = 0x401

// ThreadPointer returns stopped thread tid's thread pointer (tpidr_el0),
// where its C library keeps its thread-local variables; regs are its
// general registers, which do not hold it on arm64.
func (p *Process) ThreadPointer(tid int, regs *unix.PtraceRegs) (uint64, error) {
	var tp [2]uint64
	iov := unix.Iovec{Base: (*byte)(unsafe.Pointer(&tp[0])), Len: 8}
	if err := ptracePtr(unix.PTRACE_GETREGSET, tid, ntARMTLS, unsafe.Pointer(&iov)); err != nil {
		return 0, err
	}
	return tp[0], nil
}

// setCall sets regs up to call the function at fn with integer args
// (AAPCS64: x0-x7), returning to ret (the link register), sp below
// anything live and aligned; PSTATE.BTYPE clear, as after a bl.
func setCall(p *Process, regs *unix.PtraceRegs, fn, ret uint64, args []uint64) error {
	const btype = 3 << 10
	copy(regs.Regs[:8], args)
	regs.Regs[30], regs.Sp, regs.Pc = ret, (regs.Sp-256)&^15, fn
	regs.Pstate &^= btype
	return nil
}

// ntARMSystemCall is the regset of the system call number the kernel
// runs (<elf.h> NT_ARM_SYSTEM_CALL): not among the general registers.
const ntARMSystemCall = 0x404

// SkipSyscall makes thread tid, at a syscall-entry stop, skip the system
// call: the kernel runs none for number -1, and the thread still reports
// its syscall-exit stop, where its result is set.
func (p *Process) SkipSyscall(tid int, regs *unix.PtraceRegs) error {
	nr := int32(-1)
	iov := unix.Iovec{Base: (*byte)(unsafe.Pointer(&nr)), Len: 4}
	return ptracePtr(unix.PTRACE_SETREGSET, tid, ntARMSystemCall, unsafe.Pointer(&iov))
}
