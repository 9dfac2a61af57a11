package singlestep

import (
	"encoding/binary"
	"slices"

	"golang.org/x/arch/x86/x86asm"
)

// A function with an indirect jump may jump anywhere, so FunctionBranches
// refuses it (and codegen.PlanDetour with it), as kprobes' can_optimize
// does, unless the jump is gcc's jump-table dispatch of a switch and the
// table can be read: then its entries are branch targets like any other
// (or a computed goto's: labeltable_amd64.go). The dispatch it knows:
//
//	cmp  $N, %idx8 (or %idx32)    the bound: entries 0..N
//	ja   default
//	...  movzbl %idx8,%idx32 / lea TABLE(%rip),%base (either order)
//	movslq (%base,%idx,4),%r
//	add  %base,%r
//	jmp  *%r
//
// every instruction between the cmp and the jmp one that writes neither
// register but where named, and no branch of the function landing after
// the ja (past the bound check). The index may be copied (`mov
// %esi,%eax`) or loaded after its check from the memory the cmp read
// (`cmpb $N, 0x65(%rbx)`, `ja`, `movzbl 0x65(%rbx),%eax`), nothing
// written there or to its address's registers in between; instructions
// that leave the flags (moves, a store elsewhere) may stand between the
// cmp and the ja. The lea may also be anywhere before, in a register
// gcc keeps the table in across a loop or the whole function: then every
// path of the function's control flow that reaches the movslq must pass
// a `lea TABLE(%rip),%base` and nothing that may write the base after it
// (flowGraph.tables; a few such leas, each table read). In a program not
// built as PIE the table holds addresses and the jmp reads it, `jmp
// *TABLE(,%idx,8)` after the same bound (86 functions of Debian's
// python3.11, PyMember_GetOne's among them). Anything else stays
// refused.

// maxTable bounds the entries read from one table.
const maxTable = 1024

// window is how many instructions before an indirect jmp the dispatch
// may take.
const window = 12

// jumpTableTargets returns the targets of the jump table dispatched by
// the indirect jmp insts[j], or false; bases gives the tables a register
// holds at an address when no lea of it stands between the check and
// the jmp (nil: none known).
func jumpTableTargets(insts []located, j int, branchTargets []uint64, read TableReader, bases func(base x86asm.Reg, at uint64) ([]uint64, bool)) ([]uint64, bool) {
	if read == nil || j < 1 || j >= len(insts) {
		return nil, false
	}
	d, ok := switchDispatch(insts, j)
	if !ok {
		return nil, false
	}
	r, base, idx := d.r, d.base, d.idx // (the register the entry is picked by)
	var idxMem *x86asm.Mem             // or the memory it was loaded from, once found
	var idxBytes int                   // and the load's width
	table := d.table                   // the lea's table, once found (or the load's)
	var bound int64                    // N, once found
	var guard uint64                   // the ja's address
	for k := d.load - 1; k >= 0 && k >= j-window && guard == 0; k-- {
		in, at := insts[k].inst, insts[k].addr
		dst, _ := in.Args[0].(x86asm.Reg)
		switch {
		case in.Op == x86asm.LEA && dst == base && table == 0:
			lm, ok := in.Args[1].(x86asm.Mem)
			if !ok || lm.Base != x86asm.RIP || lm.Index != 0 {
				return nil, false
			}
			table = at + uint64(in.Len) + uint64(lm.Disp)
		case (in.Op == x86asm.MOVZX || in.Op == x86asm.MOV) && idxMem == nil && family(dst) == idx:
			// The index as a copy (movzbl %al,%eax; mov %esi,%eax: a
			// 32-bit mov clears the upper half) or a load of it.
			switch src := in.Args[1].(type) {
			case x86asm.Reg:
				if family(src) == 0 || isHigh8(src) || in.Op == x86asm.MOV && (regBytes(dst) < 4 || regBytes(src) != regBytes(dst)) {
					return nil, false
				}
				idx = family(src) // the bound is on the source
			case x86asm.Mem:
				if in.Op == x86asm.MOV && regBytes(dst) < 4 || src.Base == x86asm.RIP || family(src.Base) == 0 && src.Base != 0 {
					return nil, false
				}
				idxMem, idxBytes, idx = &src, in.MemBytes, 0
			default:
				return nil, false
			}
		case in.Op == x86asm.JA:
			c, ok := boundCheck(insts, k, idx, idxMem, idxBytes)
			if !ok {
				return nil, false
			}
			bound, guard = c, at
		case idxMem != nil && (writesMem(in, idxMem, idxBytes) || dst != 0 && writesAddress(dst, idxMem)):
			return nil, false // the loaded index's memory may have changed since its check
		case dst != 0 && (base != 0 && family(dst) == base || family(dst) == idx || r != 0 && family(dst) == r):
			return nil, false // the table, the index or the result changed here
		case !plainOp(in.Op):
			return nil, false
		}
	}
	if guard == 0 {
		return nil, false
	}
	tables := []uint64{table}
	if table == 0 {
		if bases == nil {
			return nil, false
		}
		if tables, ok = bases(base, insts[d.load].addr); !ok {
			return nil, false
		}
	}
	for _, t := range branchTargets {
		if t > guard && t <= insts[j].addr {
			return nil, false // in past the bound check
		}
	}
	targets := make([]uint64, 0, len(tables)*int(bound+1))
	for _, table := range tables {
		b, err := read(table, uint64(bound+1)*uint64(d.entry))
		if err != nil {
			return nil, false
		}
		for i := 0; i+d.entry <= len(b); i += d.entry {
			if d.entry == 8 {
				targets = append(targets, binary.LittleEndian.Uint64(b[i:]))
			} else {
				targets = append(targets, table+uint64(int64(int32(binary.LittleEndian.Uint32(b[i:])))))
			}
		}
	}
	return targets, true
}

// dispatch is how a switch's jmp picks its entry.
type dispatch struct {
	load  int        // the instruction that reads the entry
	r     x86asm.Reg // the register the entry is read into (0: the jmp reads it)
	base  x86asm.Reg // the table's register (0: the load names the table)
	idx   x86asm.Reg // the entry's index
	table uint64     // the table, if the load names it
	entry int        // an entry's bytes: 4, an offset from the table; 8, an address
}

// switchDispatch recognises the dispatch of a switch's jump table that
// ends at the jmp insts[j]: gcc's `movslq (%base,%idx,4),%r; add
// %base,%r; jmp *%r` (a table of offsets from itself), or, in a program
// not built as PIE, `jmp *TABLE(,%idx,8)` (a table of addresses).
func switchDispatch(insts []located, j int) (dispatch, bool) {
	jmp := insts[j].inst
	if m, ok := jmp.Args[0].(x86asm.Mem); ok {
		if m.Base != 0 || m.Disp <= 0 || m.Scale != 8 || m.Segment != 0 || m.Index == 0 || family(m.Index) != m.Index {
			return dispatch{}, false
		}
		return dispatch{load: j, idx: m.Index, table: uint64(m.Disp), entry: 8}, true
	}
	if j < 2 {
		return dispatch{}, false
	}
	add, load := insts[j-1].inst, insts[j-2].inst
	r, ok := jmp.Args[0].(x86asm.Reg)
	if !ok || family(r) != r {
		return dispatch{}, false
	}
	base, ok := add.Args[1].(x86asm.Reg)
	if add.Op != x86asm.ADD || add.Args[0] != r || !ok || family(base) != base || base == r {
		return dispatch{}, false
	}
	m, ok := load.Args[1].(x86asm.Mem)
	if load.Op != x86asm.MOVSXD || load.Args[0] != r || !ok || m.Base != base || m.Scale != 4 || m.Disp != 0 || m.Segment != 0 || family(m.Index) != m.Index {
		return dispatch{}, false
	}
	return dispatch{load: j - 2, r: r, base: base, idx: m.Index, entry: 4}, true
}

// maxRounds bounds the passes jumpTables makes over a function's jump
// tables before the branches they add stop changing.
const maxRounds = 4

// jumpTables returns the entries of the jump tables that the indirect
// jmps of fn (indirect: indexes in starts) dispatch through, each a
// Branch from its jmp, and the jmps that are no such dispatch (unknown,
// in order). A table's base proven over the function's control flow
// depends on where the tables themselves jump: the proof is made again
// with the entries found until they stay the same, so it holds for the
// control flow they give; a jmp not found in a round adds no branches to
// the next, and may be found there (a computed goto's dispatch reached
// only through another's labels: Lua's luaV_execute has three); those
// not found in the last round are unknown.
func jumpTables(fn []byte, fnAddr uint64, starts, indirect []int, direct []Branch, read TableReader) (found []Branch, unknown []uint64) {
	near := make(map[int][]located, len(indirect))
	var graph *flowGraph // (its instructions decoded once for every round)
	for round := 0; ; round++ {
		linked, linkOK := -1, false
		flow := func() bool { // the graph, linked with this round's branches
			if graph == nil {
				graph = newFlowGraph(fn, fnAddr, starts)
			}
			if linked != round {
				linked, linkOK = round, graph.link(slices.Concat(direct, found))
			}
			return linkOK
		}
		bases := func(base x86asm.Reg, at uint64) ([]uint64, bool) {
			if !flow() {
				return nil, false
			}
			return graph.tables(base, at)
		}
		bounds := func(idx x86asm.Reg, at uint64) (int64, bool) {
			if !flow() {
				return 0, false
			}
			return graph.bound(idx, at)
		}
		targets := make([]uint64, 0, len(direct)+len(found))
		for _, b := range slices.Concat(direct, found) {
			targets = append(targets, b.To)
		}
		var next []Branch
		unknown = unknown[:0]
		for _, j := range indirect {
			at := fnAddr + uint64(starts[j])
			if near[j] == nil {
				near[j] = locateAll(fn, fnAddr, starts[max(0, j-window):j+1])
			}
			table, ok := jumpTableTargets(near[j], min(j, window), targets, read, bases)
			if !ok {
				table, ok = labelTableTargets(near[j], min(j, window), targets, read, bases, bounds, fnAddr, fnAddr+uint64(len(fn)))
			}
			if !ok {
				unknown = append(unknown, at)
				continue
			}
			for _, t := range table {
				next = append(next, Branch{From: at, To: t})
			}
		}
		if slices.Equal(next, found) {
			return next, unknown // (the proofs held for the flow next gives)
		}
		if round == maxRounds {
			// Not settled: none is known.
			unknown = unknown[:0]
			for _, j := range indirect {
				unknown = append(unknown, fnAddr+uint64(starts[j]))
			}
			return nil, unknown
		}
		found = next
	}
}

// boundCheck finds the cmp the ja at insts[k] follows (past moves that
// leave the flags) and returns its bound, if it checks the index: the
// register idx, or the idxBytes at idxMem.
func boundCheck(insts []located, k int, idx x86asm.Reg, idxMem *x86asm.Mem, idxBytes int) (int64, bool) {
	for c := k - 1; c >= 0 && c >= k-4; c-- {
		in := insts[c].inst
		dst, _ := in.Args[0].(x86asm.Reg)
		if in.Op != x86asm.CMP {
			// Between the cmp and the ja: what writes no flags, nor
			// the index, nor the memory it is loaded from.
			if in.Op != x86asm.MOV && in.Op != x86asm.MOVZX && in.Op != x86asm.LEA && in.Op != x86asm.NOP ||
				dst != 0 && (family(dst) == idx || idxMem != nil && writesAddress(dst, idxMem)) ||
				idxMem != nil && writesMem(in, idxMem, idxBytes) {
				return 0, false
			}
			continue
		}
		n, ok := in.Args[1].(x86asm.Imm)
		if !ok || n < 0 || n >= maxTable {
			return 0, false
		}
		switch a := in.Args[0].(type) {
		case x86asm.Reg:
			return int64(n), idxMem == nil && family(a) == idx && !isHigh8(a)
		case x86asm.Mem:
			return int64(n), idxMem != nil && a == *idxMem && in.MemBytes == idxBytes
		}
		return 0, false
	}
	return 0, false
}

// regBytes is a general register's width (a mov to one of 4 or 8 sets
// all 64 bits).
func regBytes(r x86asm.Reg) int {
	switch {
	case r >= x86asm.RAX && r <= x86asm.R15:
		return 8
	case r >= x86asm.EAX && r <= x86asm.R15L:
		return 4
	case r >= x86asm.AX && r <= x86asm.R15W:
		return 2
	}
	return 1
}

// writesAddress reports whether writing dst changes where m is.
func writesAddress(dst x86asm.Reg, m *x86asm.Mem) bool {
	return family(dst) != 0 && (family(dst) == family(m.Base) || family(dst) == family(m.Index))
}

// writesMem reports whether in may write the n bytes at m: any store but
// one at the same base, no index, and bytes apart (a struct's other
// field: movb $1,0x67(%rbx) beside 0x65(%rbx)).
func writesMem(in x86asm.Inst, m *x86asm.Mem, n int) bool {
	if in.Op == x86asm.CMP || in.Op == x86asm.TEST {
		return false // (reads)
	}
	w, ok := in.Args[0].(x86asm.Mem)
	if !ok {
		return in.Op == x86asm.PUSH // (below the stack pointer: not the index's, but say so)
	}
	if w.Base != m.Base || w.Index != 0 || m.Index != 0 || w.Segment != m.Segment {
		return true
	}
	return w.Disp < m.Disp+int64(n) && m.Disp < w.Disp+int64(in.MemBytes)
}

// located is an instruction and its address.
type located struct {
	addr uint64
	inst x86asm.Inst
}

// locateAll decodes the instructions of fn that start at starts (nil if
// one does not).
func locateAll(fn []byte, fnAddr uint64, starts []int) []located {
	out := make([]located, 0, len(starts))
	for _, off := range starts {
		in, err := decodeInst(fn[off:])
		if err != nil {
			return nil
		}
		out = append(out, located{addr: fnAddr + uint64(off), inst: in})
	}
	return out
}

// plainOp reports whether op writes no register but its first operand
// and does not branch: an instruction the dispatch may have in between.
func plainOp(op x86asm.Op) bool {
	switch op {
	case x86asm.MOV, x86asm.MOVZX, x86asm.MOVSX, x86asm.MOVSXD, x86asm.LEA, x86asm.ADD, x86asm.SUB,
		x86asm.AND, x86asm.OR, x86asm.XOR, x86asm.TEST, x86asm.CMP, x86asm.NOP, x86asm.SHL, x86asm.SHR,
		x86asm.SAR, x86asm.PUSH:
		return true
	}
	return false
}

// family maps a general register of any width to its 64-bit register;
// 0 for any other.
func family(r x86asm.Reg) x86asm.Reg {
	switch {
	case r >= x86asm.RAX && r <= x86asm.R15:
		return r
	case r >= x86asm.EAX && r <= x86asm.R15L:
		return x86asm.RAX + (r - x86asm.EAX)
	case r >= x86asm.AX && r <= x86asm.R15W:
		return x86asm.RAX + (r - x86asm.AX)
	case r >= x86asm.AL && r <= x86asm.BL:
		return x86asm.RAX + (r - x86asm.AL)
	case r >= x86asm.SPB && r <= x86asm.R15B:
		return x86asm.RSP + (r - x86asm.SPB)
	}
	return 0
}

func isHigh8(r x86asm.Reg) bool { return r >= x86asm.AH && r <= x86asm.BH }
