package fetch

import "strconv"

// Registers are read as words of unix.PtraceRegs (struct user_pt_regs):
// x0-x30, sp, pc, pstate.
const fetchNumRegs = 34

const (
	regResult  = 0  // x0: the return value
	regResult2 = 1  // x1: its second word
	regSP      = 31 // sp
	regPC      = 32
	regFlags   = 33 // pstate
)

// firstStackArg: at a function's entry [sp] is the first argument not in
// a register (AAPCS64; the return address is in x30).
const firstStackArg = 0

// fetchArgRegs are the AAPCS64 integer argument registers x0-x7.
var fetchArgRegs = [8]uint8{0, 1, 2, 3, 4, 5, 6, 7}

// syscallArgRegs hold a system call's arguments at its entry.
var syscallArgRegs = [6]uint8{0, 1, 2, 3, 4, 5}

// fetchRegs maps every name %REG accepts to its register: the kernel's
// arm64 names (arch/arm64/kernel/ptrace.c regoffset_table: x0-x30, sp,
// pc, pstate), the 32-bit halves w0-w30, and lr and fp for x30 and x29.
var fetchRegs = func() map[string]regDesc {
	m := map[string]regDesc{}
	for i := range 31 {
		n := strconv.Itoa(i)
		m["x"+n] = regDesc{uint8(i), 0, 64}
		m["w"+n] = regDesc{uint8(i), 0, 32}
	}
	m["fp"] = m["x29"]
	m["lr"] = m["x30"]
	m["sp"] = regDesc{regSP, 0, 64}
	m["pc"] = regDesc{regPC, 0, 64}
	m["pstate"] = regDesc{regFlags, 0, 64}
	return m
}()
