package singlestep

import (
	"encoding/binary"
	"fmt"
	"slices"
	"strings"

	"golang.org/x/arch/x86/x86asm"
	"golang.org/x/sys/unix"
)

// IsBreakpoint reports whether code starts with a breakpoint: int3.
func IsBreakpoint(code []byte) bool { return len(code) > 0 && code[0] == 0xcc }

// SlotSize is the space reserved per XOL slot: the longest instruction (15
// bytes) plus the 5-byte jmp back appended by XOLBoosted, rounded up.
const SlotSize = 32

// emuOp is how Emulate carries out an Emulate-kind instruction.
type emuOp int

const (
	emuNone emuOp = iota
	emuNop
	emuPush   // push reg64
	emuPop    // pop reg64
	emuMovReg // mov reg64, reg64
	emuAddRSP // add rsp, imm
	emuSubRSP // sub rsp, imm
	emuJmp    // jmp rel
	emuJcc    // jcc rel
	emuCall   // call rel32
	emuRet    // ret, ret imm16
	emuLoop   // loop, loope, loopne, jrcxz (rel8, counter rcx)
)

// fixKind is what Fixup repairs after the out-of-line step.
type fixKind int

const (
	fixFallThrough fixKind = iota // rip moves from the slot back to the original code
	fixCall                       // indirect call: the pushed return address points into the slot
	fixNone                       // rip was set by the instruction (indirect jmp, ret)
)

// archInsn is the amd64 part of an Insn.
type archInsn struct {
	inst       x86asm.Inst
	layout     x86Layout
	ripDispOff int // offset of the rip-relative disp32 in Bytes, -1 if none

	emu  emuOp
	dst  x86asm.Reg // push/pop/mov operand register (mov: destination)
	src  x86asm.Reg // mov source register
	imm  int64      // add/sub immediate, ret pop count
	rel  int64      // branch displacement, from Addr+Len
	cond byte       // jcc condition (low nibble of the opcode); loop variant

	fix        fixKind
	pushesFlag bool // pushf: the pushed copy carries the trap flag of the step
	repString  bool // rep-prefixed string instruction: may stop mid-way
}

// Analyze decodes the instruction at the start of code (at address addr)
// and decides how to run it: Emulate for nops, endbr, push/pop of a
// register, mov between 64-bit registers, add/sub of an immediate to rsp
// and all relative branches, calls and returns; Step for everything else
// that is safe to run out of line. It refuses (*UnsupportedError) system
// calls, interrupts, privileged, I/O, far and transactional instructions,
// 16-bit branches and jmp/call with segment overrides, and reports bytes
// that do not decode as *DecodeError.
func Analyze(code []byte, addr uint64) (*Insn, error) {
	inst, mnemonic, err := decodeX86(code)
	if err != nil {
		return nil, newDecodeError(addr, code, err)
	}
	raw := code[:inst.Len]
	layout, err := parseLayout(raw)
	if err != nil {
		return nil, newDecodeError(addr, code, err)
	}
	in := &Insn{
		Addr:     addr,
		Len:      inst.Len,
		Bytes:    slices.Clone(raw),
		Mnemonic: mnemonic,
		arch:     archInsn{inst: inst, layout: layout, ripDispOff: -1},
	}
	refuse := func(reason string) (*Insn, error) {
		return nil, &UnsupportedError{Addr: addr, Mnemonic: mnemonic, Reason: reason}
	}
	if reason := refusal(&inst, &layout); reason != "" {
		return refuse(reason)
	}
	off, err := locateRIPRelative(raw, &inst, &layout)
	if err != nil {
		return refuse(err.Error())
	}
	a := &in.arch
	a.ripDispOff = off
	a.fix, a.pushesFlag, a.repString = stepFixup(&inst, &layout)

	in.Kind = Step
	emu, reason := emulation(in)
	if reason != "" {
		return refuse(reason)
	}
	if emu {
		in.Kind = Emulate
	}
	return in, nil
}

// refusedOps are instructions that must not be run at a probe site: they
// enter the kernel, trap by design, are privileged (they would fault in
// user mode anyway), or their effect depends on where they run in ways a
// copy cannot reproduce.
var refusedOps = map[x86asm.Op]string{
	x86asm.SYSCALL:  "system call",
	x86asm.SYSENTER: "system call",
	x86asm.SYSEXIT:  "privileged instruction",
	x86asm.SYSRET:   "privileged instruction",
	x86asm.INT:      "software interrupt",
	x86asm.INTO:     "software interrupt",
	x86asm.ICEBP:    "software interrupt",
	x86asm.IRET:     "interrupt return",
	x86asm.IRETD:    "interrupt return",
	x86asm.IRETQ:    "interrupt return",
	x86asm.IN:       "port I/O",
	x86asm.OUT:      "port I/O",
	x86asm.INSB:     "port I/O",
	x86asm.INSW:     "port I/O",
	x86asm.INSD:     "port I/O",
	x86asm.OUTSB:    "port I/O",
	x86asm.OUTSW:    "port I/O",
	x86asm.OUTSD:    "port I/O",
	x86asm.HLT:      "privileged instruction",
	x86asm.CLI:      "privileged instruction",
	x86asm.STI:      "privileged instruction",
	x86asm.CLTS:     "privileged instruction",
	x86asm.INVD:     "privileged instruction",
	x86asm.WBINVD:   "privileged instruction",
	x86asm.INVLPG:   "privileged instruction",
	x86asm.INVPCID:  "privileged instruction",
	x86asm.WRMSR:    "privileged instruction",
	x86asm.RDMSR:    "privileged instruction",
	x86asm.SWAPGS:   "privileged instruction",
	x86asm.RSM:      "privileged instruction",
	x86asm.XSETBV:   "privileged instruction",
	x86asm.MONITOR:  "privileged instruction",
	x86asm.MWAIT:    "privileged instruction",
	x86asm.UD0:      "undefined instruction",
	x86asm.UD1:      "undefined instruction",
	x86asm.UD2:      "undefined instruction",
	x86asm.XBEGIN:   "transactional memory",
	x86asm.XABORT:   "transactional memory",
	x86asm.XEND:     "transactional memory",
	x86asm.LCALL:    "far control transfer",
	x86asm.LJMP:     "far control transfer",
	x86asm.LRET:     "far control transfer",
}

// group7UserOps are the 0f 01 instructions user code runs; the rest of
// that group (lgdt, lidt, smsw, vmcall, ...) are system instructions.
var group7UserOps = map[x86asm.Op]bool{
	x86asm.RDTSCP: true,
	x86asm.XGETBV: true,
	x86asm.XTEST:  true,
}

// refusal returns why the instruction cannot be probed, or "".
func refusal(inst *x86asm.Inst, l *x86Layout) string {
	if reason, ok := refusedOps[inst.Op]; ok {
		return reason
	}
	for _, p := range inst.Prefix {
		if p&x86asm.PrefixInvalid != 0 {
			return "invalid prefix (raises #UD)"
		}
	}
	if l.vex == 0 && l.opMap == map0F {
		switch {
		case l.opcode == 0x00:
			return "system instruction"
		case l.opcode == 0x01 && !group7UserOps[inst.Op]:
			return "system instruction"
		}
	}
	if l.vex == 0 && l.opMap == mapOneByte && l.opcode == 0x8e {
		// mov to ss would also hold off the single-step trap.
		return "loads a segment register"
	}
	for _, a := range inst.Args {
		if r, ok := a.(x86asm.Reg); ok && (x86asm.CR0 <= r && r <= x86asm.CR15 || x86asm.DR0 <= r && r <= x86asm.DR15 || x86asm.TR0 <= r && r <= x86asm.TR7) {
			return "privileged instruction"
		}
	}
	_, isRel := inst.Args[0].(x86asm.Rel)
	switch inst.Op {
	case x86asm.JMP, x86asm.CALL, x86asm.RET:
		if l.hasLegacy(0x66) {
			// Intel and AMD disagree on 16-bit near branches in 64-bit mode.
			return "16-bit operand size"
		}
		if inst.Op != x86asm.RET && !isRel && !l.legacyOnlyFrom(0xf2, 0x3e) {
			// f2 (bnd) and 3e (notrack, emitted for CET jump tables) are harmless.
			return "segment override or other unexpected prefix on indirect jmp/call"
		}
	case x86asm.LOOP, x86asm.LOOPE, x86asm.LOOPNE, x86asm.JRCXZ, x86asm.JECXZ:
		if l.hasLegacy(0x67) {
			return "32-bit address size"
		}
	}
	if isRel {
		if l.hasLegacy(0x66) {
			return "16-bit operand size"
		}
		// Relative branches are emulated; any prefix beyond bnd, rep and the
		// branch hints would be one whose effect emulation ignores.
		if !l.legacyOnlyFrom(0xf2, 0xf3, 0x2e, 0x3e) {
			return "unexpected prefix on relative branch"
		}
	}
	return ""
}

// stepFixup decides what Fixup repairs after the instruction ran from a slot.
func stepFixup(inst *x86asm.Inst, l *x86Layout) (fix fixKind, pushesFlag, repString bool) {
	_, isRel := inst.Args[0].(x86asm.Rel)
	switch {
	case inst.Op == x86asm.CALL && !isRel:
		fix = fixCall
	case inst.Op == x86asm.JMP && !isRel, inst.Op == x86asm.RET:
		fix = fixNone
	}
	switch inst.Op {
	case x86asm.PUSHF, x86asm.PUSHFQ:
		pushesFlag = true
	case x86asm.MOVSB, x86asm.MOVSW, x86asm.MOVSD, x86asm.MOVSQ,
		x86asm.STOSB, x86asm.STOSW, x86asm.STOSD, x86asm.STOSQ,
		x86asm.LODSB, x86asm.LODSW, x86asm.LODSD, x86asm.LODSQ,
		x86asm.SCASB, x86asm.SCASW, x86asm.SCASD, x86asm.SCASQ,
		x86asm.CMPSB, x86asm.CMPSW, x86asm.CMPSD, x86asm.CMPSQ:
		repString = l.hasLegacy(0xf3) || l.hasLegacy(0xf2)
	}
	return fix, pushesFlag, repString
}

// emulation decides whether the instruction is emulated and fills in the
// emulation fields. A non-empty reason refuses the instruction: a relative
// branch that cannot be emulated cannot run out of line either.
func emulation(in *Insn) (emulate bool, reason string) {
	a := &in.arch
	inst, l := &a.inst, &a.layout
	plain := len(l.legacy) == 0 // prefixes on simple ops: leave the verdict to the CPU
	arg := func(i int) x86asm.Arg { return inst.Args[i] }
	reg64 := func(x x86asm.Arg) (x86asm.Reg, bool) {
		r, ok := x.(x86asm.Reg)
		return r, ok && x86asm.RAX <= r && r <= x86asm.R15
	}
	if rel, ok := arg(0).(x86asm.Rel); ok {
		a.rel = int64(rel)
		switch inst.Op {
		case x86asm.JMP:
			a.emu = emuJmp
		case x86asm.CALL:
			a.emu = emuCall
		case x86asm.JO, x86asm.JNO, x86asm.JB, x86asm.JAE, x86asm.JE, x86asm.JNE, x86asm.JBE, x86asm.JA,
			x86asm.JS, x86asm.JNS, x86asm.JP, x86asm.JNP, x86asm.JL, x86asm.JGE, x86asm.JLE, x86asm.JG:
			a.emu, a.cond = emuJcc, l.opcode&0x0f
		case x86asm.LOOP, x86asm.LOOPE, x86asm.LOOPNE, x86asm.JRCXZ:
			a.emu, a.cond = emuLoop, l.opcode
		default:
			return false, "relative branch that cannot run out of line"
		}
		return true, ""
	}
	switch inst.Op {
	case x86asm.NOP:
		if !l.hasLegacy(0xf0) {
			a.emu = emuNop
		}
	case x86asm.PUSH:
		if r, ok := reg64(arg(0)); ok && plain {
			a.emu, a.dst = emuPush, r
		}
	case x86asm.POP:
		if r, ok := reg64(arg(0)); ok && plain {
			a.emu, a.dst = emuPop, r
		}
	case x86asm.MOV:
		d, ok1 := reg64(arg(0))
		s, ok2 := reg64(arg(1))
		if ok1 && ok2 && plain {
			a.emu, a.dst, a.src = emuMovReg, d, s
		}
	case x86asm.ADD, x86asm.SUB:
		imm, isImm := arg(1).(x86asm.Imm)
		if arg(0) == x86asm.RSP && isImm && inst.DataSize == 64 && plain {
			a.emu, a.imm = emuAddRSP, int64(imm)
			if inst.Op == x86asm.SUB {
				a.emu = emuSubRSP
			}
		}
	case x86asm.RET:
		if l.legacyOnlyFrom(0xf2, 0xf3) {
			a.emu = emuRet
			if imm, ok := arg(0).(x86asm.Imm); ok {
				a.imm = int64(uint16(imm))
			}
		}
	}
	return a.emu != emuNone, ""
}

func (a *archInsn) isRelBranch() bool {
	switch a.emu {
	case emuJmp, emuJcc, emuCall, emuLoop:
		return true
	}
	return false
}

// XOL returns the bytes to place in an XOL slot at slotAddr so that
// single-stepping them there has the effect of the original at in.Addr:
// the original bytes, with a rip-relative displacement re-based to reach
// the same absolute address (*OutOfRangeError if it cannot). The result is
// in.Len bytes long; the rest of the slot is the caller's (int3 filler is a
// good choice). Relative branches are refused: Emulate them. Every other
// instruction Analyze accepts, Emulate kind included, can run out of line.
func (in *Insn) XOL(slotAddr uint64) ([]byte, error) {
	if in.arch.isRelBranch() {
		return nil, &UnsupportedError{Addr: in.Addr, Mnemonic: in.Mnemonic, Reason: "relative branch cannot run out of line; emulate it"}
	}
	out := slices.Clone(in.Bytes)
	if off := in.arch.ripDispOff; off >= 0 {
		disp := int64(int32(binary.LittleEndian.Uint32(out[off:])))
		target := in.Addr + uint64(in.Len) + uint64(disp)
		newDisp, ok := rel32(slotAddr+uint64(in.Len), target)
		if !ok {
			return nil, &OutOfRangeError{Addr: in.Addr, Slot: slotAddr, Target: target}
		}
		binary.LittleEndian.PutUint32(out[off:], uint32(newDisp))
	}
	return out, nil
}

// rel32 returns the displacement from "from" to "to" if it fits in int32.
func rel32(from, to uint64) (int32, bool) {
	d := int64(to - from)
	return int32(d), d == int64(int32(d))
}

// Fixup runs after the slot copy (from XOL) was single-stepped; regs are
// the tracee's registers at the step trap. It leaves the state as if the
// original had run at in.Addr: rip at slotAddr+Len becomes in.Addr+Len; an
// indirect call's pushed return address slotAddr+Len becomes in.Addr+Len
// (rip, the call target, stays); after an indirect jmp or ret rip stays.
// pushf's pushed copy loses the trap flag the step put there.
//
// A rep-prefixed string instruction stops after each iteration with rip
// still at slotAddr until rcx runs out; Fixup then sets rip to in.Addr, so
// the instruction resumes there (and meets its breakpoint again). Callers
// who want one hit per execution keep stepping while regs.Rip == slotAddr.
func (in *Insn) Fixup(regs *unix.PtraceRegs, mem Memory, slotAddr uint64) error {
	a := &in.arch
	if a.isRelBranch() {
		return &UnsupportedError{Addr: in.Addr, Mnemonic: in.Mnemonic, Reason: "relative branch cannot run out of line; emulate it"}
	}
	length := uint64(in.Len)
	fail := func(format string, args ...any) error {
		return &FixupError{Addr: in.Addr, Slot: slotAddr, Detail: fmt.Sprintf(format, args...)}
	}
	switch a.fix {
	case fixFallThrough:
		switch {
		case regs.Rip == slotAddr+length:
		case regs.Rip == slotAddr && a.repString:
		default:
			return fail("rip %#x is not the slot's fall-through address %#x", regs.Rip, slotAddr+length)
		}
		if a.pushesFlag {
			// TF is bit 8 of the pushed flags image: bit 0 of its second byte.
			addr := regs.Rsp + 1
			var b [1]byte
			if err := readFull(mem, b[:], addr); err != nil {
				return err
			}
			b[0] &^= 1
			if err := writeFull(mem, b[:], addr); err != nil {
				return err
			}
		}
		regs.Rip = regs.Rip - slotAddr + in.Addr
	case fixCall:
		ret, err := readU64(mem, regs.Rsp)
		if err != nil {
			return err
		}
		if ret != slotAddr+length {
			return fail("return address %#x at rsp %#x is not the slot's %#x", ret, regs.Rsp, slotAddr+length)
		}
		return writeU64(mem, regs.Rsp, in.Addr+length)
	case fixNone:
	}
	return nil
}

// RegistersOnly reports whether Emulate changes registers only: no stack
// access (nops, mov between registers, add/sub to rsp, jumps). For those,
// emulation costs nothing beyond the register write the resume needs
// anyway; push, pop, call and ret need a tracee memory access, which costs
// more than running a boosted copy.
func (in *Insn) RegistersOnly() bool {
	switch in.arch.emu {
	case emuNop, emuMovReg, emuAddRSP, emuSubRSP, emuJmp, emuJcc, emuLoop:
		return true
	}
	return false
}

// CanBoost reports whether the instruction can run out of line without a
// single-step, followed by a jump back (XOLBoosted): true for what can run
// out of line except indirect calls, whose pushed return address would
// point into the slot. With boosting, a thread may still be inside the
// slot long after it hit the probe, so the slot must not be reused while
// any thread might be there.
func (in *Insn) CanBoost() bool {
	return !in.arch.isRelBranch() && in.arch.fix != fixCall
}

// Form says whether the instruction is a relative jmp, jcc or call,
// which a copy elsewhere must re-aim (Target, Cond).
func (in *Insn) Form() Form {
	switch in.arch.emu {
	case emuJmp:
		return FormJmp
	case emuJcc:
		return FormJcc
	case emuCall:
		return FormCall
	}
	switch {
	case in.callsThroughRIP():
		return FormCallMem
	case in.jumpsThroughRIP():
		return FormJmpMem
	}
	return FormPlain
}

// jumpsThroughRIP reports whether the instruction is `jmp *disp32(%rip)`
// (a bnd prefix allowed): a PLT entry's jump through its GOT slot.
func (in *Insn) jumpsThroughRIP() bool { return in.throughRIP(x86asm.JMP) }

// callsThroughRIP reports whether the instruction is `call *disp32(%rip)`
// (-mfentry's call of __fentry__ through the GOT, a PLT-less call of a
// library function).
func (in *Insn) callsThroughRIP() bool {
	return in.arch.fix == fixCall && in.throughRIP(x86asm.CALL)
}

// throughRIP reports whether the instruction is op through the pointer
// at disp32(%rip) and nothing else: no segment, no index.
func (in *Insn) throughRIP(op x86asm.Op) bool {
	if in.arch.ripDispOff < 0 || in.arch.inst.Op != op {
		return false
	}
	m, ok := in.arch.inst.Args[0].(x86asm.Mem)
	return ok && m.Base == x86asm.RIP && m.Index == 0 && m.Segment == 0
}

// MemOperand is where a FormCallMem call or FormJmpMem jump reads its
// target.
func (in *Insn) MemOperand() uint64 {
	disp := int32(binary.LittleEndian.Uint32(in.Bytes[in.arch.ripDispOff:]))
	return in.Addr + uint64(in.Len) + uint64(int64(disp))
}

// Target is where a relative branch goes.
func (in *Insn) Target() uint64 { return in.Addr + uint64(in.Len) + uint64(in.arch.rel) }

// Cond is a jcc's condition: the low nibble of its opcode.
func (in *Insn) Cond() byte { return in.arch.cond }

// FallsThrough reports whether the instruction's copy (XOL), run
// anywhere, goes on to what follows the copy: not a relative branch,
// loop, indirect call or jmp, or return.
func (in *Insn) FallsThrough() bool {
	return !in.arch.isRelBranch() && in.arch.fix == fixFallThrough
}

// jumpBack is the jmp rel32 at from to to, false if it cannot reach.
func jumpBack(from, to uint64) ([]byte, bool) {
	disp, ok := rel32(from+5, to)
	return binary.LittleEndian.AppendUint32([]byte{0xe9}, uint32(disp)), ok
}

// String returns the address and AT&T-syntax disassembly, as objdump
// prints it, e.g. "0x401126: push %rbp".
func (in *Insn) String() string {
	text := in.Mnemonic // endbr64/endbr32: unknown to x86asm
	if !strings.HasPrefix(text, "endbr") {
		text = x86asm.GNUSyntax(in.arch.inst, in.Addr, nil)
	}
	return fmt.Sprintf("%#x: %s", in.Addr, text)
}

// ReturnsPopping reports whether the function code (at addr) has a
// `ret $n`: its caller's frame is then n bytes above the return-address
// slot when it returns.
func ReturnsPopping(code []byte, addr uint64, n uint64) bool {
	starts, _ := Boundaries(code, addr)
	for _, a := range starts {
		in, err := Analyze(code[a-addr:], a)
		if err == nil && in.arch.emu == emuRet && uint64(in.arch.imm) == n {
			return true
		}
	}
	return false
}

func insnLength(code []byte) (int, error) { return x86InsnLength(code) }

// XOLReach is how far from a probe site its slot may be: rip-relative
// operands reach ±2 GiB; keep well inside.
const XOLReach = 1 << 30
