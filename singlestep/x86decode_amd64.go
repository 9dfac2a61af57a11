package singlestep

import (
	"bytes"
	"encoding/binary"
	"errors"

	"golang.org/x/arch/x86/x86asm"
)

// decodeX86 decodes the instruction at the start of code in 64-bit mode and
// returns it with its lower-case mnemonic (see decodeInst).
func decodeX86(code []byte) (x86asm.Inst, string, error) {
	inst, err := decodeInst(code)
	if err != nil {
		return inst, "", err
	}
	for _, e := range endbrForms {
		if bytes.HasPrefix(code, e.bytes) {
			return inst, e.mnemonic, nil
		}
	}
	return inst, mnemonicOf(&inst), nil
}

// decodeInst decodes the instruction at the start of code in 64-bit mode.
// It covers for x86asm's gaps: an undecodable instruction that begins
// with a prefix comes back as a one-byte pseudo-instruction without error;
// endbr64/endbr32 (on every function entry of CET-enabled builds) are
// unknown to it (they come back as a NOP); it measures vzeroupper/vzeroall
// one byte too long when more code follows.
func decodeInst(code []byte) (x86asm.Inst, error) {
	for _, e := range endbrForms {
		if bytes.HasPrefix(code, e.bytes) {
			return x86asm.Inst{Op: x86asm.NOP, Mode: 64, Len: len(e.bytes)}, nil
		}
		if len(code) < len(e.bytes) && bytes.HasPrefix(e.bytes, code) {
			return x86asm.Inst{}, x86asm.ErrTruncated
		}
	}
	inst, err := x86asm.Decode(code, 64)
	if err == nil && inst.Op != 0 {
		if inst.Op == x86asm.VZEROUPPER || inst.Op == x86asm.VZEROALL {
			// x86asm counts a ModRM byte these two do not have.
			if l, lerr := parseLayout(code[:inst.Len]); lerr == nil && l.modrmOff < 0 {
				inst.Len = l.opcodeOff + 1
			}
		}
		return inst, nil
	}
	// Report only x86asm's two sentinel errors (its AVX decoder has ad-hoc
	// ones). Decoding again with zero padding tells "runs past the end of
	// code" apart from "not an instruction".
	if len(code) < 15 {
		padded := append(append([]byte(nil), code...), make([]byte, 15-len(code))...)
		if p, perr := x86asm.Decode(padded, 64); perr == nil && p.Op != 0 && p.Len > len(code) {
			return x86asm.Inst{}, x86asm.ErrTruncated
		}
	}
	if errors.Is(err, x86asm.ErrTruncated) {
		return x86asm.Inst{}, x86asm.ErrTruncated
	}
	return x86asm.Inst{}, x86asm.ErrUnrecognized
}

var endbrForms = []struct {
	bytes    []byte
	mnemonic string
}{
	{[]byte{0xf3, 0x0f, 0x1e, 0xfa}, "endbr64"},
	{[]byte{0xf3, 0x0f, 0x1e, 0xfb}, "endbr32"},
}

func mnemonicOf(inst *x86asm.Inst) string {
	if inst.Op == x86asm.INT {
		if imm, ok := inst.Args[0].(x86asm.Imm); ok && imm == 3 && inst.Len == 1 {
			return "int3"
		}
	}
	return lower(inst.Op.String())
}

func lower(s string) string {
	b := []byte(s)
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}

func x86InsnLength(code []byte) (int, error) {
	inst, _, err := decodeX86(code)
	if err != nil {
		return 0, err
	}
	return inst.Len, nil
}

// Opcode maps, as selected by escape bytes or the VEX/EVEX map field.
const (
	mapOneByte = iota // no escape
	map0F             // 0f
	map0F38           // 0f 38
	map0F3A           // 0f 3a
)

// x86Layout is where the parts of an encoded instruction are. x86asm does
// not expose the ModRM offset, and it reports no rip-relative operand at
// all for VEX/EVEX encodings, so XOL relies on this parse to find the
// displacement to re-base; x86asm's view is used to cross-check it.
type x86Layout struct {
	legacy     []byte // legacy prefixes (f0 f2 f3 26 2e 36 3e 64 65 66 67), in order
	rex        byte   // REX prefix in effect, 0 if none
	vex        byte   // c5 (VEX2), c4 (VEX3), 62 (EVEX), 0 if none
	opMap      int    // mapOneByte, map0F, ...
	opcode     byte
	opcodeOff  int // offset of the (last) opcode byte
	modrmOff   int // offset of the ModRM byte, -1 if none
	ripDispOff int // offset of the rip-relative disp32, -1 if none
}

func (l *x86Layout) hasLegacy(p byte) bool { return bytes.IndexByte(l.legacy, p) >= 0 }

// legacyOnlyFrom reports whether every legacy prefix is among allowed.
func (l *x86Layout) legacyOnlyFrom(allowed ...byte) bool {
	for _, p := range l.legacy {
		if bytes.IndexByte(allowed, p) < 0 {
			return false
		}
	}
	return true
}

var errBadLayout = errors.New("malformed instruction encoding")

// parseLayout parses one complete instruction (b holds exactly its bytes,
// as measured by the decoder).
func parseLayout(b []byte) (x86Layout, error) {
	l := x86Layout{modrmOff: -1, ripDispOff: -1}
	i := 0
	for ; i < len(b); i++ {
		c := b[i]
		if isLegacyPrefix(c) {
			l.legacy = append(l.legacy, c)
			l.rex = 0 // a REX prefix counts only right before the opcode
			continue
		}
		if c&0xf0 == 0x40 {
			l.rex = c
			continue
		}
		break
	}
	need := func(n int) bool { return i+n <= len(b) }
	if !need(1) {
		return l, errBadLayout
	}
	// In 64-bit mode c4, c5 and 62 always start VEX/EVEX (LES, LDS and
	// BOUND do not exist).
	switch b[i] {
	case 0xc5:
		if !need(3) {
			return l, errBadLayout
		}
		l.vex, l.opMap = 0xc5, map0F
		i += 2
	case 0xc4:
		if !need(4) {
			return l, errBadLayout
		}
		l.vex, l.opMap = 0xc4, int(b[i+1]&0x1f)
		i += 3
	case 0x62:
		if !need(5) {
			return l, errBadLayout
		}
		l.vex, l.opMap = 0x62, int(b[i+1]&0x07)
		i += 4
	case 0x0f:
		if !need(2) {
			return l, errBadLayout
		}
		l.opMap = map0F
		i++
		switch b[i] {
		case 0x38:
			l.opMap = map0F38
			i++
		case 0x3a:
			l.opMap = map0F3A
			i++
		}
	default:
		l.opMap = mapOneByte
	}
	if l.vex != 0 && (l.opMap < map0F || l.opMap > map0F3A) {
		return l, errBadLayout // maps this parser does not know
	}
	if !need(1) {
		return l, errBadLayout
	}
	l.opcode, l.opcodeOff = b[i], i
	i++
	if !l.hasModRM() {
		return l, nil
	}
	if !need(1) {
		return l, errBadLayout
	}
	l.modrmOff = i
	// mod=00 rm=101 means disp32(%rip) in 64-bit mode: no SIB follows,
	// and REX.B/VEX.B do not change that. mov to/from control, debug and
	// test registers (0f 20-27) ignore mod: their ModRM names registers.
	regOnly := l.vex == 0 && l.opMap == map0F && 0x20 <= l.opcode && l.opcode <= 0x27
	if modrm := b[i]; modrm>>6 == 0 && modrm&7 == 5 && !regOnly {
		if !need(5) {
			return l, errBadLayout
		}
		l.ripDispOff = i + 1
	}
	return l, nil
}

func isLegacyPrefix(c byte) bool {
	switch c {
	case 0xf0, 0xf2, 0xf3, 0x26, 0x2e, 0x36, 0x3e, 0x64, 0x65, 0x66, 0x67:
		return true
	}
	return false
}

func (l *x86Layout) hasModRM() bool {
	switch {
	case l.vex == 0x62:
		return true
	case l.vex != 0:
		return !(l.opMap == map0F && l.opcode == 0x77) // vzeroupper, vzeroall
	case l.opMap == mapOneByte:
		return oneByteHasModRM[l.opcode]
	case l.opMap == map0F:
		return !twoByteLacksModRM[l.opcode]
	default: // every 0f 38 and 0f 3a opcode has a ModRM byte
		return true
	}
}

// Opcodes of the one-byte map that take a ModRM byte.
var oneByteHasModRM = byteSet(
	0x00, 0x03, 0x08, 0x0b, 0x10, 0x13, 0x18, 0x1b, // ALU r/m forms
	0x20, 0x23, 0x28, 0x2b, 0x30, 0x33, 0x38, 0x3b,
	0x63, 0x63, // movsxd
	0x69, 0x69, 0x6b, 0x6b, // imul
	0x80, 0x8f, // group 1, test, xchg, mov, lea, pop r/m
	0xc0, 0xc1, 0xc6, 0xc7, // shifts, mov imm
	0xd0, 0xd3, 0xd8, 0xdf, // shifts, x87
	0xf6, 0xf7, 0xfe, 0xff, // groups 3, 4, 5
)

// Opcodes of the 0f map that have no ModRM byte; all others have one.
var twoByteLacksModRM = byteSet(
	0x05, 0x09, // syscall, clts, sysret, invd, wbinvd
	0x0b, 0x0b, // ud2
	0x0e, 0x0e, // femms
	0x30, 0x37, // wrmsr, rdtsc, rdmsr, rdpmc, sysenter, sysexit, getsec
	0x77, 0x77, // emms
	0x80, 0x8f, // jcc rel32
	0xa0, 0xa2, // push fs, pop fs, cpuid
	0xa8, 0xaa, // push gs, pop gs, rsm
	0xc8, 0xcf, // bswap
)

// byteSet builds a membership table from inclusive ranges lo, hi, lo, hi...
func byteSet(ranges ...byte) (set [256]bool) {
	for i := 0; i+1 < len(ranges); i += 2 {
		for c := int(ranges[i]); c <= int(ranges[i+1]); c++ {
			set[c] = true
		}
	}
	return set
}

// locateRIPRelative returns the offset of the rip-relative disp32 in the
// instruction, or -1 if it has none. It insists that the layout parse and
// the decoder agree wherever the decoder has an opinion.
func locateRIPRelative(b []byte, inst *x86asm.Inst, l *x86Layout) (int, error) {
	var mem *x86asm.Mem
	for _, a := range inst.Args {
		if m, ok := a.(x86asm.Mem); ok {
			mem = &m
			break
		}
	}
	off := l.ripDispOff
	if off >= 0 && l.hasLegacy(0x67) {
		return -1, errors.New("32-bit address size: eip-relative operand")
	}
	decoderSaysRIP := mem != nil && mem.Base == x86asm.RIP
	switch {
	case off < 0 && !decoderSaysRIP:
		return -1, nil
	case off < 0:
		return -1, errors.New("decoder sees a rip-relative operand the encoding parse does not")
	}
	// x86asm zero-extends a disp32 (the CPU sign-extends it): compare 32 bits.
	disp := binary.LittleEndian.Uint32(b[off:])
	switch {
	case decoderSaysRIP:
		if inst.PCRel != 4 || inst.PCRelOff != off || uint32(mem.Disp) != disp {
			return -1, errors.New("decoder and encoding parse disagree on the rip-relative displacement")
		}
	case l.vex != 0:
		// x86asm decodes VEX/EVEX mod=00 rm=101 as an absolute address;
		// accept that view only if it matches what the bytes say.
		if mem != nil && (mem.Base != 0 || mem.Index != 0 || uint32(mem.Disp) != disp) {
			return -1, errors.New("decoder and encoding parse disagree on the memory operand")
		}
	default:
		return -1, errors.New("encoding parse sees a rip-relative operand the decoder does not")
	}
	return off, nil
}
