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
// bti c at most) with `stp x29, x30, [sp, #-N]!; mov x29, sp`, then
// instructions up to the bl of _mcount that write neither x29 nor the
// saved x30 at [x29, #8], and not sign its return address (paciasp: the
// saved x30 would be signed, and a trampoline put there unsigned would
// fail its autiasp). above is N: sp at the entry is x29 + N.
func (m *Module) a64McountCallEnd(fn Symbol, sites []PatchSite) (end int, above uint64) {
	code, err := m.ReadCode(fn.Addr, min(fn.Size, 4*a64ScanInsns))
	if err != nil {
		return 0, 0
	}
	return a64PrologueEnd(code, func(off int) bool { return mcountSiteAt(sites, fn.Addr+uint64(off)) })
}

// a64PrologueEnd is a64McountCallEnd over a function's first
// instructions, code: isMcount says whether the bl at offset off calls
// _mcount.
func a64PrologueEnd(code []byte, isMcount func(off int) bool) (end int, above uint64) {
	if len(code) < 12 {
		return 0, 0
	}
	word := func(i int) uint32 { return binary.LittleEndian.Uint32(code[i:]) }
	off := 0
	if word(0) == a64BtiC {
		off = 4
	}
	// stp x29, x30, [sp, #imm7*8]! with a negative imm7.
	stp := word(off)
	if stp&0xffc07fff != 0xa9807bfd || stp>>21&1 == 0 {
		return 0, 0
	}
	above = uint64(-(int64(int32(stp<<10)) >> 25) * 8)
	if off += 4; word(off) != a64MovFP {
		return 0, 0
	}
	lowered := uint64(0) // how far sp went below x29 since
	for off += 4; off+4 <= len(code); off += 4 {
		w := word(off)
		if _, bl := a64BlTarget(0, w); bl {
			if !isMcount(off) {
				return 0, 0
			}
			return off + 4, above
		}
		if w == a64Paciasp || w == a64Pacibsp {
			return 0, 0
		}
		inst, err := arm64asm.Decode(code[off:])
		if err != nil || a64Branches(inst.Op) || !a64KeepsFrame(w, inst, &lowered) {
			return 0, 0
		}
	}
	return 0, 0
}

// a64KeepsFrame reports whether instruction w (inst decoded), in a
// prologue after `mov x29, sp`, leaves x29 and the x30 saved at
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
