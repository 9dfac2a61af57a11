package codegen

import "github.com/probedbg/probe/ring"

// Tallies on arm64 (tally_amd64.go's design): a probe whose every action
// is a count of its hits or a log2 histogram of a value from a register
// or the stack adds to counters in its thread's ring header and records
// nothing. An add is a load-exclusive/store-exclusive pair: a signal
// handler of the thread's that adds to the same counter in between makes
// the store fail, and the add starts again.

// TallyRoutine is where the tally routine of a copy placed at at starts:
// one word (x9 = 0) before the record routine, whose search for the
// thread's ring it runs; it returns the ring in x12 (0: none, counted)
// and reserves nothing.
func TallyRoutine(at uint64) uint64 { return at + 4*uint64(routineAt.tally) }

// atomicAdd appends the addition of x v to the word at x13, whole
// against the thread's signal handlers. It uses x14, x16.
func (a *a64) atomicAdd(v uint32) {
	again := len(a.w)
	a.ldxr(x14, x13)
	a.add(x14, x14, v)
	a.stxr(x16, x14, x13)
	a.branch(brCBNZW, x16, 0, again)
}

// tallyBody appends what a tallying stub does between its saves and
// restores: find the ring, add to its counters.
func (s *RecordStub) tallyBody(a *a64) {
	a.call(TallyRoutine(s.Routine))
	none := a.branch(brCBZ, x12, 0, -1) // no ring: counted as lost
	for _, t := range s.Tallies {
		var fails []int
		if t.Filter != nil {
			fails = s.filter(a, t.Filter)
		}
		at := uint64(ring.TallyOff + 8*t.At)
		if t.Value == nil {
			a.addImm(x13, x12, at)
			a.atomicInc()
		} else {
			s.loadValue(a, *t.Value)
			a.histogram(*t.Value, at)
		}
		for _, f := range fails {
			a.land(f)
		}
	}
	a.land(none)
}

// loadValue appends the making of v in x15.
func (s *RecordStub) loadValue(a *a64, v TallyValue) {
	if v.Word >= 0 {
		loadStackWord(a, x15, v.Word)
	} else {
		loadThreadReg(a, x15, v.Reg)
	}
	if v.Shift > 0 {
		a.lsr(x15, x15, uint32(v.Shift))
	}
	if k := min(8*int(v.Size), int(v.Bits)); k < 64 {
		a.andLow(x15, x15, k)
	}
	if v.BitField {
		a.lslImm(x15, x15, uint32(v.Lsh))
		if v.Size < 8 {
			a.andLow(x15, x15, 8*int(v.Size))
		}
		a.lsr(x15, x15, uint32(v.Rsh))
	}
	if v.Signed && v.Size < 8 {
		n := uint32(64 - 8*v.Size)
		a.lslImm(x15, x15, n)
		a.asrImm(x15, x15, n)
	}
}

// histogram appends the count of the value in x15 into the block at
// offset at of the ring in x12: bucket 64 - clz (0 for 0), its sum.
func (a *a64) histogram(v TallyValue, at uint64) {
	top := a.branch(brTBNZ, x15, 63, -1) // negative, or an unsigned 2^63 and more
	a.emit(a64Clz | x15<<5 | x17)
	a.mov(x14, 64)
	a.sub(x17, x14, x17)
	a.addImm(x13, x12, at+8*TallySum)
	a.atomicAdd(x15)
	a.addImm(x13, x12, at)
	a.addShifted(x13, x13, x17, 3)
	a.atomicInc()
	done := a.branch(brB, 0, 0, -1)
	a.land(top)
	bucket := uint64(TallyNegative)
	if !v.Signed {
		a.mov(x15, 1<<63-1)
		bucket = 63
	}
	a.addImm(x13, x12, at+8*TallySum)
	a.atomicAdd(x15)
	a.addImm(x13, x12, at+8*bucket)
	a.atomicInc()
	a.land(done)
}
