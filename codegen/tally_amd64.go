package codegen

import (
	"encoding/binary"
	"slices"

	"github.com/probedbg/probe/ring"
)

// Tallies: a probe whose every action is a count of its hits or a log2
// histogram of a value it reads from a register or the stack needs no
// record at all. Its stub adds to counters in its thread's ring header
// (ring.TallyOff) and goes on; the tracer reads the counters from its
// mapping and adds what each thread added since its last look. A hot
// probe then costs the tracer nothing per hit, and no ring fills.
//
// Each counter is one `inc` or `add` to memory, not locked: only the
// thread and its signal handlers write its ring, and one instruction is
// whole against a signal. The tracer reads a word whole (8-byte
// aligned), so it sees a count either before an increment or after.

// TallyRoutine is where the tally routine of a copy placed at at starts:
// it returns the calling thread's ring in %r10, or 0, as the record
// routine does, and reserves nothing.
func TallyRoutine(at uint64) uint64 { return at + uint64(routineAt.tally) }

// tally appends the tally routine.
func (r *RecordRoutine) tally(a *asm) {
	for _, at := range r.findRing(a) {
		a.land(at)
	}
	a.raw(0x49, 0x89, 0xf2) // mov %rsi,%r10: the ring
	a.raw(0xc3)             // ret
}

// tallyBody appends what a tallying stub does between its saves and
// restores: find the ring, add to its counters.
func (s *RecordStub) tallyBody(a *asm, byOff map[int]int) {
	a.raw(0xe8) // call TallyRoutine
	a.rel32(TallyRoutine(s.Routine))
	a.raw(0x4d, 0x85, 0xd2) // test %r10,%r10
	none := a.jcc(ccE)      // je out: no ring, counted as lost
	for _, t := range s.Tallies {
		var fails []int
		if t.Filter != nil {
			fails = s.filter(a, t.Filter, byOff)
		}
		at := int32(ring.TallyOff + 8*t.At)
		if t.Value == nil {
			a.incM(regR10, at)
		} else {
			s.loadValue(a, *t.Value, byOff)
			a.histogram(*t.Value, at)
		}
		for _, f := range fails {
			a.land(f)
		}
	}
	a.land(none)
}

// loadValue appends the making of v in %rax (%rcx is free to use).
func (s *RecordStub) loadValue(a *asm, v TallyValue, byOff map[int]int) {
	if v.Word >= 0 {
		a.loadThreadWord(v.Word)
	} else {
		a.loadThreadReg(byOff[v.Reg])
	}
	if v.Shift > 0 {
		a.raw(0x48, 0xc1, 0xe8, v.Shift) // shr $Shift,%rax
	}
	cut := uint64(1)<<(8*uint(v.Size)) - 1
	if v.Size >= 8 {
		cut = ^uint64(0)
	}
	if v.Bits < 64 {
		cut &= 1<<v.Bits - 1
	}
	a.andRAX(cut)
	if v.BitField {
		a.raw(0x48, 0xc1, 0xe0, v.Lsh) // shl $Lsh,%rax
		a.andRAX(valueCut(v.Size))
		a.raw(0x48, 0xc1, 0xe8, v.Rsh) // shr $Rsh,%rax
	}
	if v.Signed && v.Size < 8 {
		n := 64 - 8*v.Size
		a.raw(0x48, 0xc1, 0xe0, n) // shl $n,%rax
		a.raw(0x48, 0xc1, 0xf8, n) // sar $n,%rax
	}
}

// loadThreadReg appends the load into %rax of the thread's register reg
// as it was at the probe, between a stub's saves and restores: from the
// save area, or sp above it, or the register itself.
func (a *asm) loadThreadReg(reg int) {
	switch saved := slices.Index(rsSaved, reg); {
	case saved >= 0:
		a.loadStack(8 * saved)
	case reg == regRSP && a.frame:
		a.leaM(regRAX, regRBP, 8) // sp as at the entry: above the return address
	case reg == regRBP && a.frame:
		a.loadM(regRAX, regRBP, 0) // the caller's, which the prologue pushed
	case reg == regRSP:
		a.leaM(regRAX, regRSP, rsSP)
	default:
		a.raw(0x48|byte(reg>>3&1)<<2, 0x89, 0xc0|byte(reg&7)<<3) // mov %reg,%rax
	}
}

// loadThreadWord appends the load into %rax of the thread's stack word
// w: at sp+8w, or as at the entry (asm.frame).
func (a *asm) loadThreadWord(w int) {
	if a.frame {
		a.loadM(regRAX, regRBP, int32(8+8*w))
		return
	}
	a.loadStack(rsSP + 8*w)
}

// valueCut is the mask of a size-byte value.
func valueCut(size uint8) uint64 {
	if size >= 8 {
		return ^uint64(0)
	}
	return 1<<(8*uint(size)) - 1
}

// andRAX appends `and $m,%rax`, or nothing for all ones.
func (a *asm) andRAX(m uint64) {
	switch {
	case m == ^uint64(0):
	case m <= 0x7fffffff:
		a.raw(0x48, 0x25) // and $imm32,%rax
		a.b = binary.LittleEndian.AppendUint32(a.b, uint32(m))
	default:
		a.raw(0x48, 0xb9) // movabs $m,%rcx
		a.b = binary.LittleEndian.AppendUint64(a.b, m)
		a.raw(0x48, 0x21, 0xc8) // and %rcx,%rax
	}
}

// incM appends `incq disp(%base)`.
func (a *asm) incM(base int, disp int32) { a.mem([]byte{0xff}, 0, base, disp) }

// histogram appends the count of the value in %rax into the block at
// disp(%r10).
func (a *asm) histogram(v TallyValue, disp int32) {
	a.raw(0x48, 0x85, 0xc0)                              // test %rax,%rax
	top := a.jcc(ccS)                                    // js: negative, or an unsigned 2^63 and more
	a.mem([]byte{0x01}, regRAX, regR10, disp+8*TallySum) // add %rax,sum
	a.raw(0x48, 0x0f, 0xbd, 0xc8)                        // bsr %rax,%rcx
	zero := a.jcc(ccE)
	a.raw(0x49, 0xff, 0x84, 0xca) // incq disp+8(%r10,%rcx,8): bucket bsr+1
	a.b = binary.LittleEndian.AppendUint32(a.b, uint32(disp+8))
	done := []int{a.jmpFwd()}
	a.land(zero)
	a.incM(regR10, disp) // bucket 0
	done = append(done, a.jmpFwd())
	a.land(top)
	if v.Signed {
		a.mem([]byte{0x01}, regRAX, regR10, disp+8*TallySum)
		a.incM(regR10, disp+8*TallyNegative)
	} else {
		a.raw(0x48, 0xb8) // movabs $(2^63-1),%rax
		a.b = binary.LittleEndian.AppendUint64(a.b, 1<<63-1)
		a.mem([]byte{0x01}, regRAX, regR10, disp+8*TallySum)
		a.incM(regR10, disp+8*63)
	}
	for _, at := range done {
		a.land(at)
	}
}
