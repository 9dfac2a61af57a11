package probe

import (
	"golang.org/x/sys/unix"

	"github.com/probedbg/probe/symbols"
)

// The AAPCS64 argument registers (Linux: variadic arguments as any
// others): integers in x0-x7, floats in v0-v7 (user_fpsimd_state, which
// NT_PRFPREG reads, has v0 first); the rest on the stack from sp.
const (
	intArgRegs   = 8
	vecArgRegs   = 8
	vecRegOffset = 0
)

func intArgReg(r *unix.PtraceRegs, i int) uint64 { return r.Regs[i] }

func stackArgBase(r *unix.PtraceRegs) uint64 { return r.Sp }

// placeParams says where the AAPCS64 puts each parameter at a function's
// entry (Linux's rules: every stack slot 8 bytes or more): integers and
// pointers in x0-x7, floats and homogeneous float aggregates in v0-v7,
// other structs of up to 16 bytes in one or two of x0-x7, larger ones as
// a pointer to a copy (a C++ class passed by reference, whatever its
// size, too), the rest on the stack from [sp] on, in order. A result
// returned in memory moves none of them: its address is passed in x8,
// not an argument register. After a parameter the rules here do not
// cover (long double, __int128, _Complex) nothing more is placed. taken
// is what the parameters placed took, where a "..." goes on.
func placeParams(params []symbols.ABIValue, _ symbols.ABIValue) ([]paramPlace, argsTaken) {
	const gprs, simds = intArgRegs, vecArgRegs
	gpr, simd, stack := 0, 0, 0
	var out []paramPlace
	for _, p := range params {
		switch p.Class {
		case symbols.ClassInt, symbols.ClassPointer:
			out = append(out, paramPlace{fetch: scalarFetch(p, intArg(&gpr, gprs, &stack))})
		case symbols.ClassFloat:
			takeReg(&simd, simds, &stack)
			out = append(out, paramPlace{dwarf: true})
		case symbols.ClassAggregate:
			switch words := (p.Size + 7) / 8; {
			case p.ByReference || p.HFA == 0 && p.Size > 16: // passed as a pointer to a copy
				if gpr < gprs {
					gpr++
				} else {
					stack++
				}
			case p.HFA > 0 && simd+p.HFA <= simds:
				simd += p.HFA
			case p.HFA > 0:
				simd = simds
				stack += words
			case gpr+words <= gprs:
				gpr += words
			default:
				gpr = gprs
				stack += words
			}
			out = append(out, paramPlace{dwarf: true})
		default:
			return out, argsTaken{gpr: gpr, vec: simd, stack: stack}
		}
	}
	return out, argsTaken{gpr: gpr, vec: simd, stack: stack}
}
