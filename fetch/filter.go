package fetch

// Event filters: the `if EXPR` suffix of a probe, in the syntax of ftrace
// event filters (kernel/trace/trace_events_filter.c):
//
//	FIELD OP VALUE    OP: == != < <= > >= & (numbers), == != ~ (strings)
//	EXPR && EXPR, EXPR || EXPR, !EXPR, (EXPR)    with C's precedence
//
// FIELD is a fetch-arg's name, or comm (COMM): the thread's name, as
// ftrace's generic comm field. Numbers are C-style (decimal, 0x hex, 0
// octal) and compare with the field's size and signedness; strings are in
// "..." or '...' (no escapes) and ~ matches a glob (*, ?, [...], [!...],
// \ to quote; a leading ! negates), as the kernel's glob_match.

import (
	"fmt"
	"strings"
)

const (
	maxFilterStr   = 256 // MAX_FILTER_STR_VAL: a string operand's limit
	maxFilterDepth = 100 // nesting of parentheses and !
)

type filterOp uint8

const (
	opGlob filterOp = iota
	opNE
	opEQ
	opLE
	opLT
	opGE
	opGT
	opBand
)

// filterOps in the order the kernel tries them ("<=" before "<").
var filterOps = [...]string{opGlob: "~", opNE: "!=", opEQ: "==", opLE: "<=", opLT: "<", opGE: ">=", opGT: ">", opBand: "&"}

type cmpKind uint8

const (
	cmpUnsigned cmpKind = iota
	cmpSigned           // sign-extended from size
	cmpString           // string, ustring, $comm
	cmpChars            // a char array, up to its first NUL
	cmpText             // a DWARF variable's text, without its quotes
	cmpComm             // the thread's comm (no such fetch-arg)
)

type filterPred struct {
	field int // index of the field; -1 for the thread's comm
	op    filterOp
	kind  cmpKind
	size  uint8 // for cmpSigned
	val   uint64
	pat   string
	neg   bool // a "!" at the start of a ~ pattern
}

type nodeKind uint8

const (
	nodePred nodeKind = iota
	nodeAnd
	nodeOr
	nodeNot
)

type filterNode struct {
	kind nodeKind
	l, r int32
	pred filterPred
}

type filter struct {
	text     string
	nodes    []filterNode
	root     int32
	needComm bool
}

type filterParser struct {
	s     string
	i     int
	args  []fetchArg
	f     *filter
	depth int
}

func compileFilter(text string, a *Args) (*filter, error) {
	p := &filterParser{s: text, args: a.args, f: &filter{text: text}}
	p.skip()
	if p.i == len(p.s) {
		return nil, &ArgError{Token: "if", Reason: "missing filter expression after \"if\"", filter: true}
	}
	root, err := p.or()
	if err != nil {
		return nil, err
	}
	p.skip()
	if p.i < len(p.s) {
		if p.s[p.i] == ')' {
			return nil, p.err("too many \")\"")
		}
		return nil, p.err("expected && or || before %q", p.rest())
	}
	p.f.root = root
	return p.f, nil
}

func (p *filterParser) err(format string, args ...any) error {
	return &ArgError{Token: p.s, Reason: formatReason(format, args...), filter: true}
}

func formatReason(format string, args ...any) string {
	if len(args) == 0 {
		return format
	}
	return fmt.Sprintf(format, args...)
}

func (p *filterParser) rest() string {
	r := p.s[p.i:]
	if len(r) > 20 {
		r = r[:20] + "..."
	}
	return r
}

func (p *filterParser) skip() {
	for p.i < len(p.s) && isFilterSpace(p.s[p.i]) {
		p.i++
	}
}

func isFilterSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'
}

func (p *filterParser) node(n filterNode) int32 {
	p.f.nodes = append(p.f.nodes, n)
	return int32(len(p.f.nodes) - 1)
}

func (p *filterParser) or() (int32, error)  { return p.chain("||", nodeOr, p.and) }
func (p *filterParser) and() (int32, error) { return p.chain("&&", nodeAnd, p.unary) }

// chain parses next (op next)*, left-associative.
func (p *filterParser) chain(op string, kind nodeKind, next func() (int32, error)) (int32, error) {
	l, err := next()
	if err != nil {
		return 0, err
	}
	for {
		p.skip()
		if !strings.HasPrefix(p.s[p.i:], op) {
			return l, nil
		}
		p.i += len(op)
		r, err := next()
		if err != nil {
			return 0, err
		}
		l = p.node(filterNode{kind: kind, l: l, r: r})
	}
}

func (p *filterParser) unary() (int32, error) {
	p.skip()
	if p.i == len(p.s) {
		return 0, p.err("expression ends where a comparison was expected")
	}
	p.depth++
	defer func() { p.depth-- }()
	if p.depth > maxFilterDepth {
		return 0, p.err("nested too deeply (max %d)", maxFilterDepth)
	}
	switch p.s[p.i] {
	case '!':
		// "!=" and "!~" are not a not (the kernel's is_not).
		if p.i+1 < len(p.s) && (p.s[p.i+1] == '=' || p.s[p.i+1] == '~') {
			return 0, p.err("missing field name before %q", p.rest())
		}
		p.i++
		x, err := p.unary()
		if err != nil {
			return 0, err
		}
		return p.node(filterNode{kind: nodeNot, l: x}), nil
	case '(':
		p.i++
		x, err := p.or()
		if err != nil {
			return 0, err
		}
		p.skip()
		if p.i == len(p.s) || p.s[p.i] != ')' {
			if p.i == len(p.s) {
				return 0, p.err("missing \")\"")
			}
			return 0, p.err("expected \")\" before %q", p.rest())
		}
		p.i++
		return x, nil
	}
	return p.pred()
}

func isFieldChar(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// pred parses FIELD OP VALUE, as the kernel's parse_pred.
func (p *filterParser) pred() (int32, error) {
	start := p.i
	for p.i < len(p.s) && isFieldChar(p.s[p.i]) {
		p.i++
	}
	name := p.s[start:p.i]
	if name == "" {
		return 0, p.err("expected a field name at %q", p.rest())
	}
	pr := filterPred{field: -1}
	var arg *fetchArg
	for i := range p.args {
		if p.args[i].name == name {
			pr.field, arg = i, &p.args[i]
			break
		}
	}
	if arg == nil && name != "comm" && name != "COMM" {
		return 0, p.err("unknown field %q (fields: %s)", name, p.fieldList())
	}
	if strings.HasPrefix(p.s[p.i:], ".ustring") { // every string here is a user string
		p.i += len(".ustring")
	}
	p.skip()
	op := -1
	for o, text := range filterOps {
		if strings.HasPrefix(p.s[p.i:], text) {
			op = o
			break
		}
	}
	if op < 0 {
		if p.i == len(p.s) {
			return 0, p.err("missing operator after %q", name)
		}
		return 0, p.err("expected an operator (== != < <= > >= & ~) after %q, not %q", name, p.rest())
	}
	pr.op = filterOp(op)
	p.i += len(filterOps[op])
	p.skip()
	if p.i == len(p.s) {
		return 0, p.err("missing value after %q", name+" "+filterOps[op])
	}

	// What the field compares as.
	isStr, isNum := false, true
	switch {
	case arg == nil:
		pr.kind, isStr, isNum = cmpComm, true, false
		p.f.needComm = true
	case arg.typ == TypeDwarf:
		pr.kind, isStr = cmpText, true // a number compares its raw value
		if _, ok := arg.dwarf.(DwarfIntType); ok {
			isStr = false // an integer of C or Go: no string is one
		}
	case arg.count > 0 && arg.typ == TypeChar:
		pr.kind, isStr, isNum = cmpChars, true, false
	case arg.count > 0:
		return 0, p.err("field %q is an array, which cannot be compared", name)
	case arg.typ.IsString():
		pr.kind, isStr, isNum = cmpString, true, false
	case arg.typ.Signed():
		pr.kind, pr.size = cmpSigned, fetchTypes[arg.typ].size
	default:
		pr.kind, pr.size = cmpUnsigned, fetchTypes[arg.typ].size
	}

	c := p.s[p.i]
	switch {
	case c == '"' || c == '\'':
		if pr.op != opEQ && pr.op != opNE && pr.op != opGlob {
			return 0, p.err("%s cannot compare strings (use ==, != or ~)", filterOps[op])
		}
		if !isStr {
			return 0, p.err("field %q is a number: compare it with a number, not a string", name)
		}
		end := strings.IndexByte(p.s[p.i+1:], c)
		if end < 0 {
			return 0, p.err("missing closing %c", c)
		}
		pat := p.s[p.i+1 : p.i+1+end]
		if len(pat) >= maxFilterStr {
			return 0, p.err("string %q is too long (max %d bytes)", pat[:20]+"...", maxFilterStr-1)
		}
		p.i += end + 2
		if pr.op == opGlob && strings.HasPrefix(pat, "!") {
			pr.neg, pat = true, pat[1:] // filter_parse_regex
		}
		pr.pat = pat
	case c >= '0' && c <= '9' || c == '-':
		if !isNum {
			return 0, p.err("field %q is a string: quote the value", name)
		}
		if pr.op == opGlob {
			return 0, p.err("~ matches strings: quote the pattern")
		}
		s := p.i
		if c == '-' {
			p.i++
		}
		for p.i < len(p.s) && isFieldChar(p.s[p.i]) {
			p.i++
		}
		num := p.s[s:p.i]
		if pr.kind == cmpText {
			pr.kind = cmpUnsigned
			if it, ok := arg.dwarf.(DwarfIntType); ok {
				size, signed := it.IntType()
				if size == 1 || size == 2 || size == 4 || size == 8 {
					pr.size = uint8(size)
					if signed {
						pr.kind = cmpSigned
					}
				}
			} else if c == '-' {
				pr.kind, pr.size = cmpSigned, 8
			}
		}
		v, err := p.number(num, name, arg, pr.kind == cmpSigned, pr.size)
		if err != nil {
			return 0, err
		}
		pr.val = v
	default:
		return 0, p.err("bad value %q (did you forget quotes?)", p.rest())
	}
	return p.node(filterNode{kind: nodePred, pred: pr}), nil
}

// number parses a filter's number for a field, as kstrtoll (signed
// fields) or kstrtoull; unlike the kernel, which would cut it to the
// field's size, a number that does not fit the field is refused.
func (p *filterParser) number(num, name string, arg *fetchArg, signed bool, size uint8) (uint64, error) {
	var typ string
	if arg != nil {
		typ = arg.typ.String()
	}
	if signed {
		v, ok := parseCInt(num)
		if !ok {
			return 0, p.err("bad number %q", num)
		}
		bits := 8 * uint(size)
		if size == 0 || size == 8 {
			return uint64(v), nil
		}
		// Accept the field's range, or its bits written as an unsigned number.
		if v < -(1<<(bits-1)) || v >= 1<<bits {
			return 0, p.err("%s does not fit field %q (%s)", num, name, typ)
		}
		return uint64(v) & valueMask(size), nil
	}
	if strings.HasPrefix(num, "-") {
		return 0, p.err("field %q is unsigned (%s): %s is negative", name, typ, num)
	}
	v, ok := parseCUint(num)
	if !ok {
		return 0, p.err("bad number %q", num)
	}
	if size != 0 && size < 8 && v > valueMask(size) {
		return 0, p.err("%s does not fit field %q (%s)", num, name, typ)
	}
	return v, nil
}

func (p *filterParser) fieldList() string {
	var b strings.Builder
	comm := false
	for i := range p.args {
		b.WriteString(p.args[i].name)
		b.WriteString(", ")
		comm = comm || p.args[i].name == "comm"
	}
	if !comm {
		b.WriteString("comm, ")
	}
	return strings.TrimSuffix(b.String(), ", ")
}

// Keep evaluates the filter over fetched fields: true when there is no
// filter, or the fields satisfy it.
func (a *Args) Keep(fields []Field) bool {
	if a == nil || a.filter == nil {
		return true
	}
	return a.filter.eval(a.filter.root, fields, a.comm)
}

func (f *filter) eval(n int32, fields []Field, comm string) bool {
	nd := &f.nodes[n]
	switch nd.kind {
	case nodeAnd:
		return f.eval(nd.l, fields, comm) && f.eval(nd.r, fields, comm)
	case nodeOr:
		return f.eval(nd.l, fields, comm) || f.eval(nd.r, fields, comm)
	case nodeNot:
		return !f.eval(nd.l, fields, comm)
	}
	return nd.pred.match(fields, comm)
}

// match evaluates one comparison. A value that faulted compares as 0 or
// as the empty string (the kernel stores 0 for a failed read).
func (pr *filterPred) match(fields []Field, comm string) bool {
	var v *Value
	if pr.field >= 0 {
		if pr.field >= len(fields) {
			return false
		}
		v = &fields[pr.field].Value
	}
	var s string
	switch pr.kind {
	case cmpComm:
		s = comm
	case cmpString, cmpText:
		if v.fault == 0 && v.n == 0 {
			s = v.str
			if pr.kind == cmpText && len(s) >= 2 && s[0] == '"' && s[len(s)-1] == '"' {
				s = s[1 : len(s)-1]
			}
		}
	case cmpChars:
		s = v.str
		if i := strings.IndexByte(s, 0); i >= 0 {
			s = s[:i]
		}
	case cmpUnsigned, cmpSigned:
		var x uint64
		if v.fault == 0 && v.n == 0 {
			x = v.bits
		}
		if pr.kind == cmpSigned {
			return compare(pr.op, signExtend(x, pr.size), signExtend(pr.val, pr.size))
		}
		return compare(pr.op, x, pr.val)
	}
	switch pr.op {
	case opEQ:
		return s == pr.pat
	case opNE:
		return s != pr.pat
	case opGlob:
		return globMatch(pr.pat, s) != pr.neg
	}
	return false
}

func signExtend(x uint64, size uint8) int64 {
	if size == 0 || size >= 8 {
		return int64(x)
	}
	shift := 64 - 8*uint(size)
	return int64(x<<shift) >> shift
}

// compare applies a numeric filter operator with the signedness of T.
func compare[T int64 | uint64](op filterOp, a, b T) bool {
	switch op {
	case opEQ:
		return a == b
	case opNE:
		return a != b
	case opLT:
		return a < b
	case opLE:
		return a <= b
	case opGT:
		return a > b
	case opGE:
		return a >= b
	case opBand:
		return a&b != 0
	}
	return false
}

// GlobMatch reports whether name matches pattern as ftrace's
// set_ftrace_filter and event filters match: by the kernel's glob_match,
// where * also runs over '/', so Go's "net/http.*" selects what it says.
func GlobMatch(pattern, name string) bool { return globMatch(pattern, name) }

// globMatch is the kernel's glob_match (lib/glob.c): the pattern matches
// all of str; * any run, ? one byte, [abc], [a-z] and [!...] classes (a
// malformed class is literal), \ quotes the next byte.
func globMatch(pat, str string) bool {
	at := func(s string, i int) byte {
		if i < len(s) {
			return s[i]
		}
		return 0
	}
	p, s := 0, 0
	backPat, backStr := -1, 0
	for {
		c := at(str, s)
		s++
		d := at(pat, p)
		p++
		matched := false
		switch d {
		case '?':
			if c == 0 {
				return false
			}
			continue
		case '*':
			if at(pat, p) == 0 {
				return true
			}
			backPat = p
			s--
			backStr = s
			continue
		case '[':
			cls := p
			inverted := at(pat, cls) == '!'
			if inverted {
				cls++
			}
			a := at(pat, cls)
			cls++
			malformed := false
			for {
				b := a
				if a == 0 {
					malformed = true
					break
				}
				if at(pat, cls) == '-' && at(pat, cls+1) != ']' {
					b = at(pat, cls+1)
					if b == 0 {
						malformed = true
						break
					}
					cls += 2
				}
				if a <= c && c <= b {
					matched = true
				}
				a = at(pat, cls)
				cls++
				if a == ']' {
					break
				}
			}
			if !malformed {
				if c != 0 && matched != inverted {
					p = cls
					continue
				}
				// backtrack
				if c == 0 || backPat < 0 {
					return false
				}
				p = backPat
				backStr++
				s = backStr
				continue
			}
			// a malformed class: '[' is a literal
		case '\\':
			d = at(pat, p)
			p++
		}
		if c == d {
			if d == 0 {
				return true
			}
			continue
		}
		if c == 0 || backPat < 0 {
			return false
		}
		p = backPat
		backStr++
		s = backStr
	}
}
