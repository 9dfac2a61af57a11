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
// (ssbs_thread_switch), whatever the registers said. And a sleep held
// at its svc may come back as restart_syscall in x8: settleRestart makes
// it so, that it resumes the rest of its time as the kernel would have
// (TestInjectSyscallUnderSignals failed 11 of 40 runs in the guest taking
// that for registers not put back).
func sameRegs(a, b unix.PtraceRegs) bool {
	const kept = 1<<21 | 1<<12 | 3<<10
	a.Pstate &^= kept
	b.Pstate &^= kept
	sleep := func(nr uint64) bool { return nr == unix.SYS_NANOSLEEP || nr == unix.SYS_CLOCK_NANOSLEEP }
	if a.Regs[8] == unix.SYS_RESTART_SYSCALL && sleep(b.Regs[8]) || b.Regs[8] == unix.SYS_RESTART_SYSCALL && sleep(a.Regs[8]) {
		a.Regs[8] = b.Regs[8]
	}
	return a == b
}
