package fetch

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Fetch-args computed from others (bpftrace's arithmetic): NAME=EXPR,
// where EXPR names fetch-args before it, with integer constants, the
// operators + - * / % & | ^ << >> ~, unary minus and parentheses, C's
// precedence, no spaces (a spec's tokens are cut at them):
//
//	p:calloc nmemb=%di:u64 size=%si:u64 total=nmemb*size:u64
//
// It is worked out from the fields it names, where they are (a stop or a
// record: it reads nothing itself), in 64 bits, signed unless typed; a
// field it names that faulted, is a string or an array, or a division by
// zero, makes it (fault). Filters and an action's keys read it as any
// other field.

// ReadsDWARF reports whether a fetch-arg of tokens (a spec's, up to its
// filter) names a DWARF variable rather than a register, memory, a
// special variable ($retval...) or an expression over the fetch-args
// before it: a return probe then reads it after the prologue.
func ReadsDWARF(tokens []string) bool {
	var names []string
	for i, tok := range tokens {
		if tok == "if" {
			return false
		}
		name, body, named := strings.Cut(tok, "=")
		if !named {
			name, body = "arg"+strconv.Itoa(i+1), tok
		}
		fetch, _, _ := strings.Cut(body, ":")
		expr := named && isExprBody(fetch, names)
		names = append(names, name)
		if expr || body == "" {
			continue
		}
		switch body[0] {
		case '%', '@', '+', '-', '\\':
			continue
		case '$':
			if strings.HasPrefix(body, "$params") {
				return true
			}
			continue
		}
		return true
	}
	return false
}

// exprNode is one node of an expression: a constant, a field (by index),
// or an operator over l (and r).
type exprNode struct {
	op    string // "n": constant, "f": field; else the operator ("-u": unary minus)
	val   int64
	field int
	l, r  *exprNode
}

// isExprBody reports whether body is written as an expression over
// fields: it names one of names (not as a register, $var, @symbol or
// a DWARF member) and has an operator.
func isExprBody(body string, names []string) bool {
	if strings.ContainsAny(body, "$@.:\"'") || strings.Contains(body, "->") {
		return false
	}
	named, op := false, false
	for i := 0; i < len(body); {
		c := body[i]
		switch {
		case isIdentStart(c):
			j := i
			for j < len(body) && isIdentChar(body[j]) {
				j++
			}
			if (i == 0 || body[i-1] != '%') && slices.Contains(names, body[i:j]) {
				named = true
			}
			i = j
			continue
		case strings.IndexByte("*/&|^<>~", c) >= 0:
			op = true
		case c == '%' && i > 0 && (isIdentChar(body[i-1]) || body[i-1] == ')'):
			op = true // modulo: after an operand (a register's % starts one)
		case (c == '+' || c == '-') && i > 0:
			op = true
		case c == '-' && len(body) > 1 && isIdentStart(body[1]):
			op = true // a minus of a field (-8(%sp) is a dereference)
		}
		i++
	}
	return named && op
}

// isIdentStart and isIdentChar are a name's first and other bytes
// (isIdent).
func isIdentStart(c byte) bool { return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }
func isIdentChar(c byte) bool  { return isIdentStart(c) || c >= '0' && c <= '9' }

// exprParser reads an expression by precedence climbing.
type exprParser struct {
	s     string
	i     int
	names []string
	err   string
}

// binaryOps are the binary operators by precedence, lowest first (C's).
var binaryOps = [][]string{{"|"}, {"^"}, {"&"}, {"<<", ">>"}, {"+", "-"}, {"*", "/", "%"}}

// parseExpr compiles body, an expression over the fields names.
func parseExpr(body string, names []string) (*exprNode, string) {
	p := &exprParser{s: body, names: names}
	n := p.binary(0)
	if p.err == "" && p.i < len(p.s) {
		p.fail("unexpected %q", p.s[p.i:])
	}
	return n, p.err
}

func (p *exprParser) fail(format string, a ...any) {
	if p.err == "" {
		p.err = "in the expression: " + fmt.Sprintf(format, a...)
	}
}

func (p *exprParser) binary(level int) *exprNode {
	if level == len(binaryOps) {
		return p.unary()
	}
	l := p.binary(level + 1)
	for p.err == "" {
		op := ""
		for _, o := range binaryOps[level] {
			if strings.HasPrefix(p.s[p.i:], o) {
				op = o
				break
			}
		}
		if op == "" {
			return l
		}
		p.i += len(op)
		r := p.binary(level + 1)
		l = &exprNode{op: op, l: l, r: r}
	}
	return l
}

func (p *exprParser) unary() *exprNode {
	if p.i >= len(p.s) {
		p.fail("an operand is missing at its end")
		return nil
	}
	switch c := p.s[p.i]; {
	case c == '-' || c == '~':
		p.i++
		op := "~"
		if c == '-' {
			op = "-u"
		}
		return &exprNode{op: op, l: p.unary()}
	case c == '(':
		p.i++
		n := p.binary(0)
		if p.i >= len(p.s) || p.s[p.i] != ')' {
			p.fail("a \"(\" is not closed")
			return n
		}
		p.i++
		return n
	case c >= '0' && c <= '9':
		j := p.i
		for j < len(p.s) && isIdentChar(p.s[j]) {
			j++
		}
		v, err := strconv.ParseUint(p.s[p.i:j], 0, 64)
		if err != nil {
			p.fail("bad number %q", p.s[p.i:j])
		}
		p.i = j
		return &exprNode{op: "n", val: int64(v)}
	case isIdentStart(c):
		j := p.i
		for j < len(p.s) && isIdentChar(p.s[j]) {
			j++
		}
		name := p.s[p.i:j]
		p.i = j
		if k := slices.Index(p.names, name); k >= 0 {
			return &exprNode{op: "f", field: k}
		}
		p.fail("%q is not a fetch-arg before it (fetch-args: %s)", name, strings.Join(p.names, ", "))
		return nil
	}
	p.fail("unexpected %q", p.s[p.i:])
	return nil
}

// eval works the expression out from fields (the hit's, in order);
// false if a field it names has no number, or it divides by zero.
func (n *exprNode) eval(fields []Field) (int64, bool) {
	switch n.op {
	case "n":
		return n.val, true
	case "f":
		if n.field >= len(fields) {
			return 0, false
		}
		v := fields[n.field].Value
		if v.Faulted() || v.Type().IsString() || v.Len() > 0 {
			return 0, false
		}
		if v.Type() == TypeDwarf { // (a DWARF variable: a number if its text is one)
			if i, err := strconv.ParseInt(v.str, 0, 64); err == nil {
				return i, true
			}
			u, err := strconv.ParseUint(v.str, 0, 64)
			return int64(u), err == nil
		}
		if v.Type().Signed() {
			return v.Int(), true
		}
		return int64(v.Uint()), true
	}
	l, ok := n.l.eval(fields)
	if !ok {
		return 0, false
	}
	switch n.op {
	case "-u":
		return -l, true
	case "~":
		return ^l, true
	}
	r, ok := n.r.eval(fields)
	if !ok {
		return 0, false
	}
	switch n.op {
	case "+":
		return l + r, true
	case "-":
		return l - r, true
	case "*":
		return l * r, true
	case "/", "%":
		if r == 0 || l == -1<<63 && r == -1 {
			return 0, false
		}
		if n.op == "/" {
			return l / r, true
		}
		return l % r, true
	case "&":
		return l & r, true
	case "|":
		return l | r, true
	case "^":
		return l ^ r, true
	case "<<":
		return l << (uint64(r) & 63), true
	case ">>":
		return l >> (uint64(r) & 63), true
	}
	return 0, false
}

// Portable reports whether tokens (a spec's fetch-args and filter)
// compile the same from their text alone, with nothing of the process:
// no DWARF name, no symbol's address, no symbol shown (:symbol). A
// recording can then keep the text and the hits' records raw, and
// compile them again when it is read (probe record's raw capture).
func Portable(tokens []string, ret bool) bool {
	a, err := Compile(tokens, CompileEnv{Return: ret})
	if err != nil {
		return false
	}
	for i := range a.args {
		if a.args[i].typ == TypeSymbol || a.args[i].base == baseDwarf || a.args[i].typ == TypeDwarf {
			return false
		}
	}
	return true
}
