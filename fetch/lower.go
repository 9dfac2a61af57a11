package fetch

import (
	"fmt"
	"slices"

	"github.com/probedbg/probe/codegen"
)

// The in-process back end of fetch-args: what code run in the tracee
// (codegen's record and tally stubs) must read at a hit so that a
// record of it replays through Fetch and Keep as a stop would, and what
// of the fields and the filter a stub can work out itself.

// Lowered is Args as a stub takes it.
type Lowered struct {
	// Record is what a record must hold for Fetch to replay a hit from
	// it. NoRecord, if not "", says why no record can do: what else a
	// fetch-arg reads (a DWARF variable in memory, a pointer's pointer,
	// an array of strings).
	Record   Inputs
	NoRecord string
	// Values are the fields a stub can work out itself, by name:
	// integers in a register or a word at sp (for a tally's histogram).
	Values map[string]codegen.TallyValue
	// Filter is the filter as a stub tests it; nil when there is none,
	// or it tests other than numbers in registers and at sp (strings,
	// comm, DWARF variables).
	Filter *codegen.Filter
}

// Inputs is what a stub records: registers, the words at sp and copies
// of memory.
type Inputs struct {
	Regs  []int // byte offsets in unix.PtraceRegs
	Words int   // words at sp
	Reads []codegen.MemRead
}

// Lower says what a stub must read for a (nil: nothing).
func (a *Args) Lower() Lowered {
	var l Lowered
	if a == nil {
		return l
	}
	l.Record, l.NoRecord = a.recordInputs()
	for i := range a.args {
		if v, ok := a.args[i].stubValue(); ok {
			if l.Values == nil {
				l.Values = map[string]codegen.TallyValue{}
			}
			l.Values[a.args[i].name] = v
		}
	}
	l.Filter = a.stubFilter()
	return l
}

// Add makes in record what o does too: a register or a read it records
// already is recorded once.
func (in *Inputs) Add(o Inputs) {
	for _, off := range o.Regs {
		if !slices.Contains(in.Regs, off) {
			in.Regs = append(in.Regs, off)
		}
	}
	in.addChain(o.Reads)
	in.Words = max(in.Words, o.Words)
}

// addChain makes in copy the reads of chain (each Via one before it in
// chain) too: a read in makes already is made once.
func (in *Inputs) addChain(chain []codegen.MemRead) {
	at := make([]int, len(chain)) // where each of chain's reads is in in
	for i, r := range chain {
		if r.Via > 0 {
			r.Via = at[r.Via-1] + 1
		}
		if at[i] = slices.Index(in.Reads, r); at[i] < 0 {
			at[i] = len(in.Reads)
			in.Reads = append(in.Reads, r)
		}
	}
}

// recordInputs says what a record must hold for a's fetch-args: the
// registers (offsets in unix.PtraceRegs), how many words at sp, and the
// memory to copy (one dereference of a whole register: +OFF(%REG), and
// strings there); why is not "" when a reads something else (DWARF,
// pointers to pointers, arrays).
func (a *Args) recordInputs() (need Inputs, why string) {
	for i := range a.args {
		f := &a.args[i]
		switch {
		case f.typ == TypeDwarf || f.base == baseDwarf:
			if !f.dwarfRecordable() {
				return need, fmt.Sprintf("%s reads a DWARF variable in memory or a floating-point register", f.name)
			}
			need.Add(Inputs{Regs: generalRegs, Words: codegen.RecordStackMax})
			continue
		case len(f.derefs) > 0:
			chain, why := f.memReads()
			if why != "" {
				return need, fmt.Sprintf("%s %s", f.name, why)
			}
			if !chain[0].Abs {
				need.Add(Inputs{Regs: []int{chain[0].Reg}})
			}
			need.addChain(chain)
			continue
		case f.count > 0 || f.typ.IsString() && f.base != baseComm && f.base != baseData:
			return need, fmt.Sprintf("%s reads memory", f.name)
		}
		switch f.base {
		case baseReg:
			off := int(f.reg.idx) * 8
			if off == int(regPC)*8 {
				continue // the site's address: no room needed
			}
			if !codegen.RecordableReg(off) {
				return need, fmt.Sprintf("%s reads a segment register", f.name)
			}
			need.Add(Inputs{Regs: []int{off}})
		case baseStack:
			if f.imm >= codegen.RecordStackMax {
				return need, fmt.Sprintf("%s reads the stack beyond %d words", f.name, codegen.RecordStackMax)
			}
			need.Add(Inputs{Words: int(f.imm) + 1})
		}
	}
	// Fetch reads its stack words in one go from sp.
	if need.Words > 0 {
		if a.stackWords > codegen.RecordStackMax {
			return need, "reads the stack beyond the words recorded"
		}
		need.Add(Inputs{Regs: []int{int(regSP) * 8}, Words: int(a.stackWords)})
	}
	return need, ""
}

// memReads is the copies a stub makes for f, a fetch-arg that reads
// memory: one a dereference, from a whole general register or an
// address (@SYM), each after the first based on the pointer the one
// before it read; the last a scalar, an array of them (shorter than
// codegen.MemReadMax bytes) or a string (cut at MemReadMax). why says
// what else f reads.
func (f *fetchArg) memReads() (chain []codegen.MemRead, why string) {
	off := int(f.reg.idx) * 8
	switch {
	case f.base == baseImm:
	case f.base != baseReg || f.reg.width != 64 || f.reg.shift != 0 || off == int(regPC)*8 || off == int(regFlags)*8 || !codegen.RecordableReg(off):
		return nil, "reads memory at other than a register or an address"
	}
	for _, d := range f.derefs {
		if d != int64(int32(d)) {
			return nil, "reads memory too far from its base"
		}
	}
	size := int(fetchTypes[f.typ].size)
	switch {
	case f.typ.IsString() && f.count > 0:
		return nil, "reads an array of strings"
	case f.typ.IsString():
		size = codegen.MemReadMax
	case f.count > 0:
		size *= int(f.count)
		if size >= codegen.MemReadMax {
			return nil, fmt.Sprintf("reads an array of %d bytes, more than %d", size, codegen.MemReadMax-1)
		}
	}
	for i, d := range f.derefs {
		r := codegen.MemRead{Reg: off, Off: int32(d), Len: 8, Via: i}
		if i == 0 && f.base == baseImm {
			r.Reg, r.Abs, r.Addr = -1, true, f.imm
		}
		if i > 0 {
			r.Reg = -1
		}
		chain = append(chain, r)
	}
	chain[len(chain)-1].Len = size
	return chain, ""
}

// stubValue is how a stub makes f's value: a register or one of the
// words at sp, an integer.
func (f *fetchArg) stubValue() (codegen.TallyValue, bool) {
	info := f.typ.info()
	if len(f.derefs) > 0 || f.count > 0 || info.size == 0 || info.str || f.typ == TypeDwarf {
		return codegen.TallyValue{}, false
	}
	v := codegen.TallyValue{Reg: -1, Word: -1, Bits: 64, Size: info.size, BitField: f.bf, Lsh: f.lsh, Rsh: f.rsh, Signed: info.signed}
	switch f.base {
	case baseReg:
		off := int(f.reg.idx) * 8
		if off == int(regPC)*8 || !codegen.RecordableReg(off) {
			return v, false
		}
		v.Reg, v.Shift, v.Bits = off, f.reg.shift, f.reg.width
	case baseStack:
		if f.imm >= codegen.RecordStackMax {
			return v, false
		}
		v.Word = int(f.imm)
	default:
		return v, false
	}
	return v, true
}

// stubFilter is a's filter as a stub tests it, or nil where it tests
// other than numbers read from registers and the stack (strings, comm,
// DWARF variables).
func (a *Args) stubFilter() *codegen.Filter {
	f := a.filter
	if f == nil {
		return nil
	}
	var node func(n int32) *codegen.Filter
	node = func(n int32) *codegen.Filter {
		nd := &f.nodes[n]
		switch nd.kind {
		case nodeAnd, nodeOr:
			l, r := node(nd.l), node(nd.r)
			if l == nil || r == nil {
				return nil
			}
			kind := codegen.FilterAnd
			if nd.kind == nodeOr {
				kind = codegen.FilterOr
			}
			return &codegen.Filter{Kind: kind, L: l, R: r}
		case nodeNot:
			if l := node(nd.l); l != nil {
				return &codegen.Filter{Kind: codegen.FilterNot, L: l}
			}
			return nil
		}
		pr := &nd.pred
		op, ok := stubOps[pr.op]
		if !ok || pr.field < 0 || pr.field >= len(a.args) || pr.kind != cmpUnsigned && pr.kind != cmpSigned {
			return nil
		}
		v, ok := a.args[pr.field].stubValue()
		if !ok || v.Signed != (pr.kind == cmpSigned) {
			return nil
		}
		c := pr.val
		if v.Signed {
			c = uint64(signExtend(pr.val, pr.size))
		}
		return &codegen.Filter{Kind: codegen.FilterCmp, Value: v, Op: op, Const: c}
	}
	return node(f.root)
}

var stubOps = map[filterOp]codegen.FilterOp{
	opEQ: codegen.OpEQ, opNE: codegen.OpNE, opLT: codegen.OpLT, opLE: codegen.OpLE,
	opGT: codegen.OpGT, opGE: codegen.OpGE, opBand: codegen.OpBand,
}
