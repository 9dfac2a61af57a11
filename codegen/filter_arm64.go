package codegen

// Filters in the tracee on arm64 (filter_amd64.go's design), tested
// without touching NZCV, which the function about to run may read: an
// equality by eor and cbz/cbnz, a bit test by and, an order by the sign
// bit of a flag-free less-than (Hacker's Delight, 2-12).

// filter appends the test of f, between a stub's saves and restores: it
// falls through where f holds, and branches where it does not, from the
// places it returns (to be landed). It uses x13-x17.
func (s *RecordStub) filter(a *a64, f *Filter) (fails []int) {
	switch f.Kind {
	case FilterAnd:
		return append(s.filter(a, f.L), s.filter(a, f.R)...)
	case FilterOr:
		left := s.filter(a, f.L)
		holds := a.branch(brB, 0, 0, -1)
		for _, at := range left {
			a.land(at)
		}
		fails = s.filter(a, f.R)
		a.land(holds)
		return fails
	case FilterNot:
		inner := s.filter(a, f.L)
		fail := a.branch(brB, 0, 0, -1) // the inner test held: this one does not
		for _, at := range inner {
			a.land(at)
		}
		return []int{fail}
	}
	s.loadValue(a, f.Value)
	a.mov(x14, f.Const)
	switch f.Op {
	case OpEQ:
		a.eor(x16, x15, x14)
		return []int{a.branch(brCBNZ, x16, 0, -1)}
	case OpNE:
		a.eor(x16, x15, x14)
		return []int{a.branch(brCBZ, x16, 0, -1)}
	case OpBand:
		a.andReg(x16, x15, x14)
		return []int{a.branch(brCBZ, x16, 0, -1)}
	}
	// x < y has the sign bit of (x &^ y) | (^(x ^ y) & (x - y)) signed,
	// of (y &^ x) | (^(x ^ y) & (x - y)) unsigned.
	x, y := uint32(x15), uint32(x14) // value < Const
	if f.Op == OpGT || f.Op == OpLE {
		x, y = y, x // Const < value
	}
	if f.Value.Signed {
		a.bic(x16, x, y)
	} else {
		a.bic(x16, y, x)
	}
	a.eon(x17, x, y)
	a.sub(x13, x, y)
	a.andReg(x17, x17, x13)
	a.orrShifted(x16, x16, x17, 0)
	if f.Op == OpLT || f.Op == OpGT {
		return []int{a.branch(brTBZ, x16, 63, -1)} // not less: fails
	}
	return []int{a.branch(brTBNZ, x16, 63, -1)} // less: GE and LE fail
}
