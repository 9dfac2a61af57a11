package singlestep

import (
	"math/bits"

	"golang.org/x/arch/x86/x86asm"
	"golang.org/x/sys/unix"
)

// Eflags bits.
const (
	flagCF = 1 << 0
	flagPF = 1 << 2
	flagAF = 1 << 4
	flagZF = 1 << 6
	flagSF = 1 << 7
	flagTF = 1 << 8
	flagOF = 1 << 11

	arithFlags = flagCF | flagPF | flagAF | flagZF | flagSF | flagOF
)

// Emulate applies an Emulate-kind instruction to regs, and to mem for
// those that use the stack (push, pop, call, ret); afterwards regs.Rip is
// where execution continues. mem may be nil for the others. On error
// neither regs nor memory have changed: an instruction makes at most one
// stack access, and that is what failed.
func (in *Insn) Emulate(regs *unix.PtraceRegs, mem Memory) error {
	a := &in.arch
	if in.Kind != Emulate {
		return &UnsupportedError{Addr: in.Addr, Mnemonic: in.Mnemonic, Reason: "cannot be emulated; run it out of line"}
	}
	r := *regs
	next := in.Addr + uint64(in.Len)
	r.Rip = next
	switch a.emu {
	case emuNop:
	case emuPush:
		// push %rsp pushes the value before the decrement.
		if err := push(&r, mem, *gpr(&r, a.dst)); err != nil {
			return err
		}
	case emuPop:
		v, err := readU64(mem, r.Rsp)
		if err != nil {
			return err
		}
		r.Rsp += 8
		*gpr(&r, a.dst) = v // pop %rsp: the popped value wins over the increment
	case emuMovReg:
		*gpr(&r, a.dst) = *gpr(&r, a.src)
	case emuAddRSP, emuSubRSP:
		var flags uint64
		r.Rsp, flags = addSub(r.Rsp, uint64(a.imm), a.emu == emuSubRSP)
		r.Eflags = r.Eflags&^arithFlags | flags
	case emuJmp:
		r.Rip = next + uint64(a.rel)
	case emuJcc:
		if conditionHolds(a.cond, r.Eflags) {
			r.Rip = next + uint64(a.rel)
		}
	case emuCall:
		if err := push(&r, mem, next); err != nil {
			return err
		}
		r.Rip = next + uint64(a.rel)
	case emuRet:
		v, err := readU64(mem, r.Rsp)
		if err != nil {
			return err
		}
		r.Rsp += 8 + uint64(a.imm)
		r.Rip = v
	case emuLoop:
		if loopTaken(a.cond, &r) {
			r.Rip = next + uint64(a.rel)
		}
	default:
		return &UnsupportedError{Addr: in.Addr, Mnemonic: in.Mnemonic, Reason: "no emulation"}
	}
	*regs = r
	return nil
}

func push(r *unix.PtraceRegs, mem Memory, v uint64) error {
	sp := r.Rsp - 8
	if err := writeU64(mem, sp, v); err != nil {
		return err
	}
	r.Rsp = sp
	return nil
}

// gpr returns the field of regs holding a 64-bit general register; reg is
// one of x86asm.RAX..R15 (checked by Analyze).
func gpr(regs *unix.PtraceRegs, reg x86asm.Reg) *uint64 {
	switch reg {
	case x86asm.RAX:
		return &regs.Rax
	case x86asm.RCX:
		return &regs.Rcx
	case x86asm.RDX:
		return &regs.Rdx
	case x86asm.RBX:
		return &regs.Rbx
	case x86asm.RSP:
		return &regs.Rsp
	case x86asm.RBP:
		return &regs.Rbp
	case x86asm.RSI:
		return &regs.Rsi
	case x86asm.RDI:
		return &regs.Rdi
	case x86asm.R8:
		return &regs.R8
	case x86asm.R9:
		return &regs.R9
	case x86asm.R10:
		return &regs.R10
	case x86asm.R11:
		return &regs.R11
	case x86asm.R12:
		return &regs.R12
	case x86asm.R13:
		return &regs.R13
	case x86asm.R14:
		return &regs.R14
	case x86asm.R15:
		return &regs.R15
	}
	panic("singlestep: not a 64-bit general register: " + reg.String())
}

// addSub computes a+b or a-b on 64 bits and the arithmetic flags the CPU
// sets for ADD/SUB.
func addSub(a, b uint64, sub bool) (res, flags uint64) {
	var carry, overflow bool
	if sub {
		res = a - b
		carry = a < b
		overflow = ((a^b)&(a^res))>>63 != 0 // operands differ in sign, result takes b's
	} else {
		res = a + b
		carry = res < a
		overflow = (^(a^b)&(a^res))>>63 != 0 // operands agree in sign, result does not
	}
	set := func(cond bool, f uint64) {
		if cond {
			flags |= f
		}
	}
	set(carry, flagCF)
	set(overflow, flagOF)
	set(res == 0, flagZF)
	set(res>>63 != 0, flagSF)
	set((a^b^res)&0x10 != 0, flagAF)                // carry/borrow out of bit 3
	set(bits.OnesCount8(uint8(res))%2 == 0, flagPF) // even parity of the low byte
	return res, flags
}

// conditionHolds evaluates condition code cc (the low nibble of a jcc or
// setcc opcode): bits 3..1 select the test, bit 0 negates it.
func conditionHolds(cc byte, eflags uint64) bool {
	cf := eflags&flagCF != 0
	zf := eflags&flagZF != 0
	sf := eflags&flagSF != 0
	of := eflags&flagOF != 0
	pf := eflags&flagPF != 0
	var holds bool
	switch (cc >> 1) & 7 {
	case 0: // o
		holds = of
	case 1: // b
		holds = cf
	case 2: // e
		holds = zf
	case 3: // be
		holds = cf || zf
	case 4: // s
		holds = sf
	case 5: // p
		holds = pf
	case 6: // l
		holds = sf != of
	case 7: // le
		holds = zf || sf != of
	}
	return holds != (cc&1 == 1)
}

// loopTaken applies loop/loope/loopne (which decrement rcx first, without
// touching flags) or jrcxz, by opcode, and reports whether it branches.
func loopTaken(opcode byte, r *unix.PtraceRegs) bool {
	zf := r.Eflags&flagZF != 0
	switch opcode {
	case 0xe0: // loopne
		r.Rcx--
		return r.Rcx != 0 && !zf
	case 0xe1: // loope
		r.Rcx--
		return r.Rcx != 0 && zf
	case 0xe2: // loop
		r.Rcx--
		return r.Rcx != 0
	default: // 0xe3 jrcxz
		return r.Rcx == 0
	}
}
