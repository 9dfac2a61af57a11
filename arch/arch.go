// Package arch describes each CPU probe knows as one value: its
// breakpoint, its registers by name and where ptrace's register set
// keeps them, its calling convention's argument registers, where a
// called function finds its return address, and its DWARF register
// numbers. The engine asks Host instead of keeping a table per CPU in
// each package; what must be code (decoding, emulation, the code
// generator) stays in the packages' _GOARCH files.
//
// Registers are named by their word in the general register set as
// PTRACE_GETREGSET's NT_PRSTATUS gives it (struct user_regs_struct,
// struct user_pt_regs): unix.PtraceRegs on the host.
package arch

import "runtime"

// Reg is a register as %NAME reads it: (word >> Shift) cut to Bits bits.
type Reg struct {
	Word, Shift, Bits uint8
}

// Arch is one CPU.
type Arch struct {
	Name string // as GOARCH says it

	// Breakpoint is the software breakpoint probes write; the pc of its
	// SIGTRAP is BreakpointPCAdjust past its address.
	Breakpoint         []byte
	BreakpointPCAdjust uint64

	Words int            // of the general register set
	Regs  map[string]Reg // every name %REG accepts
	// The words of the program counter, the stack pointer, the frame
	// pointer, a function's result and its second word, and the flags.
	PC, SP, FP, Result, Result2, Flags uint8

	ArgRegs        []uint8 // a function's integer arguments, in order
	SyscallArgRegs []uint8 // a system call's, at its entry
	// SyscallNr holds the number of the system call a thread is stopped
	// in, kept across the call (orig_rax, which is -1 outside one; x8).
	SyscallNr uint8
	// FirstStackArg is the stack word, at a function's entry, of its
	// first argument not in a register.
	FirstStackArg uint64

	// LinkRegister: a call leaves the return address in register LR;
	// else on the stack, at sp at the callee's entry.
	LinkRegister bool
	LR           uint8

	Dwarf Dwarf
}

// Dwarf is a CPU's DWARF register numbers.
type Dwarf struct {
	Regs       map[int]uint8 // the general registers: DWARF number -> word
	PC, SP, FP int
	// Return is the return address column: the link register, or the
	// program counter's where a call pushes it.
	Return int
	// Vector0 is the first SIMD register (where C passes floating-point
	// arguments), Vectors how many there are, VectorsAt their byte
	// offset in the FP register set (PTRACE_GETFPREGS, NT_PRFPREG), 16
	// bytes each.
	Vector0, Vectors, VectorsAt int
}

// Host is the CPU probe runs on, which is the tracee's.
var Host = ByName(runtime.GOARCH)

// ByName returns the CPU GOARCH calls name, or nil.
func ByName(name string) *Arch {
	for _, a := range []*Arch{AMD64, ARM64} {
		if a.Name == name {
			return a
		}
	}
	return nil
}
