package codegen

import "encoding/binary"

// Filters in the tracee: a probe's `if` of numbers it reads from
// registers or the stack is tested by its stub, so that a hit it
// rejects makes no record and counts nothing (the tracer tests the
// records it gets again, as for a stop: the answer is the same). Strings,
// the thread's name and DWARF variables are tested by the tracer only.

// Condition codes of the jcc that leaves a comparison that fails, after
// `cmp %rcx,%rax` (or `test %rcx,%rax` for OpBand): signed and unsigned.
var failSigned = [...]byte{OpEQ: 0x85, OpNE: 0x84, OpLT: 0x8d, OpLE: 0x8f, OpGT: 0x8e, OpGE: 0x8c, OpBand: 0x84}
var failUnsigned = [...]byte{OpEQ: 0x85, OpNE: 0x84, OpLT: 0x83, OpLE: 0x87, OpGT: 0x86, OpGE: 0x82, OpBand: 0x84}

// filter appends the test of f, between a stub's saves and restores: it
// falls through where f holds, and jumps where it does not, from the
// places it returns (to be landed). %rax and %rcx are used.
func (s *RecordStub) filter(a *asm, f *Filter, byOff map[int]int) (fails []int) {
	switch f.Kind {
	case FilterAnd:
		return append(s.filter(a, f.L, byOff), s.filter(a, f.R, byOff)...)
	case FilterOr:
		left := s.filter(a, f.L, byOff)
		holds := a.jmpFwd()
		for _, at := range left {
			a.land(at)
		}
		fails = s.filter(a, f.R, byOff)
		a.land(holds)
		return fails
	case FilterNot:
		inner := s.filter(a, f.L, byOff)
		fail := a.jmpFwd() // the inner test held: this one does not
		for _, at := range inner {
			a.land(at)
		}
		return []int{fail}
	}
	s.loadValue(a, f.Value, byOff)
	a.raw(0x48, 0xb9) // movabs $Const,%rcx
	a.b = binary.LittleEndian.AppendUint64(a.b, f.Const)
	if f.Op == OpBand {
		a.raw(0x48, 0x85, 0xc8) // test %rcx,%rax
	} else {
		a.raw(0x48, 0x39, 0xc8) // cmp %rcx,%rax
	}
	cc := failUnsigned[f.Op]
	if f.Value.Signed {
		cc = failSigned[f.Op]
	}
	return []int{a.jcc(cc)}
}
