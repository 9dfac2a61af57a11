package probe

import "golang.org/x/sys/unix"

// sigreturnCode is the code a signal handler returns through (the vDSO's
// __kernel_rt_sigreturn, glibc's and musl's alike: mov x8, #139; svc #0).
var sigreturnCode = [][]byte{{0x68, 0x11, 0x80, 0xd2, 0x01, 0x00, 0x00, 0xd4}}

// sigframePC: on arm64 the return address is a register (x30), saved
// wherever the handler's prologue puts it: no fixed place from it to the
// frame's pc. Any handler on a stack keeps the pages.
const sigframePC = -1

// sigContextFromCFA is where a signal frame's registers start from the
// CFA of the handler it returns from, which is the sp the handler was
// entered with, the frame's start (struct rt_sigframe): siginfo (128
// bytes), then ucontext's flags, link, stack, mask and padding up to its
// sigcontext (176), whose fault address comes before x0.
const sigContextFromCFA = 128 + 176 + 8

// sigframeRegPtrs are r's registers in a signal frame's order: x0-x30,
// sp, pc, pstate.
func sigframeRegPtrs(r *unix.PtraceRegs) []*uint64 {
	ptrs := make([]*uint64, 0, 34)
	for i := range r.Regs {
		ptrs = append(ptrs, &r.Regs[i])
	}
	return append(ptrs, &r.Sp, &r.Pc, &r.Pstate)
}

// goG is the g of a thread of a Go program with registers regs: arm64's
// Go code keeps it in x28 (in the runtime's code too; a cgo program's C
// threads have anything there, which goStackTop's checks turn down).
func (t *Tracer) goG(regs *unix.PtraceRegs) (uint64, bool) {
	return regs.Regs[28], regs.Regs[28] != 0
}
