package singlestep

import (
	"encoding/binary"

	"golang.org/x/arch/x86/x86asm"
)

// maxRunOn bounds how far the decoding begun at one entry point goes on
// past the next one when the two disagree about where instructions start
// (data before the next entry, or an entry inside an instruction).
const maxRunOn = 4096

// SweepRunOn is how far past the next entry SweepBranches' decoding from
// an entry may go on.
const SweepRunOn = maxRunOn

// SweepBranches decodes a stretch of executable code, at address addr,
// and returns every direct branch in it: a linear sweep, begun at addr and
// again at each of entries (sorted addresses known to start instructions:
// symbols, FDEs), so that data in the text or a misread instruction cannot
// hide the code after the next entry point. Decoding from each entry goes
// on past the next one until the two decodings meet at an instruction
// start, so every branch decoded from any entry is found; a byte that does
// not decode is skipped. Branches are in no particular order.
func SweepBranches(code []byte, addr uint64, entries []uint64) []Branch {
	starts := make([]uint64, (len(code)+63)/64) // a bit per byte: an instruction start seen by some decoding
	isStart := func(off int) bool { return starts[off/64]&(1<<(off%64)) != 0 }
	var offs []int
	for _, e := range entries {
		if e > addr && e-addr < uint64(len(code)) && (len(offs) == 0 || offs[len(offs)-1] != int(e-addr)) {
			offs = append(offs, int(e-addr))
		}
	}
	offs = append([]int{0}, offs...)
	out := make([]Branch, 0, len(code)/16) // compiled code has a branch every 20-25 bytes
	// Last entry first: the decoding begun at an entry stops where it
	// meets the one begun at the next entry, which has marked its starts.
	for i := len(offs) - 1; i >= 0; i-- {
		next, limit := len(code), len(code)
		if i+1 < len(offs) {
			next, limit = offs[i+1], min(len(code), offs[i+1]+maxRunOn)
		}
		for off := offs[i]; off < limit && !(off >= next && isStart(off)); {
			n, rel, direct, _, err := branchDecode(code[off:])
			if err != nil {
				off++
				continue
			}
			starts[off/64] |= 1 << (off % 64)
			if direct {
				from := addr + uint64(off)
				out = append(out, Branch{From: from, To: from + uint64(n) + uint64(rel)})
			}
			off += n
		}
	}
	return out
}

// FunctionBranches decodes a function's whole code, fn at fnAddr, and
// returns its direct branches in order, then the entries of the jump
// tables its indirect jumps dispatch through (each From the jmp), read
// with tables (see jumptable_amd64.go). An indirect jump that is not such
// a dispatch is an error: it may go anywhere, as are bytes that do not
// decode (*DecodeError); but for one that own says is the caller's (a
// detour's covered `jmp *SLOT(%rip)`, which it copies as it is).
func FunctionBranches(fn []byte, fnAddr uint64, tables TableReader, own func(at uint64) bool) ([]Branch, error) {
	flow, err := AnalyzeFunction(fn, fnAddr, tables)
	if err != nil {
		return nil, err
	}
	return flow.BranchesFor(own)
}

// AnalyzeFunction decodes a function's whole code, fn at fnAddr, and
// returns where it goes, whatever its caller's own jumps: FunctionBranches
// is its BranchesFor. An error is bytes that do not decode (*DecodeError).
func AnalyzeFunction(fn []byte, fnAddr uint64, tables TableReader) (*FunctionFlow, error) {
	var starts []int    // every instruction's offset
	var direct []Branch // in order
	var indirect []int  // indexes in starts of the indirect jmps
	for off := 0; off < len(fn); {
		n, rel, isDirect, indirectJmp, err := branchDecode(fn[off:])
		if err != nil {
			return nil, newDecodeError(fnAddr+uint64(off), fn[off:], err)
		}
		starts = append(starts, off)
		off += n
		switch {
		case indirectJmp:
			indirect = append(indirect, len(starts)-1)
		case isDirect:
			at := fnAddr + uint64(starts[len(starts)-1])
			direct = append(direct, Branch{From: at, To: fnAddr + uint64(off) + uint64(rel)})
		}
		// (An indirect call returns after itself, not into the range.)
	}
	if len(indirect) == 0 {
		return &FunctionFlow{Branches: direct}, nil
	}
	dispatched, unknown := jumpTables(fn, fnAddr, starts, indirect, direct, tables)
	return &FunctionFlow{Branches: append(direct, dispatched...), Unknown: unknown}, nil
}

// branchDecode decodes the instruction at the start of code for a look at
// where it may go: its length, and whether it is a direct branch (with
// its displacement) or an indirect jmp. Most instructions are measured by
// quickDecode; the rest (VEX, EVEX, rare or prefixed forms, indirect
// jumps) by x86asm.
func branchDecode(code []byte) (n int, rel int64, direct, indirectJmp bool, err error) {
	if n, rel, direct, ok := quickDecode(code); ok {
		return n, rel, direct, false, nil
	}
	inst, err := decodeInst(code)
	if err != nil {
		return 0, 0, false, false, err
	}
	r, direct := inst.Args[0].(x86asm.Rel)
	return inst.Len, int64(r), direct, !direct && inst.Op == x86asm.JMP, nil
}

// Immediate (or displacement) kinds of the opcodes quickDecode measures.
const (
	qNo     = iota // not measured here: x86asm decides
	qPlain         // no immediate
	qImm8          // ib
	qImm16         // iw
	qImmZ          // iz: 16 bits with the operand-size prefix, else 32
	qImmV          // iv (mov r, imm): 64 bits with REX.W, 16 with 66, else 32
	qEnter         // iw, ib
	qRel8          // a branch with a rel8
	qRel32         // a branch with a rel32
	qGroup3        // f6, f7: ib or iz for /0 and /1 (test) only
	qPop           // 8f: pop r/m, XOP for /1-/7
	qMovImm        // c7: mov r/m, iz; xbegin for c7 f8
	qGroup5        // ff: inc, dec, call, push r/m; jmp for /4 and /5
)

// quickModRM marks, in oneByteQuick and twoByteQuick, the opcodes with a
// ModRM byte.
const quickModRM = 0x80

// modrmSize is the length of a ModRM byte and what follows it for
// addressing (SIB, displacement), but for the disp32 of a SIB without base.
var modrmSize = func() (size [256]uint8) {
	for m := range size {
		mod, rm := m>>6, m&7
		switch {
		case mod == 3:
			size[m] = 1
		case mod == 0 && rm == 5:
			size[m] = 5 // disp32(%rip)
		case mod == 0:
			size[m] = 1
		case mod == 1:
			size[m] = 2
		default:
			size[m] = 5
		}
		if mod != 3 && rm == 4 {
			size[m]++ // SIB
		}
	}
	return size
}()

// oneByteQuick and twoByteQuick give the immediate kind of the opcodes of
// the one-byte and 0f maps that quickDecode measures, with quickModRM as
// oneByteHasModRM and twoByteLacksModRM say. Left out, for x86asm: the
// opcodes invalid in 64-bit mode, moffs, VEX/EVEX/XOP escapes, 3DNow!,
// the few whose length depends on a mandatory prefix.
var oneByteQuick, twoByteQuick = quickTables()

// legacyPrefix: the legacy prefixes quickDecode passes over (not lock:
// x86asm checks where it may go).
var legacyPrefix = byteSet(0x26, 0x26, 0x2e, 0x2e, 0x36, 0x36, 0x3e, 0x3e, 0x64, 0x67, 0xf2, 0xf3)

func quickTables() (one, two [256]uint8) {
	set := func(t *[256]uint8, kind uint8, ops ...int) {
		for _, op := range ops {
			t[op] = kind
		}
	}
	span := func(lo, hi int) []int {
		var s []int
		for op := lo; op <= hi; op++ {
			s = append(s, op)
		}
		return s
	}
	for alu := 0x00; alu <= 0x38; alu += 8 { // add, or, adc, sbb, and, sub, xor, cmp
		set(&one, qPlain, span(alu, alu+3)...)
		set(&one, qImm8, alu+4)
		set(&one, qImmZ, alu+5)
	}
	set(&one, qPlain, span(0x50, 0x5f)...)
	set(&one, qPlain, 0x63, 0x6c, 0x6d, 0x6e, 0x6f)
	set(&one, qImmZ, 0x68, 0x69, 0x81, 0xa9, 0xc7)
	set(&one, qImm8, 0x6a, 0x6b, 0x80, 0x83, 0xa8, 0xc0, 0xc1, 0xc6, 0xcd, 0xe4, 0xe5, 0xe6, 0xe7)
	set(&one, qRel8, span(0x70, 0x7f)...)
	set(&one, qRel8, 0xe0, 0xe1, 0xe2, 0xe3, 0xeb)
	set(&one, qPlain, span(0x84, 0x8f)...)
	set(&one, qPlain, span(0x90, 0x99)...)
	set(&one, qPlain, span(0x9b, 0x9f)...)
	set(&one, qPlain, 0xa4, 0xa5, 0xa6, 0xa7, 0xaa, 0xab, 0xac, 0xad, 0xae, 0xaf)
	set(&one, qImm8, span(0xb0, 0xb7)...)
	set(&one, qImmV, span(0xb8, 0xbf)...)
	set(&one, qImm16, 0xc2, 0xca)
	set(&one, qPlain, 0xc3, 0xc9, 0xcb, 0xcc, 0xcf)
	set(&one, qEnter, 0xc8)
	set(&one, qPlain, span(0xd0, 0xd3)...)
	set(&one, qPlain, span(0xd7, 0xdf)...)
	set(&one, qRel32, 0xe8, 0xe9)
	set(&one, qPlain, 0xec, 0xed, 0xee, 0xef, 0xf1, 0xf4, 0xf5)
	set(&one, qGroup3, 0xf6, 0xf7)
	set(&one, qPlain, span(0xf8, 0xff)...)

	// 0f 00 and 0f 01 (system groups, rdtscp, xgetbv, rdpkru...): a
	// ModRM, no immediate, whatever the ModRM; x86asm knows not all.
	set(&two, qPlain, 0x00, 0x01, 0x02, 0x03, 0x05, 0x06, 0x07, 0x08, 0x09, 0x0b, 0x0d)
	set(&two, qPlain, span(0x10, 0x1f)...)
	set(&two, qPlain, span(0x28, 0x2f)...)
	set(&two, qPlain, 0x30, 0x31, 0x32, 0x33)
	set(&two, qPlain, span(0x40, 0x6f)...)
	set(&two, qImm8, 0x70, 0x71, 0x72, 0x73)
	set(&two, qPlain, 0x74, 0x75, 0x76, 0x77, 0x7c, 0x7d, 0x7e, 0x7f)
	set(&two, qRel32, span(0x80, 0x8f)...)
	set(&two, qPlain, span(0x90, 0x9f)...)
	set(&two, qPlain, 0xa0, 0xa1, 0xa2, 0xa3, 0xa5, 0xa8, 0xa9, 0xab, 0xad, 0xae, 0xaf)
	set(&two, qImm8, 0xa4, 0xac, 0xba, 0xc2, 0xc4, 0xc5, 0xc6)
	set(&two, qPlain, span(0xb0, 0xb7)...)
	set(&two, qPlain, 0xb9, 0xbb, 0xbc, 0xbd, 0xbe, 0xbf, 0xc0, 0xc1, 0xc3, 0xc7)
	set(&two, qPlain, span(0xc8, 0xfe)...)
	set(&one, qPop, 0x8f)
	set(&one, qMovImm, 0xc7)
	set(&one, qGroup5, 0xff)
	for op := range 256 {
		if one[op] != qNo && oneByteHasModRM[op] {
			one[op] |= quickModRM
		}
		if two[op] != qNo && !twoByteLacksModRM[op] {
			two[op] |= quickModRM
		}
	}
	return one, two
}

// quickDecode measures the common instructions of the one-byte, 0f, 0f 38
// and 0f 3a maps without x86asm, which costs ten times as much: legacy
// prefixes, a REX, the opcode, ModRM, SIB, displacement, immediate. A
// direct branch is measured only without any prefix, and its displacement
// returned. ok is false when the instruction is not one it knows: the
// caller asks x86asm.
func quickDecode(code []byte) (n int, rel int64, branch, ok bool) {
	i, opsize16, rexW := 0, false, false
	for i < len(code) && legacyPrefix[code[i]] {
		opsize16 = opsize16 || code[i] == 0x66
		i++
	}
	if i < len(code) && code[i]&0xf0 == 0x40 {
		rexW = code[i]&8 != 0
		i++
	}
	prefixed := i > 0
	if i >= len(code) || code[i] == 0x0f && i+1 >= len(code) {
		return 0, 0, false, false
	}
	var info uint8
	switch op := code[i]; op {
	case 0x0f:
		switch code[i+1] {
		case 0x38:
			info, i = qPlain|quickModRM, i+3
		case 0x3a:
			info, i = qImm8|quickModRM, i+3
		default:
			info, i = twoByteQuick[code[i+1]], i+2
		}
	default:
		info, i = oneByteQuick[op], i+1
	}
	kind := info &^ quickModRM
	if kind == qNo {
		return 0, 0, false, false
	}
	if info&quickModRM != 0 {
		if i >= len(code) {
			return 0, 0, false, false
		}
		m, reg := code[i], code[i]>>3&7
		switch kind {
		case qPop:
			if reg != 0 {
				return 0, 0, false, false // XOP in 64-bit mode
			}
		case qMovImm:
			if m == 0xf8 {
				return 0, 0, false, false // xbegin: a branch
			}
			kind = qImmZ
		case qGroup5:
			if reg == 4 || reg == 5 {
				return 0, 0, false, false // an indirect jmp: x86asm tells its kind
			}
		case qGroup3:
			switch {
			case reg >= 2:
				kind = qPlain
			case code[i-1] == 0xf6:
				kind = qImm8
			default:
				kind = qImmZ
			}
		}
		if m&0xc7 == 0x04 { // mod 0, a SIB
			if i+1 >= len(code) {
				return 0, 0, false, false
			}
			if code[i+1]&7 == 5 {
				i += 4 // no base: disp32
			}
		}
		i += int(modrmSize[m])
	}
	switch kind {
	case qImm8:
		i++
	case qImm16:
		i += 2
	case qEnter:
		i += 3
	case qImmZ:
		if opsize16 && !rexW {
			i += 2
		} else {
			i += 4
		}
	case qImmV:
		switch {
		case rexW:
			i += 8
		case opsize16:
			i += 2
		default:
			i += 4
		}
	case qRel8:
		if prefixed || i >= len(code) {
			return 0, 0, false, false // bnd, hints, 16-bit forms: x86asm's view
		}
		return i + 1, int64(int8(code[i])), true, true
	case qRel32:
		if prefixed || i+4 > len(code) {
			return 0, 0, false, false
		}
		return i + 4, int64(int32(binary.LittleEndian.Uint32(code[i:]))), true, true
	}
	if i > len(code) || i > 15 {
		return 0, 0, false, false
	}
	return i, 0, false, true
}
