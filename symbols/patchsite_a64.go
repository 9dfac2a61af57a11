package symbols

import (
	"encoding/binary"
	"slices"

	"golang.org/x/arch/arm64/arm64asm"
)

// arm64's -pg: gcc records no sites (no -mrecord-mcount), and calls
// _mcount after the prologue, with the return address it was called
// with in x0:
//
//	[bti c]
//	stp  x29, x30, [sp, #-N]!
//	mov  x29, sp
//	...  saves of callee-saved registers, moves of the arguments
//	xpaclri
//	mov  x0, x30
//	bl   _mcount            (or its PLT entry)

// a64ScanInsns bounds the look at a function's start for the bl of
// _mcount: gcc's prologue saves at most the ten callee-saved general
// registers and eight vector ones, and moves the arguments it keeps.
const a64ScanInsns = 32

const (
	a64BtiC    = 0xd503245f
	a64Paciasp = 0xd503233f
	a64Pacibsp = 0xd503237f
	a64MovFP   = 0x910003fd // mov x29, sp
)

// scanA64ProfilingSites finds the bl of _mcount of each function of an
// arm64 -pg module.
func (m *Module) scanA64ProfilingSites() []PatchSite {
	targets := map[uint64]bool{}
	for _, name := range profilingCallees {
		if s, ok := m.Lookup(name); ok {
			targets[s.Addr] = true
		}
	}
	imports := m.importTable()
	isMcount := func(target uint64) bool {
		yes, seen := targets[target]
		if !seen {
			yes = slices.Contains(profilingCallees, imports.slots[m.stubSlot(target)])
			targets[target] = yes
		}
		return yes
	}
	m.buildTables()
	var sites []PatchSite
	for _, fn := range m.funcs {
		code, err := m.ReadCode(fn.Addr, min(fn.Size, 4*a64ScanInsns))
		if err != nil {
			continue
		}
		for i := 0; i+4 <= len(code); i += 4 {
			w := binary.LittleEndian.Uint32(code[i:])
			at := fn.Addr + uint64(i)
			if to, bl := a64BlTarget(at, w); bl {
				if isMcount(to) {
					sites = append(sites, PatchSite{Addr: at, Kind: McountCall})
				}
				break
			}
			if inst, err := arm64asm.Decode(code[i:]); err != nil || a64Branches(inst.Op) {
				break
			}
		}
	}
	return sites
}

// a64BlTarget is where w, the arm64 instruction at link address at,
// branches with link to, if it is a bl.
func a64BlTarget(at uint64, w uint32) (uint64, bool) {
	if w&0xfc000000 != 0x94000000 {
		return 0, false
	}
	return at + uint64(int64(int32(w<<6))>>4), true // imm26 * 4, signed
}

// a64Branches reports whether op changes the flow or traps (the
// decoder knows no authenticating branch: those fail to decode).
func a64Branches(op arm64asm.Op) bool {
	switch op {
	case arm64asm.B, arm64asm.BL, arm64asm.BR, arm64asm.BLR, arm64asm.RET, arm64asm.CBZ, arm64asm.CBNZ,
		arm64asm.TBZ, arm64asm.TBNZ, arm64asm.SVC, arm64asm.BRK, arm64asm.HLT, arm64asm.ERET:
		return true
	}
	return false
}

// a64McountCallEnd is McountCallEnd for arm64: fn must start (after a
// bti c at most, and a paciasp or pacibsp, which signs x30 with sp at
// the entry) with a frame a64PrologueEnd knows, then instructions up to
// the bl of _mcount that write neither x29 nor the saved x30 at
// [x29, #8]. above is how far sp at the entry is above x29; key is 'A'
// or 'B' if the function signed the x30 it saved (paciasp, pacibsp),
// else 0.
func (m *Module) a64McountCallEnd(fn Symbol, sites []PatchSite) (end int, above uint64, key byte) {
	code, err := m.ReadCode(fn.Addr, min(fn.Size, 4*a64ScanInsns))
	if err != nil {
		return 0, 0, 0
	}
	return a64PrologueEnd(code, func(off int) bool { return mcountSiteAt(sites, fn.Addr+uint64(off)) })
}

// a64PrologueEnd is a64McountCallEnd over a function's first
// instructions, code: isMcount says whether the bl at offset off calls
// _mcount. gcc makes the frame one of two ways:
//
//	stp  x29, x30, [sp, #-N]!       up to 512 bytes: the record at its bottom
//	mov  x29, sp                    above = N
//
//	sub  sp, sp, #N                 larger (or at -O0 with outgoing
//	                                arguments): one or two subs, or
//	                                mov x12, #N (movk) and sub sp, sp, x12
//	stp  x29, x30, [sp, #R]         the record R bytes up
//	add  x29, sp, #R                (mov x29, sp when R is 0); above = N - R
func a64PrologueEnd(code []byte, isMcount func(off int) bool) (end int, above uint64, key byte) {
	word := func(i int) uint32 {
		if i+4 > len(code) {
			return 0
		}
		return binary.LittleEndian.Uint32(code[i:])
	}
	off := 0
	if word(off) == a64BtiC {
		off += 4
	}
	switch word(off) {
	case a64Paciasp:
		key, off = 'A', off+4
	case a64Pacibsp:
		key, off = 'B', off+4
	}
	lowered, rec, off, ok := a64FrameRecord(word, off)
	if !ok || lowered <= rec || (lowered-rec)%16 != 0 {
		return 0, 0, 0
	}
	above = lowered - rec
	below := rec // how far sp is below x29 from now on
	for ; off+4 <= len(code); off += 4 {
		w := word(off)
		if _, bl := a64BlTarget(0, w); bl {
			if !isMcount(off) {
				return 0, 0, 0
			}
			return off + 4, above, key
		}
		if w == a64Paciasp || w == a64Pacibsp {
			return 0, 0, 0 // signed after sp moved: with another modifier
		}
		inst, err := arm64asm.Decode(code[off:])
		if err != nil || a64Branches(inst.Op) || !a64KeepsFrame(w, inst, &below) {
			return 0, 0, 0
		}
	}
	return 0, 0, 0
}

// a64FrameRecord reads the making of the frame and its record from
// offset off (a64PrologueEnd's forms): how far sp went below the
// entry's, the record's offset from the new sp, and the offset past
// the instruction that points x29 at it. False for any other form.
func a64FrameRecord(word func(int) uint32, off int) (lowered, rec uint64, end int, ok bool) {
	if w := word(off); w&0xffc07fff == 0xa9807bfd && w>>21&1 == 1 {
		// stp x29, x30, [sp, #imm7*8]! with a negative imm7.
		lowered = uint64(-(int64(int32(w<<10)) >> 25) * 8)
		return lowered, 0, off + 8, word(off+4) == a64MovFP
	}
	var konst uint64 // the value of the register movz and movk build
	kreg := uint32(32)
	for ; ; off += 4 {
		w := word(off)
		switch {
		case w&0xff8003ff == 0xd10003ff: // sub sp, sp, #imm{, lsl #12}
			lowered += uint64(w>>10&0xfff) << (12 * (w >> 22 & 1))
			continue
		case w&0xff800000 == 0xd2800000: // movz xd, #imm16, lsl #(16*hw)
			kreg, konst = w&31, uint64(w>>5&0xffff)<<(16*(w>>21&3))
			continue
		case w&0xff800000 == 0xf2800000 && w&31 == kreg: // movk
			sh := 16 * (w >> 21 & 3)
			konst = konst&^(0xffff<<sh) | uint64(w>>5&0xffff)<<sh
			continue
		case kreg < 31 && w == 0xcb2063ff|kreg<<16: // sub sp, sp, xk (uxtx)
			lowered += konst
			kreg = 32
			continue
		}
		break
	}
	// stp x29, x30, [sp, #imm7*8], a signed offset, not negative.
	w := word(off)
	if lowered == 0 || w&0xffc07fff != 0xa9007bfd || w>>21&1 == 1 {
		return 0, 0, 0, false
	}
	rec = uint64(w>>15&0x7f) * 8
	return lowered, rec, off + 8, word(off+4) == a64MovFP|uint32(rec)<<10 // add x29, sp, #rec
}

// a64KeepsFrame reports whether instruction w (inst decoded), in a
// prologue after x29 points at the frame record, leaves x29 and the x30 saved at
// [x29, #8] as they are; lowered is how far sp is below x29, kept up to
// date (sub sp, sp, #imm). Anything else that writes sp or x29, and any
// store but to an offset from a register, is refused.
func a64KeepsFrame(w uint32, inst arm64asm.Inst, lowered *uint64) bool {
	if w&0xff8003ff == 0xd10003ff { // sub sp, sp, #imm{, lsl #12}
		*lowered += uint64(w>>10&0xfff) << (12 * (w >> 22 & 1))
		return true
	}
	for i, a := range inst.Args {
		var r arm64asm.Reg
		switch a := a.(type) {
		case arm64asm.Reg:
			r = a
		case arm64asm.RegSP:
			r = arm64asm.Reg(a)
		case arm64asm.MemImmediate:
			if a.Mode != arm64asm.AddrOffset {
				return false // writes its base back
			}
			continue
		default:
			continue
		}
		dest := i == 0 || i == 1 && a64WritesPair(inst.Op)
		if dest && (r == arm64asm.X29 || r == arm64asm.W29 || r == arm64asm.Reg(arm64asm.SP) || r == arm64asm.Reg(arm64asm.WSP)) {
			return false
		}
	}
	if !a64Stores(inst.Op) {
		return true
	}
	base, from, n, ok := a64StoreRange(w)
	switch {
	case !ok:
		return false
	case base == 29:
	case base == 31:
		from -= int64(*lowered)
	default:
		return true // (the prologue's stores are to its frame)
	}
	return from+n <= 8 || from >= 16
}

// a64StoreRange decodes a store to an offset from a register: the
// base's number (31: sp), the offset and the bytes written. False for
// other forms.
func a64StoreRange(w uint32) (base uint32, from, n int64, ok bool) {
	base = w >> 5 & 31
	switch {
	case w&0x3bc00000 == 0x29000000: // stp, signed offset
		scale := int64(4) << (w >> 31) // w, x
		if w>>26&1 == 1 {
			scale = 4 << (w >> 30) // s, d, q
		}
		return base, int64(int32(w<<10)>>25) * scale, 2 * scale, true
	case w&0x3f400000 == 0x39000000 && w>>23&1 == 0: // str, unsigned offset
		scale := int64(1) << (w >> 30)
		return base, int64(w>>10&0xfff) * scale, scale, true
	case w&0x3f400000 == 0x3d000000: // str of a b-q register, unsigned offset
		scale := int64(1) << (w >> 30)
		if w>>23&1 == 1 {
			scale = 16
		}
		return base, int64(w>>10&0xfff) * scale, scale, true
	case w&0x3be00c00 == 0x38000000: // stur
		return base, int64(int32(w<<11) >> 23), int64(1) << (w >> 30), true
	}
	return 0, 0, 0, false
}

func a64Stores(op arm64asm.Op) bool {
	switch op {
	case arm64asm.STR, arm64asm.STP, arm64asm.STUR, arm64asm.STRB, arm64asm.STRH, arm64asm.STURB, arm64asm.STURH,
		arm64asm.STNP, arm64asm.STLR, arm64asm.STLRB, arm64asm.STLRH, arm64asm.STXR, arm64asm.STLXR, arm64asm.STXP, arm64asm.STLXP:
		return true
	}
	return false
}

func a64WritesPair(op arm64asm.Op) bool {
	switch op {
	case arm64asm.LDP, arm64asm.LDPSW, arm64asm.LDNP:
		return true
	}
	return false
}
