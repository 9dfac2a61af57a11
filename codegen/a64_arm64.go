package codegen

import (
	"encoding/binary"
	"fmt"
	"math/bits"

	"github.com/probedbg/probe/singlestep"
)

// a64 assembles the few arm64 instructions the generated code uses, one
// 32-bit word each. Registers are numbers: 0-30 the x registers, 31 the
// zero register or sp, as the instruction reads it.
type a64 struct {
	at  uint64 // where the code will be placed
	w   []uint32
	err error
	// frameAbove: a record stub past plain -pg's call of _mcount sees
	// the thread as at its entry through its frame (RecordStub.FrameEntry):
	// sp was x29 + frameAbove, x29 and x30 are the words at [x29]
	// (x30 signed there if frameSigned).
	frameAbove  uint64
	frameSigned bool
}

// Registers the generated code names.
const (
	x9, x10, x11, x12, x13, x14, x15, x16, x17 = 9, 10, 11, 12, 13, 14, 15, 16, 17
	x18, xFP, xLR                              = 18, 29, 30
	xZR, xSP                                   = 31, 31
)

func (a *a64) emit(ws ...uint32) { a.w = append(a.w, ws...) }

// pc is the address of the next instruction.
func (a *a64) pc() uint64 { return a.at + 4*uint64(len(a.w)) }

func (a *a64) bytes() []byte {
	b := make([]byte, 0, 4*len(a.w))
	for _, w := range a.w {
		b = binary.LittleEndian.AppendUint32(b, w)
	}
	return b
}

func (a *a64) fail(format string, args ...any) {
	if a.err == nil {
		a.err = fmt.Errorf(format, args...)
	}
}

// mov puts v in x rd: a movz of its lowest non-zero half word and a movk
// of each further one, or one movn where the upper 48 bits are all ones.
func (a *a64) mov(rd uint32, v uint64) {
	if v>>16 == 1<<48-1 {
		a.emit(0x92800000 | uint32(^v&0xffff)<<5 | rd) // movn
		return
	}
	n := 0
	for hw := uint32(0); hw < 4; hw++ {
		part := uint32(v >> (16 * hw) & 0xffff)
		if part == 0 && (v != 0 || hw > 0) {
			continue
		}
		op := uint32(0xf2800000) // movk
		if n == 0 {
			op = 0xd2800000 // movz
		}
		a.emit(op | hw<<21 | part<<5 | rd)
		n++
	}
}

// mov64 appends a movz and three movk that put v in x rd, the same
// length whatever v: for an address known only once the code after it
// is made (setMov64). It returns its index.
func (a *a64) mov64(rd uint32, v uint64) int {
	i := len(a.w)
	a.emit(0xd2800000|rd, 0xf2800000|1<<21|rd, 0xf2800000|2<<21|rd, 0xf2800000|3<<21|rd)
	a.setMov64(i, v)
	return i
}

// setMov64 sets the value of the mov64 at index i.
func (a *a64) setMov64(i int, v uint64) {
	for hw := range 4 {
		a.w[i+hw] = a.w[i+hw]&^(0xffff<<5) | uint32(v>>(16*hw)&0xffff)<<5
	}
}

// movReg is mov xd, xm (orr xd, xzr, xm); not for sp.
func (a *a64) movReg(rd, rm uint32) { a.emit(0xaa0003e0 | rm<<16 | rd) }

// addImm is add xd, xn, #v (xn may be sp): one add, or two for a v of
// up to 24 bits.
func (a *a64) addImm(rd, rn uint32, v uint64) {
	switch {
	case v < 1<<12:
		a.emit(0x91000000 | uint32(v)<<10 | rn<<5 | rd)
	case v < 1<<24 && v&0xfff == 0:
		a.emit(0x91400000 | uint32(v>>12)<<10 | rn<<5 | rd)
	case v < 1<<24:
		a.emit(0x91400000 | uint32(v>>12)<<10 | rn<<5 | rd)
		a.emit(0x91000000 | uint32(v&0xfff)<<10 | rd<<5 | rd)
	default:
		a.fail("add of %#x: too large", v)
	}
}

// subImm is sub xd, xn, #v, v below 4096 (xn may be sp).
func (a *a64) subImm(rd, rn uint32, v uint64) {
	if v >= 1<<12 {
		a.fail("sub of %#x: too large", v)
	}
	a.emit(0xd1000000 | uint32(v)<<10 | rn<<5 | rd)
}

func (a *a64) add(rd, rn, rm uint32) { a.emit(0x8b000000 | rm<<16 | rn<<5 | rd) }
func (a *a64) sub(rd, rn, rm uint32) { a.emit(0xcb000000 | rm<<16 | rn<<5 | rd) }
func (a *a64) eor(rd, rn, rm uint32) { a.emit(0xca000000 | rm<<16 | rn<<5 | rd) }

// andReg, bic and eon are xn & xm, xn &^ xm and xn ^ ^xm.
func (a *a64) andReg(rd, rn, rm uint32) { a.emit(0x8a000000 | rm<<16 | rn<<5 | rd) }
func (a *a64) bic(rd, rn, rm uint32)    { a.emit(0x8a200000 | rm<<16 | rn<<5 | rd) }
func (a *a64) eon(rd, rn, rm uint32)    { a.emit(0xca200000 | rm<<16 | rn<<5 | rd) }

// lslImm is lsl xd, xn, #sh (ubfm xd, xn, #(64-sh)%64, #63-sh); asrImm
// is asr xd, xn, #sh (sbfm xd, xn, #sh, #63).
func (a *a64) lslImm(rd, rn, sh uint32) {
	a.emit(0xd3400000 | (64-sh)%64<<16 | (63-sh)<<10 | rn<<5 | rd)
}
func (a *a64) asrImm(rd, rn, sh uint32) { a.emit(0x9340fc00 | sh<<16 | rn<<5 | rd) }

// addShifted is add xd, xn, xm, lsl #sh.
func (a *a64) addShifted(rd, rn, rm, sh uint32) { a.emit(0x8b000000 | rm<<16 | sh<<10 | rn<<5 | rd) }

// orrShifted is orr xd, xn, xm, lsl #sh.
func (a *a64) orrShifted(rd, rn, rm, sh uint32) { a.emit(0xaa000000 | rm<<16 | sh<<10 | rn<<5 | rd) }

// madd is xd = xn*xm + xa.
func (a *a64) madd(rd, rn, rm, ra uint32) { a.emit(0x9b000000 | rm<<16 | ra<<10 | rn<<5 | rd) }

// andLow is and xd, xn, #(1<<k - 1): the low k bits, 0 < k < 64 (a
// bitmask immediate: N=1, immr=0, imms=k-1); k 0 is mov xd, #0.
func (a *a64) andLow(rd, rn uint32, k int) {
	switch {
	case k == 0:
		a.emit(0xd2800000 | rd)
	case k > 0 && k < 64:
		a.emit(0x92400000 | uint32(k-1)<<10 | rn<<5 | rd)
	default:
		a.fail("and with %d low bits", k)
	}
}

// lsr is lsr xd, xn, #sh (ubfm xd, xn, #sh, #63).
func (a *a64) lsr(rd, rn, sh uint32) { a.emit(0xd340fc00 | sh<<16 | rn<<5 | rd) }

// ldr and str are the 64-bit loads and stores at xn plus an unsigned
// multiple of 8 below 32 KiB.
func (a *a64) ldr(rt, rn uint32, off uint64) { a.emit(0xf9400000 | a.scaled(off, 8)<<10 | rn<<5 | rt) }
func (a *a64) str(rt, rn uint32, off uint64) { a.emit(0xf9000000 | a.scaled(off, 8)<<10 | rn<<5 | rt) }

func (a *a64) scaled(off, size uint64) uint32 {
	if off%size != 0 || off/size >= 1<<12 {
		a.fail("offset %#x: not a multiple of %d below %#x", off, size, size<<12)
	}
	return uint32(off/size) & 0xfff
}

// ldrW32Reg is ldr wt, [xn, xm]: 32 bits at xn + xm (xm may be
// negative).
func (a *a64) ldrW32Reg(rt, rn, rm uint32) { a.emit(0xb8606800 | rm<<16 | rn<<5 | rt) }

// ldrhScaled and strhScaled load and store the 16 bits at xn + xm*2.
// ldrW is ldr wt, [xn, #off]: 32 bits at xn plus an unsigned multiple
// of 4 below 16 KiB.
func (a *a64) ldrW(rt, rn uint32, off uint64) { a.emit(0xb9400000 | a.scaled(off, 4)<<10 | rn<<5 | rt) }

// ldrswReg is ldrsw xt, [xn, xm]: the 32-bit word there, sign-extended.
func (a *a64) ldrswReg(rt, rn, rm uint32) { a.emit(0xb8a06800 | rm<<16 | rn<<5 | rt) }

func (a *a64) ldrhScaled(rt, rn, rm uint32) { a.emit(0x78607800 | rm<<16 | rn<<5 | rt) }
func (a *a64) strhScaled(rt, rn, rm uint32) { a.emit(0x78207800 | rm<<16 | rn<<5 | rt) }

// stp and ldp store and load a pair at xn plus a multiple of 8 below 512.
func (a *a64) stp(r1, r2, rn uint32, off uint64) {
	a.emit(0xa9000000 | a.pairOff(off)<<15 | r2<<10 | rn<<5 | r1)
}
func (a *a64) ldp(r1, r2, rn uint32, off uint64) {
	a.emit(0xa9400000 | a.pairOff(off)<<15 | r2<<10 | rn<<5 | r1)
}

func (a *a64) pairOff(off uint64) uint32 {
	if off%8 != 0 || off/8 >= 64 {
		a.fail("pair offset %#x", off)
	}
	return uint32(off/8) & 0x7f
}

// The exclusive and ordered accesses, 64 bits at xn.
func (a *a64) ldxr(rt, rn uint32)      { a.emit(0xc85f7c00 | rn<<5 | rt) }
func (a *a64) ldaxr(rt, rn uint32)     { a.emit(0xc85ffc00 | rn<<5 | rt) }
func (a *a64) stxr(rs, rt, rn uint32)  { a.emit(0xc8007c00 | rs<<16 | rn<<5 | rt) }
func (a *a64) stlxr(rs, rt, rn uint32) { a.emit(0xc800fc00 | rs<<16 | rn<<5 | rt) }
func (a *a64) stlr(rt, rn uint32)      { a.emit(0xc89ffc00 | rn<<5 | rt) }

const (
	a64Clrex  = 0xd5033f5f
	a64Isb    = 0xd5033fdf
	a64DmbIsh = 0xd5033bbf
	a64Ret    = 0xd65f03c0
	// Pointer authentication's hint-space instructions (nops on a core
	// without it): xpaclri strips x30; pacia1716 and pacib1716 sign x17
	// with modifier x16, with key A or B.
	a64Xpaclri   = 0xd50320ff
	a64Pacia1716 = 0xd503211f
	a64Pacib1716 = 0xd503215f
	a64MrsTP     = 0xd53bd040 // mrs x0, tpidr_el0
	a64MrsCntv   = 0xd53be040 // mrs x0, cntvct_el0
	a64Brk       = 0xd4200000 // brk #0, as BreakpointInsn
	a64Clz       = 0xdac01000 // clz x0, x0
)

// Branches. The forward ones return their index, for land; the backward
// ones take the target's index.

type branchKind uint8

const (
	brB branchKind = iota
	brBL
	brCBZ
	brCBNZ
	brCBZW
	brCBNZW
	brTBNZ
	brTBZ
)

// branch appends a branch of kind k on register rt (bit: tbnz's bit) to
// the instruction at index to, or to be landed later if to < 0.
func (a *a64) branch(k branchKind, rt, bit uint32, to int) int {
	i := len(a.w)
	a.emit(a64Branch(k, rt, bit))
	if to >= 0 {
		a.aim(i, to)
	}
	return i
}

func a64Branch(k branchKind, rt, bit uint32) uint32 {
	switch k {
	case brB:
		return 0x14000000
	case brBL:
		return 0x94000000
	case brCBZ:
		return 0xb4000000 | rt
	case brCBNZ:
		return 0xb5000000 | rt
	case brCBZW:
		return 0x34000000 | rt
	case brCBNZW:
		return 0x35000000 | rt
	}
	tb := uint32(0x36000000 | bit>>5<<31 | (bit&31)<<19 | rt) // tbz
	if k == brTBNZ {
		tb |= 1 << 24
	}
	return tb
}

// land aims the branch at index i at the next instruction.
func (a *a64) land(i int) { a.aim(i, len(a.w)) }

// aim sets the displacement of the branch at index i to index to.
func (a *a64) aim(i, to int) {
	d := int64(to - i)
	w := a.w[i]
	switch {
	case w&0x7c000000 == 0x14000000: // b, bl
		if d < -(1<<25) || d >= 1<<25 {
			a.fail("branch out of reach")
		}
		a.w[i] = w&^0x3ffffff | uint32(d)&0x3ffffff
	case w&0x7e000000 == 0x36000000: // tbz, tbnz
		if d < -(1<<13) || d >= 1<<13 {
			a.fail("branch out of reach")
		}
		a.w[i] = w&^(0x3fff<<5) | (uint32(d)&0x3fff)<<5
	default: // cbz, cbnz
		a.w[i] = w&^(0x7ffff<<5) | (uint32(d)&0x7ffff)<<5
	}
}

// call appends bl to an absolute address (±128 MiB).
func (a *a64) call(to uint64) { a.far(0x94000000, to) }

// jump appends b to an absolute address (±128 MiB).
func (a *a64) jump(to uint64) { a.far(0x14000000, to) }

func (a *a64) far(op uint32, to uint64) {
	w, err := singlestep.BranchTo(a.pc(), to)
	if err != nil {
		a.fail("%v", err)
	}
	a.emit(op | w&0x3ffffff)
}

// log2 is k for a power of two 1<<k.
func log2(v uint64) int { return bits.TrailingZeros64(v) }
