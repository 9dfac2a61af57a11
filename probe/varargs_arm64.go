package probe

import "golang.org/x/sys/unix"

// AAPCS64 (Linux: variadic arguments as any others): integers in x0-x7,
// doubles in v0-v7 (user_fpsimd_state: v0 first), the rest on the
// stack from sp.
var intArgRegs [8]struct{}

func intArgReg(r *unix.PtraceRegs, i int) uint64 { return r.Regs[i] }

const (
	vecArgRegs   = 8
	vecRegOffset = 0
)

func stackArgBase(r *unix.PtraceRegs) uint64 { return r.Sp }
