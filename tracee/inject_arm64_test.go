package tracee

import (
	"bytes"

	"golang.org/x/sys/unix"
)

// inCallToRestart reports whether a thread held with regs is in a sleep
// the kernel restarts when it resumes: arm64 rewinds it before the stop,
// pc back at the svc and x8 the call (or restart_syscall).
func inCallToRestart(p *Process, regs *unix.PtraceRegs) bool {
	var insn [4]byte
	if _, err := p.ReadAt(insn[:], int64(regs.PC())); err != nil || !bytes.Equal(insn[:], syscallInsn) {
		return false
	}
	switch SyscallNr(regs) {
	case unix.SYS_NANOSLEEP, unix.SYS_CLOCK_NANOSLEEP, unix.SYS_RESTART_SYSCALL:
		return true
	}
	return false
}

// sameRegs: every register is the thread's own again, but for three
// PSTATE fields the kernel keeps: SS while the task single-steps (set on
// every SETREGSET until the next PTRACE_CONT clears it), BTYPE, which a
// step clears (the next instruction is then not checked as a branch
// target: more lenient, never a fault), and SSBS, which on a core without
// it in hardware (cortex-a72) the kernel sets at every context switch
// (ssbs_thread_switch), whatever the registers said.
func sameRegs(a, b unix.PtraceRegs) bool {
	const kept = 1<<21 | 1<<12 | 3<<10
	a.Pstate &^= kept
	b.Pstate &^= kept
	return a == b
}
