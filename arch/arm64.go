package arch

import "strconv"

// ARM64 is AArch64 (struct user_pt_regs: x0-x30, sp, pc, pstate; AAPCS64).
var ARM64 = &Arch{
	Name: "arm64",
	// brk #0, as gdb uses: brk #0x5 is the kernel's uprobes
	// immediate, and in a process that also has a kernel uprobe, a #0x5
	// that is not the kernel's raises SIGTRAP as SI_KERNEL, not
	// TRAP_BRKPT. It leaves pc at the brk.
	Breakpoint:         []byte{0x00, 0x00, 0x20, 0xd4},
	BreakpointPCAdjust: 0,

	Words:  34,
	Regs:   arm64Regs(),
	PC:     32,
	SP:     31,
	FP:     29,
	Result: 0, Result2: 1,
	Flags: 33,

	ArgRegs:        []uint8{0, 1, 2, 3, 4, 5, 6, 7},
	SyscallArgRegs: []uint8{0, 1, 2, 3, 4, 5},
	SyscallNr:      8,
	FirstStackArg:  0,

	LinkRegister: true,
	LR:           30,

	Dwarf: Dwarf{
		// DWARF for the Arm 64-bit Architecture: 0-30 x0-x30, 31 sp,
		// 32 pc, 64-95 v0-v31.
		Regs:    arm64DwarfRegs(),
		PC:      32,
		SP:      31,
		FP:      29,
		Return:  30,
		Vector0: 64, Vectors: 32, VectorsAt: 0, // struct user_fpsimd_state
	},
}

// arm64Regs is every name %REG accepts: the kernel's names
// (arch/arm64/kernel/ptrace.c regoffset_table: x0-x30, sp, pc, pstate),
// the 32-bit halves w0-w30, and lr and fp for x30 and x29.
func arm64Regs() map[string]Reg {
	m := map[string]Reg{}
	for i := range 31 {
		n := strconv.Itoa(i)
		m["x"+n] = Reg{uint8(i), 0, 64}
		m["w"+n] = Reg{uint8(i), 0, 32}
	}
	m["fp"] = m["x29"]
	m["lr"] = m["x30"]
	m["sp"] = Reg{31, 0, 64}
	m["pc"] = Reg{32, 0, 64}
	m["pstate"] = Reg{33, 0, 64}
	return m
}

func arm64DwarfRegs() map[int]uint8 {
	m := map[int]uint8{}
	for i := range 33 {
		m[i] = uint8(i) // x0-x30, sp, pc
	}
	return m
}
