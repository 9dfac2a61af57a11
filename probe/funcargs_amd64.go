package probe

import (
	"golang.org/x/sys/unix"

	"github.com/probedbg/probe/symbols"
)

// The SysV x86-64 argument registers: integers in %rdi, %rsi, %rdx,
// %rcx, %r8, %r9; floats in %xmm0-7 (FXSAVE's layout, which
// PTRACE_GETFPREGS reads, puts xmm0 at 160); the rest on the stack from
// the word above the return address.
const (
	intArgRegs   = 6
	vecArgRegs   = 8
	vecRegOffset = 160
)

func intArgReg(r *unix.PtraceRegs, i int) uint64 {
	return [intArgRegs]uint64{r.Rdi, r.Rsi, r.Rdx, r.Rcx, r.R8, r.R9}[i]
}

func stackArgBase(r *unix.PtraceRegs) uint64 { return r.Rsp + 8 }

// placeParams says where the SysV x86-64 calling convention (3.2.3) puts
// each parameter at a function's entry: INTEGER values in %rdi, %rsi,
// %rdx, %rcx, %r8, %r9, SSE ones in %xmm0-7, the rest on the stack from
// [sp+8] on, in order; a struct of up to 16 bytes in registers if all its
// words fit, else on the stack; a C++ class passed by reference as a
// pointer. A result returned in memory takes %rdi for the hidden pointer
// to it, and the parameters start at %rsi. After a parameter the rules
// here do not cover (long double, __int128, _Complex) nothing more is
// placed, nor anything when the result's way is not known. taken is what
// the parameters placed took, where a "..." goes on.
func placeParams(params []symbols.ABIValue, result symbols.ABIValue) ([]paramPlace, argsTaken) {
	const gprs, sses = intArgRegs, vecArgRegs
	gpr, sse, stack := 0, 0, 1 // stack: the word at sp; 0 is the return address
	switch {
	case result.Class == symbols.ClassAggregate && result.Size > 0 && (result.Words == nil || result.ByReference):
		gpr = 1 // MEMORY: the hidden pointer
	case result.Class == symbols.ClassOther && result.Size > 16:
		// A vector (in %ymm0 with AVX, else MEMORY) or _Complex
		// long double (x87): in %rdi or not, not told here.
		return nil, argsTaken{}
	}
	var out []paramPlace
	for _, p := range params {
		switch p.Class {
		case symbols.ClassInt, symbols.ClassPointer:
			out = append(out, paramPlace{fetch: scalarFetch(p, intArg(&gpr, gprs, &stack))})
		case symbols.ClassFloat:
			takeReg(&sse, sses, &stack)
			out = append(out, paramPlace{dwarf: true})
		case symbols.ClassAggregate:
			if p.ByReference {
				takeReg(&gpr, gprs, &stack)
				out = append(out, paramPlace{dwarf: true})
				break
			}
			ints, floats := 0, 0
			for _, w := range p.Words {
				if w == symbols.ClassFloat {
					floats++
				} else {
					ints++
				}
			}
			if p.Words != nil && gpr+ints <= gprs && sse+floats <= sses {
				gpr, sse = gpr+ints, sse+floats
			} else {
				stack += (p.Size + 7) / 8
			}
			out = append(out, paramPlace{dwarf: true})
		default:
			return out, argsTaken{gpr: gpr, vec: sse, stack: stack - 1}
		}
	}
	return out, argsTaken{gpr: gpr, vec: sse, stack: stack - 1}
}
