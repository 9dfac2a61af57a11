package probe

import (
	"encoding/binary"
	"fmt"
	"math"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/probedbg/probe/fetch"
)

// The arguments a printf-like function takes after its format ("..."),
// as ltrace shows them: the format string says what each is, and the
// calling convention where (varArgs, funcargs_*.go): integers and
// pointers after the fixed parameters' registers, then on the stack;
// doubles in the vector registers, then on the stack. They are read at a
// stop only (the floating-point registers and the strings are not in a
// record), so the entries of such a function stop the thread.

// maxVarArgs bounds the arguments read after a format.
const maxVarArgs = 16

// varArgs reads, in order, what a variadic call passed after its fixed
// parameters: the registers and stack words taken so far.
type varArgs struct {
	regs *unix.PtraceRegs
	mem  fetch.Memory
	fp   func() []byte
	argsTaken
}

// conversion is one printf conversion: what it reads.
type conversion struct {
	verb   byte   // d, u, x, c, s, p, f, n...
	length string // hh, h, l, ll, j, z, t, L, q
}

// parseFormat returns the conversions of a printf format, with a '*'
// width or precision as an int conversion of its own.
func parseFormat(f string) []conversion {
	var out []conversion
	for i := 0; i < len(f); i++ {
		if f[i] != '%' {
			continue
		}
		i++
		if i < len(f) && f[i] == '%' {
			continue
		}
		// Flags, width, precision: '*' takes an int argument.
		for i < len(f) && strings.IndexByte("-+ #0'123456789.*$", f[i]) >= 0 {
			if f[i] == '*' {
				out = append(out, conversion{verb: 'd'})
			}
			i++
		}
		start := i
		for i < len(f) && strings.IndexByte("hljztLq", f[i]) >= 0 {
			i++
		}
		if i >= len(f) {
			break
		}
		out = append(out, conversion{verb: f[i], length: f[start:i]})
	}
	return out
}

// formatArgs returns the values a call passed for format's conversions,
// as ltrace shows them, read by a.
func (a *varArgs) formatArgs(format string) []fetch.Value {
	var vals []fetch.Value
	for _, c := range parseFormat(format) {
		if len(vals) == maxVarArgs {
			break
		}
		switch c.verb {
		case 'd', 'i':
			vals = append(vals, fetch.UintValue(fetch.TypeS64, uint64(signed(a.nextInt(), intBits(c.length)))))
		case 'u':
			vals = append(vals, fetch.UintValue(fetch.TypeU64, a.nextInt()&mask(intBits(c.length))))
		case 'o':
			vals = append(vals, fetch.DwarfValue(fmt.Sprintf("%#o", a.nextInt()&mask(intBits(c.length)))))
		case 'x', 'X':
			vals = append(vals, fetch.UintValue(fetch.TypeX64, a.nextInt()&mask(intBits(c.length))))
		case 'c':
			vals = append(vals, fetch.DwarfValue(strconv.QuoteRune(rune(byte(a.nextInt())))))
		case 's':
			vals = append(vals, a.str(a.nextInt()))
		case 'p', 'n':
			vals = append(vals, fetch.UintValue(fetch.TypeX64, a.nextInt()))
		case 'f', 'F', 'e', 'E', 'g', 'G', 'a', 'A':
			if c.length == "L" {
				return append(vals, fetch.DwarfValue("?")) // a long double: not placed here
			}
			vals = append(vals, fetch.DwarfValue(strconv.FormatFloat(a.nextFloat(), 'g', -1, 64)))
		default:
			return vals // a conversion not known: where the rest are, is not
		}
	}
	return vals
}

// str reads the C string at addr, as a string fetch-arg reads it.
func (a *varArgs) str(addr uint64) fetch.Value {
	if addr == 0 {
		return fetch.DwarfValue("NULL")
	}
	s, ok := fetch.ReadString(a.mem, addr)
	if !ok {
		return fetch.FaultValue(fetch.TypeString)
	}
	return fetch.StringValue(s)
}

// stackWord reads the next word the caller left on the stack for the
// call.
func (a *varArgs) stackWord() uint64 {
	var b [8]byte
	at := stackArgBase(a.regs) + 8*uint64(a.stack)
	a.stack++
	if _, err := a.mem.ReadAt(b[:], int64(at)); err != nil {
		return 0
	}
	return binary.LittleEndian.Uint64(b[:])
}

func (a *varArgs) nextInt() uint64 {
	if a.gpr < intArgRegs {
		a.gpr++
		return intArgReg(a.regs, a.gpr-1)
	}
	return a.stackWord()
}

func (a *varArgs) nextFloat() float64 {
	if a.vec < vecArgRegs {
		a.vec++
		if fp := a.fp(); fp != nil {
			off := vecRegOffset + 16*(a.vec-1)
			return math.Float64frombits(binary.LittleEndian.Uint64(fp[off:]))
		}
		return math.NaN()
	}
	return math.Float64frombits(a.stackWord())
}

// intBits is the width of an integer conversion of length modifier l.
func intBits(l string) int {
	switch l {
	case "hh":
		return 8
	case "h":
		return 16
	case "l", "ll", "j", "z", "t", "q":
		return 64
	}
	return 32
}

func mask(bits int) uint64 {
	if bits == 64 {
		return ^uint64(0)
	}
	return 1<<bits - 1
}

// signed is the low bits of x as a signed integer.
func signed(x uint64, bits int) int64 {
	shift := 64 - bits
	return int64(x<<shift) >> shift
}

// formatParam is the index of a prototype's format parameter (its table
// type "format"), or -1.
func formatParam(fa *funcArgs) int {
	for i, s := range fa.slots {
		if s.format == "format" {
			return i
		}
	}
	return -1
}

// variadicFields appends to fields the arguments a printf-like call
// passed after its format, named argN after the fixed parameters; at a
// stop only (hit's registers, memory and vector registers).
func (t *Tracer) variadicFields(fa *funcArgs, hit *Hit, fields []fetch.Field) []fetch.Field {
	if fa.varFormat < 0 || fa.varFormat >= len(fields) {
		return fields
	}
	format := fields[fa.varFormat].Value
	if format.Faulted() || format.Type() != fetch.TypeString {
		return fields
	}
	env := t.envFor(hit)
	fp := env.FPRegs
	if fp == nil {
		fp = func() []byte { return nil }
	}
	a := &varArgs{regs: hit.regs, mem: env.Mem, fp: fp, argsTaken: fa.fixed}
	for i, v := range a.formatArgs(format.Str()) {
		fields = append(fields, fetch.Field{Name: fmt.Sprintf("arg%d", len(fa.slots)+i+1), Value: v})
	}
	return fields
}
