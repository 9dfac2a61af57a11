package singlestep

import (
	"encoding/binary"

	"golang.org/x/arch/x86/x86asm"
)

// A computed goto (gcc's labels as values: `goto *table[op]`, the
// dispatch of Lua's and CPython's interpreter loops) jumps through a
// table of the function's own label addresses, 8 bytes each:
//
//	and  $MASK,%idx32             the bound: entries 0..MASK, MASK+1 a power of two
//	                              (or movzbl: 0..255)
//	...  lea TABLE(%rip),%base    (or the base kept across the function, as for switches)
//	mov  (%base,%idx,8),%r
//	...  what writes neither %r
//	jmp  *%r
//
// or, in a position-dependent program, the table's address in the load
// (`mov TABLE(,%idx,8),%r`, or `jmp *TABLE(,%idx,8)`).
//
// The table is read up to the bound, each word a target. The bound is
// the bits the program keeps of its opcode, not the table's length
// (Lua's has 83 labels under a mask of 0x7f): the words past the table
// are other objects' (a program that indexes there has left the C
// array), taken for targets too, which only adds branches. A word
// outside the function is a branch out of it (CPython's table holds
// labels of its .cold part); one inside it must be an instruction of it
// (checked with the other branches). The table must hold at least two
// of the function's addresses. Its memory is read-only at run time
// (ReadTable). Anything else stays refused.

// labelTableTargets returns the labels the computed goto insts[j]
// dispatches through, or false; fnAddr and fnEnd bound the function,
// bases is as for jumpTableTargets, and bounds gives the bound of an
// index not bounded in the dispatch's own instructions (flowGraph.bound;
// nil: none known).
func labelTableTargets(insts []located, j int, branchTargets []uint64, read TableReader, bases func(base x86asm.Reg, at uint64) ([]uint64, bool), bounds func(idx x86asm.Reg, at uint64) (int64, bool), fnAddr, fnEnd uint64) ([]uint64, bool) {
	if read == nil || j < 1 || j >= len(insts) {
		return nil, false
	}
	var (
		load   int        // the instruction that reads the entry
		m      x86asm.Mem // the entry it reads
		tables []uint64   // the table, if the load names it
	)
	switch a := insts[j].inst.Args[0].(type) {
	case x86asm.Mem: // jmp *TABLE(,%idx,8)
		load, m = j, a
	case x86asm.Reg:
		if family(a) != a {
			return nil, false
		}
		load = -1
		for k := j - 1; k >= 0 && k >= j-window; k-- {
			in := insts[k].inst
			dst, _ := in.Args[0].(x86asm.Reg)
			if in.Op == x86asm.MOV && dst == a {
				load = k
				break
			}
			if !plainOp(in.Op) || dst != 0 && family(dst) == a {
				return nil, false // the target changed, or a branch
			}
		}
		if load < 0 {
			return nil, false
		}
		var ok bool
		if m, ok = insts[load].inst.Args[1].(x86asm.Mem); !ok {
			return nil, false
		}
	default:
		return nil, false
	}
	if m.Base == 0 && m.Disp > 0 { // TABLE(,%idx,8): a program not built as PIE
		tables, m.Disp = []uint64{uint64(m.Disp)}, 0
	} else if family(m.Base) != m.Base || m.Base == x86asm.RIP {
		return nil, false
	}
	base, idx := m.Base, m.Index
	if m.Scale != 8 || m.Disp != 0 || m.Segment != 0 || idx == 0 || family(idx) != idx || idx == base {
		return nil, false
	}
	var bound int64
	var guard uint64 // the bound's address, if in the dispatch's own instructions
scan:
	for k := load - 1; k >= 0 && k >= j-window && guard == 0; k-- {
		in, at := insts[k].inst, insts[k].addr
		dst, _ := in.Args[0].(x86asm.Reg)
		if n, ok := indexBound(in, idx); ok {
			bound, guard = n, at
			break
		}
		switch {
		case in.Op == x86asm.LEA && base != 0 && dst == base && tables == nil:
			lm, ok := in.Args[1].(x86asm.Mem)
			if !ok || lm.Base != x86asm.RIP || lm.Index != 0 {
				return nil, false
			}
			tables = []uint64{at + uint64(in.Len) + uint64(lm.Disp)}
		case dst != 0 && base != 0 && family(dst) == base:
			return nil, false // the table changed here
		case dst != 0 && family(dst) == idx || !plainOp(in.Op):
			break scan // (the bound, if any, is further: bounds)
		}
	}
	if guard == 0 {
		// Set on another path (CPython's index, a byte loaded before a
		// jcc to the dispatch): proven over the control flow.
		var ok bool
		if bounds == nil {
			return nil, false
		}
		if bound, ok = bounds(idx, insts[load].addr); !ok {
			return nil, false
		}
	}
	if tables == nil {
		var ok bool
		if bases == nil {
			return nil, false
		}
		if tables, ok = bases(base, insts[load].addr); !ok {
			return nil, false
		}
	}
	// Nothing may land past the load (the bound proven over the flow
	// holds there, not after it), nor past a bound in the dispatch's
	// own instructions.
	past := insts[load].addr
	if guard != 0 {
		past = guard
	}
	for _, t := range branchTargets {
		if t > past && t <= insts[j].addr {
			return nil, false // in past the bound
		}
	}
	var targets []uint64
	for _, table := range tables {
		b, err := read(table, uint64(bound+1)*8)
		if err != nil {
			return nil, false
		}
		inside := 0
		for i := 0; i+8 <= len(b); i += 8 {
			e := binary.LittleEndian.Uint64(b[i:])
			targets = append(targets, e)
			if e >= fnAddr && e < fnEnd {
				inside++
			}
		}
		if inside < 2 {
			// No table of the function's labels; or one the file holds
			// as zeros, to be relocated (a linker that writes no
			// addends), whose entries it does not say.
			return nil, false
		}
	}
	return targets, true
}

// zeroExtendsByte reports whether in, a movzx, reads one byte: a low
// byte register or a byte of memory.
func zeroExtendsByte(in x86asm.Inst) bool {
	switch src := in.Args[1].(type) {
	case x86asm.Reg:
		return regBytes(src) == 1 && !isHigh8(src)
	case x86asm.Mem:
		return in.MemBytes == 1
	}
	return false
}
