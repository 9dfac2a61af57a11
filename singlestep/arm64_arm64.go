package singlestep

import (
	"encoding/binary"
	"fmt"
	"slices"
	"strings"

	"golang.org/x/arch/arm64/arm64asm"
	"golang.org/x/sys/unix"
)

// IsBreakpoint reports whether code starts with a breakpoint: a brk of
// any immediate (ours is #0; a program's own may be any).
func IsBreakpoint(code []byte) bool {
	return len(code) >= 4 && binary.LittleEndian.Uint32(code)&0xffe0001f == 0xd4200000
}

// SlotSize is the space reserved per XOL slot: the copied instruction and
// the `b` back that XOLBoosted appends, rounded up.
const SlotSize = 16

// XOLReach is how far from a probe site its slot may be: the `b` back from
// a boosted slot reaches ±128 MiB; keep well inside.
const XOLReach = 64 << 20

// emuOp is how Emulate carries out an Emulate-kind instruction; the
// pc-relative ones are simulated as the kernel's
// arch/arm64/kernel/probes/simulate-insn.c does.
type emuOp int

const (
	emuNone   emuOp = iota
	emuNop          // nop, bti, prfm literal
	emuB            // b, bl
	emuBCond        // b.cond
	emuCB           // cbz, cbnz
	emuTB           // tbz, tbnz
	emuADR          // adr, adrp
	emuLDRLit       // ldr (literal), ldrsw (literal)
	emuBR           // br, blr, ret
	emuAddImm       // add/sub (immediate), 64-bit, no flags: mov x29, sp; sub sp, sp, #n
	emuSTPPre       // stp xA, xB, [sp, #imm]!
)

// fixKind is what Fixup repairs after the out-of-line step.
type fixKind int

const (
	fixFallThrough fixKind = iota // pc moves from the slot back to the original code
	fixCall                       // blraa and kin: x30 points into the slot
	fixNone                       // pc was set by the instruction (braa, retaa)
)

// archInsn is the arm64 part of an Insn.
type archInsn struct {
	word uint32
	emu  emuOp
	fix  fixKind
}

func insnLength(code []byte) (int, error) {
	if len(code) < 4 {
		return 0, fmt.Errorf("truncated instruction")
	}
	return 4, nil
}

// Analyze decodes the instruction at the start of code (at address addr)
// and decides how to run it: the pc-relative instructions and the common
// prologue (nop, bti, add/sub of an immediate such as mov x29, sp, stp to
// a pre-decremented sp) are emulated; everything else that is safe runs
// out of line. It refuses (*UnsupportedError) what decode-insn.c refuses:
// exception generation (svc, brk, hlt, ...), exclusive loads and stores
// (the step would clear the monitor, and the store-exclusive would fail
// for ever), writes of PSTATE fields, exception returns, and SIMD loads
// of a literal.
func Analyze(code []byte, addr uint64) (*Insn, error) {
	if len(code) < 4 {
		return nil, newDecodeError(addr, code, fmt.Errorf("truncated instruction"))
	}
	if addr%4 != 0 {
		return nil, newDecodeError(addr, code, fmt.Errorf("address not 4-byte aligned"))
	}
	w := binary.LittleEndian.Uint32(code)
	in := &Insn{Addr: addr, Len: 4, Bytes: append([]byte(nil), code[:4]...), Kind: Step, Mnemonic: mnemonic(w)}
	in.arch.word = w
	if reason := refusal(w); reason != "" {
		return nil, &UnsupportedError{Addr: addr, Mnemonic: in.Mnemonic, Reason: reason}
	}
	in.arch.emu, in.arch.fix = classify(w)
	if in.arch.emu != emuNone {
		in.Kind = Emulate
	}
	return in, nil
}

// mnemonic is arm64asm's lower-case name, or .inst for a word it does not
// know (newer extensions): those still run out of line.
func mnemonic(w uint32) string {
	var b [4]byte
	binary.LittleEndian.PutUint32(b[:], w)
	inst, err := arm64asm.Decode(b[:])
	if err != nil {
		return fmt.Sprintf(".inst %#08x", w)
	}
	return strings.ToLower(inst.Op.String())
}

// refusal returns why the instruction cannot be probed, or "".
func refusal(w uint32) string {
	switch {
	case w&0xff000000 == 0xd4000000:
		return "exception generation (svc, brk, hlt, ...)"
	case w&0x3f000000 == 0x08000000 && w&(1<<23) == 0:
		// ldxr/stxr/ldaxr/stlxr/ldxp/stxp (and casp, which shares the
		// encoding space: refused with them).
		return "exclusive load/store: a single-step would clear the monitor"
	case w&0xfff8f01f == 0xd500401f:
		return "write of a PSTATE field"
	case w&0xfe000000 == 0xd6000000 && (w>>21&0xf == 4 || w>>21&0xf == 5):
		return "exception return (eret, drps)"
	case w&0x3f000000 == 0x1c000000:
		return "SIMD load of a literal"
	}
	return ""
}

// classify returns how an accepted instruction runs.
func classify(w uint32) (emuOp, fixKind) {
	switch {
	case w == 0xd503201f, w&0xffffff3f == 0xd503241f: // nop; bti {c, j, jc}
		return emuNop, fixFallThrough
	case w&0x7c000000 == 0x14000000:
		return emuB, fixFallThrough
	case w&0xff000000 == 0x54000000:
		return emuBCond, fixFallThrough
	case w&0x7e000000 == 0x34000000:
		return emuCB, fixFallThrough
	case w&0x7e000000 == 0x36000000:
		return emuTB, fixFallThrough
	case w&0x1f000000 == 0x10000000:
		return emuADR, fixFallThrough
	case w&0xff000000 == 0xd8000000: // prfm (literal)
		return emuNop, fixFallThrough
	case w&0x3b000000 == 0x18000000:
		return emuLDRLit, fixFallThrough
	case w&0xff9ffc1f == 0xd61f0000: // br, blr
		return emuBR, fixFallThrough
	case w&0xfffffc1f == 0xd65f0000: // ret
		return emuBR, fixFallThrough
	case w&0xbf800000 == 0x91000000: // add/sub (immediate), 64-bit, S=0
		return emuAddImm, fixFallThrough
	case w&0xffc003e0 == 0xa98003e0: // stp (64-bit, pre-index) based on sp
		return emuSTPPre, fixFallThrough
	case w&0xfe000000 == 0xd6000000:
		// The pointer-authenticated register branches (braa, blraa,
		// retaa, ...): they set pc themselves; blraa's link points
		// into the slot.
		if w>>21&7 == 1 {
			return emuNone, fixCall
		}
		return emuNone, fixNone
	}
	return emuNone, fixFallThrough
}

func signExtend(v uint64, bits uint) int64 {
	return int64(v<<(64-bits)) >> (64 - bits)
}

// reg reads register n as an operand where 31 is xzr.
func reg(regs *unix.PtraceRegs, n uint32) uint64 {
	if n == 31 {
		return 0
	}
	return regs.Regs[n]
}

// regSP reads register n where 31 is sp.
func regSP(regs *unix.PtraceRegs, n uint32) uint64 {
	if n == 31 {
		return regs.Sp
	}
	return regs.Regs[n]
}

func setReg(regs *unix.PtraceRegs, n uint32, v uint64) {
	if n != 31 {
		regs.Regs[n] = v
	}
}

func setRegSP(regs *unix.PtraceRegs, n uint32, v uint64) {
	if n == 31 {
		regs.Sp = v
	} else {
		regs.Regs[n] = v
	}
}

// condHolds evaluates an A64 condition code on PSTATE's NZCV.
func condHolds(cond uint32, pstate uint64) bool {
	n, z, c, v := pstate>>31&1 == 1, pstate>>30&1 == 1, pstate>>29&1 == 1, pstate>>28&1 == 1
	var r bool
	switch cond >> 1 {
	case 0:
		r = z
	case 1:
		r = c
	case 2:
		r = n
	case 3:
		r = v
	case 4:
		r = c && !z
	case 5:
		r = n == v
	case 6:
		r = n == v && !z
	case 7:
		return true // al, nv
	}
	if cond&1 == 1 {
		return !r
	}
	return r
}

// Emulate applies an Emulate-kind instruction to regs (and mem, for stp
// and ldr literal), leaving pc at the next instruction or the branch
// target.
func (in *Insn) Emulate(regs *unix.PtraceRegs, mem Memory) error {
	w, pc := in.arch.word, in.Addr
	next := pc + 4
	var btype uint64
	rt := w & 0x1f
	switch in.arch.emu {
	case emuNop:
	case emuB:
		if w&0x80000000 != 0 {
			regs.Regs[30] = pc + 4
		}
		next = pc + uint64(signExtend(uint64(w&0x3ffffff), 26)*4)
	case emuBCond:
		if condHolds(w&0xf, regs.Pstate) {
			next = pc + uint64(signExtend(uint64(w>>5&0x7ffff), 19)*4)
		}
	case emuCB:
		v := reg(regs, rt)
		if w&0x80000000 == 0 {
			v = uint64(uint32(v))
		}
		if (v == 0) == (w&(1<<24) == 0) {
			next = pc + uint64(signExtend(uint64(w>>5&0x7ffff), 19)*4)
		}
	case emuTB:
		bit := (w>>31)<<5 | (w >> 19 & 0x1f)
		set := reg(regs, rt)>>bit&1 == 1
		if set == (w&(1<<24) != 0) {
			next = pc + uint64(signExtend(uint64(w>>5&0x3fff), 14)*4)
		}
	case emuADR:
		imm := signExtend(uint64(w>>5&0x7ffff)<<2|uint64(w>>29&3), 21)
		v := pc + uint64(imm)
		if w&0x80000000 != 0 { // adrp
			v = pc&^0xfff + uint64(imm<<12)
		}
		setReg(regs, rt, v)
	case emuLDRLit:
		at := pc + uint64(signExtend(uint64(w>>5&0x7ffff), 19)*4)
		var b [8]byte
		switch w >> 30 {
		case 0: // ldr wt: zero-extended
			if err := readFull(mem, b[:4], at); err != nil {
				return err
			}
			setReg(regs, rt, uint64(binary.LittleEndian.Uint32(b[:])))
		case 1:
			if err := readFull(mem, b[:], at); err != nil {
				return err
			}
			setReg(regs, rt, binary.LittleEndian.Uint64(b[:]))
		case 2: // ldrsw
			if err := readFull(mem, b[:4], at); err != nil {
				return err
			}
			setReg(regs, rt, uint64(int64(int32(binary.LittleEndian.Uint32(b[:])))))
		}
	case emuBR:
		next = reg(regs, w>>5&0x1f)
		switch n := w >> 5 & 0x1f; {
		case w>>21&3 == 1: // blr
			regs.Regs[30] = pc + 4
			btype = 0b10
		case w>>21&3 == 0 && (n == 16 || n == 17): // br x16, br x17
			btype = 0b01
		case w>>21&3 == 0: // br: as from a guarded page, the strictest
			btype = 0b11
		}
	case emuAddImm:
		imm := uint64(w >> 10 & 0xfff)
		if w&(1<<22) != 0 {
			imm <<= 12
		}
		v := regSP(regs, w>>5&0x1f)
		if w&(1<<30) != 0 {
			v -= imm
		} else {
			v += imm
		}
		setRegSP(regs, rt, v)
	case emuSTPPre:
		sp := regs.Sp + uint64(signExtend(uint64(w>>15&0x7f), 7)*8)
		var b [16]byte
		binary.LittleEndian.PutUint64(b[:8], reg(regs, rt))
		binary.LittleEndian.PutUint64(b[8:], reg(regs, w>>10&0x1f))
		if err := writeFull(mem, b[:], sp); err != nil {
			return err
		}
		regs.Sp = sp
	default:
		return &UnsupportedError{Addr: in.Addr, Mnemonic: in.Mnemonic, Reason: "not emulated; run it out of line"}
	}
	regs.Pc = next
	// PSTATE.BTYPE, which the instruction leaves as a BTI-guarded page
	// checks it at the next one: 0 but after an indirect branch. (A brk
	// trap keeps the BTYPE the branch to it set, so that a bti turned
	// into a brk and emulated would otherwise fault at the next word.)
	regs.Pstate = regs.Pstate&^(3<<10) | btype<<10
	return nil
}

// isPCRelative reports whether the instruction's effect depends on where
// it runs: those must be emulated, never run out of line.
func (a *archInsn) isPCRelative() bool {
	switch a.emu {
	case emuB, emuBCond, emuCB, emuTB, emuADR, emuLDRLit:
		return true
	}
	return false
}

// XOL returns the bytes to place in an XOL slot so that single-stepping
// them there has the effect of the original: the instruction itself (no
// arm64 instruction has an operand to re-base; the pc-relative ones are
// refused: Emulate them).
func (in *Insn) XOL(slotAddr uint64) ([]byte, error) {
	if in.arch.isPCRelative() {
		return nil, &UnsupportedError{Addr: in.Addr, Mnemonic: in.Mnemonic, Reason: "pc-relative instruction cannot run out of line; emulate it"}
	}
	return append([]byte(nil), in.Bytes...), nil
}

// Fixup runs after the slot copy was single-stepped: pc at slotAddr+4
// becomes in.Addr+4; a blraa's link register at slotAddr+4 becomes
// in.Addr+4; after braa or retaa pc stays.
func (in *Insn) Fixup(regs *unix.PtraceRegs, mem Memory, slotAddr uint64) error {
	if in.arch.isPCRelative() {
		return &UnsupportedError{Addr: in.Addr, Mnemonic: in.Mnemonic, Reason: "pc-relative instruction cannot run out of line; emulate it"}
	}
	switch in.arch.fix {
	case fixFallThrough:
		if regs.Pc != slotAddr+4 {
			return &FixupError{Addr: in.Addr, Slot: slotAddr, Detail: fmt.Sprintf("pc %#x is not the slot's fall-through address %#x", regs.Pc, slotAddr+4)}
		}
		regs.Pc = in.Addr + 4
	case fixCall:
		if regs.Regs[30] != slotAddr+4 {
			return &FixupError{Addr: in.Addr, Slot: slotAddr, Detail: fmt.Sprintf("x30 %#x is not the slot's %#x", regs.Regs[30], slotAddr+4)}
		}
		regs.Regs[30] = in.Addr + 4
	}
	return nil
}

// RegistersOnly reports whether Emulate changes registers only (all but
// stp and ldr literal).
func (in *Insn) RegistersOnly() bool {
	return in.arch.emu != emuNone && in.arch.emu != emuSTPPre && in.arch.emu != emuLDRLit
}

// CanBoost reports whether the instruction can run out of line without a
// single-step, followed by a `b` back (XOLBoosted): what falls through.
func (in *Insn) CanBoost() bool {
	return !in.arch.isPCRelative() && in.arch.fix == fixFallThrough
}

// Form says which pc-relative instruction or register branch the
// instruction is, which a copy elsewhere must rebuild.
func (in *Insn) Form() Form {
	switch in.arch.emu {
	case emuB:
		return FormB
	case emuBCond:
		return FormBCond
	case emuCB:
		return FormCB
	case emuTB:
		return FormTB
	case emuADR:
		return FormADR
	case emuLDRLit:
		return FormLDRLit
	case emuBR:
		return FormBR
	}
	return FormPlain
}

// FallsThrough reports whether the instruction's copy (XOL), run
// anywhere, does what the original does and goes on to what follows the
// copy: not pc-relative, not a branch or return.
func (in *Insn) FallsThrough() bool {
	return in.arch.fix == fixFallThrough && !in.arch.isPCRelative() && in.arch.emu != emuBR
}

// jumpBack is the `b to` at from, false beyond ±128 MiB.
func jumpBack(from, to uint64) ([]byte, bool) {
	w, err := BranchTo(from, to)
	return binary.LittleEndian.AppendUint32(nil, w), err == nil
}

// BranchTo encodes `b to` placed at from.
func BranchTo(from, to uint64) (uint32, error) {
	d := int64(to-from) / 4
	if d < -(1<<25) || d >= 1<<25 {
		return 0, fmt.Errorf("%#x is beyond a b's ±128 MiB from %#x", to, from)
	}
	return 0x14000000 | uint32(d)&0x3ffffff, nil
}

// String returns the address and the disassembly, as objdump prints it.
func (in *Insn) String() string {
	inst, err := arm64asm.Decode(in.Bytes)
	if err != nil {
		return fmt.Sprintf("%#x: %s", in.Addr, in.Mnemonic)
	}
	return fmt.Sprintf("%#x: %s", in.Addr, arm64asm.GNUSyntax(inst))
}

// ReturnsPopping is false on arm64: no return pops its caller's stack.
func ReturnsPopping(code []byte, addr uint64, n uint64) bool { return false }

// SweepRunOn is 0: each word is decoded alone, no decoding runs on.
const SweepRunOn = 0

// SweepBranches returns every direct branch in a stretch of code at addr:
// every aligned word is an instruction, so entries (needed where
// instructions have many lengths) change nothing.
func SweepBranches(code []byte, addr uint64, entries []uint64) []Branch {
	var out []Branch
	for off := (4 - addr%4) % 4; off+4 <= uint64(len(code)); off += 4 {
		pc := addr + off
		w := binary.LittleEndian.Uint32(code[off:])
		var disp int64
		switch emu, _ := classify(w); emu {
		case emuB:
			disp = signExtend(uint64(w&0x3ffffff), 26) * 4
		case emuBCond, emuCB:
			disp = signExtend(uint64(w>>5&0x7ffff), 19) * 4
		case emuTB:
			disp = signExtend(uint64(w>>5&0x3fff), 14) * 4
		default:
			continue
		}
		out = append(out, Branch{From: pc, To: pc + uint64(disp)})
	}
	return out
}

// SignCode is pacia1716 then pacib1716, each followed by a brk: x17
// signed with modifier x16 by key A, or by key B, as paciasp and pacibsp
// sign x30 with sp. They are hints: nops on a core without pointer
// authentication. (The brk is where a thread stepped through one traps
// if the tracer dies before it has the thread back: tracee.Guard.)
var SignCode = slices.Concat([]byte{0x1f, 0x21, 0x03, 0xd5}, BreakpointInsn, []byte{0x5f, 0x21, 0x03, 0xd5}, BreakpointInsn)
