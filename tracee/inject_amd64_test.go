package tracee

import "golang.org/x/sys/unix"

// inCallToRestart reports whether a thread held with regs is in a system
// call the kernel restarts when it resumes: rax an -ERESTART* code.
func inCallToRestart(p *Process, regs *unix.PtraceRegs) bool { return restartPending(regs) }

// sameRegs: every register is the thread's own again.
func sameRegs(a, b unix.PtraceRegs) bool { return a == b }
