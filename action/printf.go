package action

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/probedbg/probe/probe"
)

// A printf action's format, as C's printf reads it (bpftrace's printf):
// %d %i %u %x %X %o %c %s %p and %%, with flags, width and precision;
// the length modifiers (h, hh, l, ll, z, j, t) are read and ignored, as
// every value is 64 bits here. A value that is a string (or faulted)
// given to a number's verb is shown as its text.

// formatPiece is a literal, then at most one verb.
type formatPiece struct {
	lit  string
	verb byte   // 0: none
	spec string // the verb as Go's fmt writes it
}

// compileFormat cuts format into pieces, checking that it has a verb for
// each of its n arguments.
func compileFormat(format string, n int) ([]formatPiece, error) {
	var pieces []formatPiece
	var lit strings.Builder
	verbs := 0
	for i := 0; i < len(format); i++ {
		c := format[i]
		if c != '%' {
			lit.WriteByte(c)
			continue
		}
		if i+1 < len(format) && format[i+1] == '%' {
			lit.WriteByte('%')
			i++
			continue
		}
		j := i + 1
		for j < len(format) && strings.IndexByte("-+ #0", format[j]) >= 0 {
			j++
		}
		for j < len(format) && (format[j] >= '0' && format[j] <= '9' || format[j] == '.') {
			j++
		}
		flags := format[i+1 : j]
		for j < len(format) && strings.IndexByte("hljzt", format[j]) >= 0 {
			j++
		}
		if j >= len(format) {
			return nil, fmt.Errorf("the format ends in the middle of %q", format[i:])
		}
		verb := format[j]
		spec := "%" + flags
		switch verb {
		case 'd', 'i', 'u':
			spec += "d"
		case 'x', 'X', 'o', 'c', 's':
			spec += string(verb)
		case 'p':
			spec = "%#" + strings.TrimPrefix(flags, "#") + "x"
		default:
			return nil, fmt.Errorf("%q: no such conversion (want d, i, u, x, X, o, c, s, p or %%)", format[i:j+1])
		}
		pieces = append(pieces, formatPiece{lit: lit.String(), verb: verb, spec: spec})
		lit.Reset()
		verbs++
		i = j
	}
	if lit.Len() > 0 {
		pieces = append(pieces, formatPiece{lit: lit.String()})
	}
	if verbs != n {
		return nil, fmt.Errorf("the format has %d conversions for %d arguments", verbs, n)
	}
	return pieces, nil
}

// printer is one printf action, compiled.
type printer struct {
	pieces []formatPiece
	args   []string
}

// appendText appends the text the action prints at hit h; value reads
// a number that is no field (duration, @MARK).
func (p *printer) appendText(b []byte, h *probe.Hit, value func(*probe.Hit, string) (int64, bool)) []byte {
	arg := 0
	for _, pc := range p.pieces {
		b = append(b, pc.lit...)
		if pc.verb == 0 {
			continue
		}
		name := p.args[arg]
		arg++
		switch name {
		case "comm":
			b = p.appendString(b, pc, h.Comm)
			continue
		case "pid":
			b = appendNumber(b, pc, int64(h.Pid), true)
			continue
		case "tid":
			b = appendNumber(b, pc, int64(h.Tid), true)
			continue
		case "cpu":
			b = appendNumber(b, pc, int64(h.CPU), true)
			continue
		}
		f := field(h, name)
		if f == nil {
			if v, ok := value(h, name); ok { // duration, @MARK
				b = appendNumber(b, pc, v, true)
			} else {
				b = append(b, '?')
			}
			continue
		}
		v := f.Value
		switch {
		case v.Type().IsString() && !v.Faulted():
			b = p.appendString(b, pc, v.Str())
		case v.Faulted() || v.Len() > 0:
			b = p.appendString(b, pc, v.String())
		default:
			b = appendNumber(b, pc, int64(v.Uint()), v.Type().Signed())
		}
	}
	return b
}

// appendString writes a string: as %s would, whatever the verb (a
// number's verb given a string shows the string).
func (p *printer) appendString(b []byte, pc formatPiece, s string) []byte {
	if pc.verb == 's' {
		return fmt.Appendf(b, pc.spec, s)
	}
	return append(b, s...)
}

// appendNumber writes v by pc's verb: signed for %d and %i where the
// value is, unsigned for %u, %x, %X, %o and %p; %s shows it in decimal.
func appendNumber(b []byte, pc formatPiece, v int64, signed bool) []byte {
	switch pc.verb {
	case 'd', 'i':
		if signed {
			return fmt.Appendf(b, pc.spec, v)
		}
		return fmt.Appendf(b, pc.spec, uint64(v))
	case 'c':
		return fmt.Appendf(b, pc.spec, rune(byte(v)))
	case 's':
		if signed {
			return fmt.Appendf(b, pc.spec, strconv.FormatInt(v, 10))
		}
		return fmt.Appendf(b, pc.spec, strconv.FormatUint(uint64(v), 10))
	default:
		return fmt.Appendf(b, pc.spec, uint64(v))
	}
}
