package singlestep

import (
	"slices"

	"golang.org/x/arch/x86/x86asm"
)

// maxBases bounds the leas that may reach one jump table's dispatch.
const maxBases = 4

// flowGraph is a function's control flow as far as its own code shows
// it: each instruction runs after the one before it (unless that one is
// a jmp or a ret) and after every branch of the function that lands on
// it. Code outside the function is taken to enter it only at its start,
// as the rest of the jump-table recognition does. Instructions are
// decoded as a walk comes to them: most of a function is never looked at.
type flowGraph struct {
	fn     []byte
	fnAddr uint64
	starts []int         // every instruction's offset
	insts  []x86asm.Inst // decoded, where decoded[i]
	known  []bool        //
	preds  map[int][]int // an instruction's branches in, by index
}

// newFlowGraph returns the flow graph of fn (at fnAddr, its instructions
// at starts), without branches yet (link).
func newFlowGraph(fn []byte, fnAddr uint64, starts []int) *flowGraph {
	return &flowGraph{fn: fn, fnAddr: fnAddr, starts: starts, insts: make([]x86asm.Inst, len(starts)), known: make([]bool, len(starts))}
}

// link sets the function's branches, those that land in it; false if one
// lands in the function but not on an instruction (code read two ways).
func (g *flowGraph) link(branches []Branch) bool {
	g.preds = map[int][]int{}
	for _, b := range branches {
		if b.To < g.fnAddr || b.To >= g.fnAddr+uint64(len(g.fn)) {
			continue // (leaves the function)
		}
		to, ok := g.index(b.To)
		from, okFrom := g.index(b.From)
		if !ok || !okFrom {
			return false
		}
		g.preds[to] = append(g.preds[to], from)
	}
	return true
}

// index is the index of the instruction at addr.
func (g *flowGraph) index(addr uint64) (int, bool) {
	if addr < g.fnAddr || addr >= g.fnAddr+uint64(len(g.fn)) {
		return 0, false
	}
	return slices.BinarySearch(g.starts, int(addr-g.fnAddr))
}

// inst decodes the instruction i.
func (g *flowGraph) inst(i int) (x86asm.Inst, bool) {
	if !g.known[i] {
		in, err := decodeInst(g.fn[g.starts[i]:])
		if err != nil {
			return x86asm.Inst{}, false
		}
		g.insts[i], g.known[i] = in, true
	}
	return g.insts[i], true
}

// A walk's verdict on an instruction: it ends the path (found what the
// walk looks for), the walk goes on before it, or the walk fails.
type step int

const (
	stepEnd step = iota
	stepOn
	stepFail
)

// walkBack visits every instruction that may run before the one at
// addr, path by path back from it, each once: a path ends where visit
// says (stepEnd), and must not reach the function's start (the
// caller's values) or an instruction that does not decode. It reports
// whether every path ended.
func (g *flowGraph) walkBack(addr uint64, visit func(i int, in x86asm.Inst) step) bool {
	at, ok := g.index(addr)
	if !ok || at == 0 {
		return false
	}
	seen := make([]bool, len(g.starts))
	stack, ok := g.before(at, nil)
	for ok && len(stack) > 0 {
		i := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if seen[i] {
			continue
		}
		seen[i] = true
		in, decoded := g.inst(i)
		if !decoded {
			return false
		}
		switch visit(i, in) {
		case stepEnd:
			continue
		case stepFail:
			return false
		}
		if i == 0 {
			return false
		}
		stack, ok = g.before(i, stack)
	}
	return ok
}

// tables returns the tables base holds when the instruction at addr
// runs: every path back from it must meet a `lea TABLE(%rip),%base`
// before anything else that may write the base (walkBack).
func (g *flowGraph) tables(base x86asm.Reg, addr uint64) ([]uint64, bool) {
	if family(base) != base || base == x86asm.RSP {
		return nil, false
	}
	var tables []uint64
	ok := g.walkBack(addr, func(i int, in x86asm.Inst) step {
		if dst, _ := in.Args[0].(x86asm.Reg); in.Op == x86asm.LEA && dst == base {
			m, ok := in.Args[1].(x86asm.Mem)
			if !ok || m.Base != x86asm.RIP || m.Index != 0 {
				return stepFail
			}
			t := g.fnAddr + uint64(g.starts[i]) + uint64(in.Len) + uint64(m.Disp)
			if !slices.Contains(tables, t) {
				tables = append(tables, t)
			}
			if len(tables) > maxBases {
				return stepFail
			}
			return stepEnd
		}
		if mayWrite(in, base) {
			return stepFail
		}
		return stepOn
	})
	return tables, ok && len(tables) > 0
}

// bound returns the largest value the register idx may hold when the
// instruction at addr runs, as a computed goto's index (labeltable):
// every path back from it must meet an instruction that bounds it
// (indexBound) before anything else that may write it, a sign extension
// of its own low half aside (the bound is small and not negative)
// (walkBack).
func (g *flowGraph) bound(idx x86asm.Reg, addr uint64) (int64, bool) {
	if family(idx) != idx || idx == x86asm.RSP {
		return 0, false
	}
	most := int64(-1)
	ok := g.walkBack(addr, func(i int, in x86asm.Inst) step {
		if n, ok := indexBound(in, idx); ok {
			most = max(most, n)
			return stepEnd
		}
		dst, _ := in.Args[0].(x86asm.Reg)
		src, _ := in.Args[1].(x86asm.Reg)
		keeps := in.Op == x86asm.MOVSXD && dst == idx && family(src) == idx && regBytes(src) == 4
		if !keeps && mayWrite(in, idx) {
			return stepFail
		}
		return stepOn
	})
	return most, ok && most >= 0
}

// indexBound reports whether in bounds the register idx, and by what:
// `and $MASK` (MASK+1 a power of two) or a zero extension of a byte, to
// 32 bits or more.
func indexBound(in x86asm.Inst, idx x86asm.Reg) (int64, bool) {
	dst, ok := in.Args[0].(x86asm.Reg)
	if !ok || family(dst) != idx || regBytes(dst) < 4 {
		return 0, false
	}
	switch in.Op {
	case x86asm.AND:
		n, ok := in.Args[1].(x86asm.Imm)
		return int64(n), ok && n > 0 && n < maxTable && n&(n+1) == 0
	case x86asm.MOVZX:
		return 0xff, zeroExtendsByte(in)
	}
	return 0, false
}

// before appends to stack the instructions that may run just before
// the instruction i; false if one does not decode.
func (g *flowGraph) before(i int, stack []int) ([]int, bool) {
	if i > 0 {
		prev, ok := g.inst(i - 1)
		if !ok {
			return nil, false
		}
		if prev.Op != x86asm.JMP && prev.Op != x86asm.RET {
			stack = append(stack, i-1)
		}
	}
	return append(stack, g.preds[i]...), true
}

// mayWrite reports whether in may change the 64-bit register reg: as an
// operand it writes (any register operand it names, for an instruction
// not known to write only its first), implicitly (the few that do), or
// as a call, which may change every register the ABI does not preserve.
func mayWrite(in x86asm.Inst, reg x86asm.Reg) bool {
	switch in.Op {
	case x86asm.CALL, x86asm.SYSCALL:
		switch reg {
		case x86asm.RBX, x86asm.RBP, x86asm.R12, x86asm.R13, x86asm.R14, x86asm.R15:
			return false // callee-saved (a system call changes only rax, rcx and r11)
		}
		return true
	case x86asm.CMP, x86asm.TEST, x86asm.BT, x86asm.PUSH, x86asm.NOP, x86asm.JMP, x86asm.RET:
		return false
	case x86asm.SYSENTER, x86asm.SYSRET:
		return true
	case x86asm.IMUL:
		if in.Args[1] == nil {
			return reg == x86asm.RAX || reg == x86asm.RDX // the one-operand form: rdx:rax
		}
	}
	if slices.Contains(implicitWrites[in.Op], reg) {
		return true
	}
	for k, a := range in.Args {
		if a == nil || k > 0 && writesFirstOnly(in.Op) {
			break
		}
		if r, ok := a.(x86asm.Reg); ok && family(r) == reg {
			return true
		}
	}
	return false
}

// implicitWrites: the registers instructions write without naming them.
var implicitWrites = func() map[x86asm.Op][]x86asm.Reg {
	const rax, rbx, rcx, rdx, rsi, rdi, rbp = x86asm.RAX, x86asm.RBX, x86asm.RCX, x86asm.RDX, x86asm.RSI, x86asm.RDI, x86asm.RBP
	w := map[x86asm.Op][]x86asm.Reg{}
	set := func(regs []x86asm.Reg, ops ...x86asm.Op) {
		for _, op := range ops {
			w[op] = regs
		}
	}
	set([]x86asm.Reg{rax, rdx}, x86asm.MUL, x86asm.DIV, x86asm.IDIV, x86asm.CWD, x86asm.CDQ, x86asm.CQO,
		x86asm.RDTSC, x86asm.RDMSR, x86asm.RDPMC, x86asm.XGETBV, x86asm.CMPXCHG8B, x86asm.CMPXCHG16B)
	set([]x86asm.Reg{rax}, x86asm.CBW, x86asm.CWDE, x86asm.CDQE, x86asm.LAHF, x86asm.XLATB, x86asm.CMPXCHG, x86asm.XBEGIN)
	set([]x86asm.Reg{rax, rbx, rcx, rdx}, x86asm.CPUID)
	set([]x86asm.Reg{rax, rcx, rdx}, x86asm.RDTSCP)
	set([]x86asm.Reg{rcx}, x86asm.LOOP, x86asm.LOOPE, x86asm.LOOPNE, x86asm.PCMPESTRI, x86asm.PCMPISTRI)
	set([]x86asm.Reg{rbp}, x86asm.LEAVE, x86asm.ENTER)
	set([]x86asm.Reg{rax, rcx, rsi, rdi}, // with or without rep
		x86asm.MOVSB, x86asm.MOVSW, x86asm.MOVSD, x86asm.MOVSQ, x86asm.CMPSB, x86asm.CMPSW,
		x86asm.CMPSD, x86asm.CMPSQ, x86asm.SCASB, x86asm.SCASW, x86asm.SCASD, x86asm.SCASQ,
		x86asm.LODSB, x86asm.LODSW, x86asm.LODSD, x86asm.LODSQ, x86asm.STOSB, x86asm.STOSW,
		x86asm.STOSD, x86asm.STOSQ, x86asm.INSB, x86asm.INSW, x86asm.INSD, x86asm.OUTSB,
		x86asm.OUTSW, x86asm.OUTSD)
	return w
}()

// writesFirstOnly reports whether op writes no register but its first
// operand.
func writesFirstOnly(op x86asm.Op) bool {
	if plainOp(op) && op != x86asm.PUSH {
		return true
	}
	switch op {
	case x86asm.ADC, x86asm.SBB, x86asm.IMUL, x86asm.NOT, x86asm.NEG, x86asm.INC, x86asm.DEC,
		x86asm.ROL, x86asm.ROR, x86asm.RCL, x86asm.RCR, x86asm.SHLD, x86asm.SHRD, x86asm.BSF,
		x86asm.BSR, x86asm.POPCNT, x86asm.LZCNT, x86asm.TZCNT, x86asm.BSWAP,
		x86asm.SETA, x86asm.SETAE, x86asm.SETB, x86asm.SETBE, x86asm.SETE, x86asm.SETG,
		x86asm.SETGE, x86asm.SETL, x86asm.SETLE, x86asm.SETNE, x86asm.SETNO, x86asm.SETNP,
		x86asm.SETNS, x86asm.SETO, x86asm.SETP, x86asm.SETS,
		x86asm.CMOVA, x86asm.CMOVAE, x86asm.CMOVB, x86asm.CMOVBE, x86asm.CMOVE, x86asm.CMOVG,
		x86asm.CMOVGE, x86asm.CMOVL, x86asm.CMOVLE, x86asm.CMOVNE, x86asm.CMOVNO, x86asm.CMOVNP,
		x86asm.CMOVNS, x86asm.CMOVO, x86asm.CMOVP, x86asm.CMOVS:
		return true
	}
	return false
}
