// Package fetch is the probe language, parsed once for every kind of
// probe as the kernel's trace_probe.c parses it: a probe's definition
// (ParseSpec), its fetch-args and filter compiled (Compile) and read at
// a hit (Args.Fetch, Args.Keep), the values read (Field, Value, Type),
// and what code run in the tracee must read for them (Args.Lower).
//
//	s, _ := fetch.ParseSpec("p:malloc size=%di:u64 if size > 4096")
//	a, _ := fetch.Compile(s.Args, fetch.CompileEnv{})
//	fields := a.Fetch(&fetch.HitEnv{Regs: regs, Mem: mem}, nil)
//	if a.Keep(fields) { ... }
//
// Where a probe goes and how a hit is taken is the probe package's.
package fetch

// Fetch-args: the kprobe_events / uprobe_events argument grammar, compiled
// once when a probe is added and evaluated at every hit.
//
//	[NAME=]FETCH[:TYPE]
//
// as kernel/trace/trace_probe.c parses it (traceprobe_parse_probe_arg,
// parse_probe_arg, parse_probe_vars, __parse_bitfield_probe_arg), with the
// user-space additions of perf probe: assembler register names, @SYM for
// uprobes, $argN at any entry probe and DWARF variable expressions.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// ErrBadInput marks errors caused by what the user asked for (a malformed
// spec, an unknown symbol, an unprobeable address), as opposed to runtime
// failures. Test with errors.Is.
var ErrBadInput = errors.New("bad input")

// Memory is the tracee's memory.
type Memory interface {
	ReadAt(p []byte, addr int64) (int, error)
	WriteAt(p []byte, addr int64) (int, error)
}

// CompileEnv is what compiling fetch-args needs from the tracer.
type CompileEnv struct {
	Return bool // compiling for a return probe: $retval allowed
	// Syscall: compiling for a syscall probe: $argN are the system
	// call's arguments (six, in registers).
	Syscall bool
	// ResolveSymbol gives the runtime address of a data or function
	// symbol, for @SYM.
	ResolveSymbol func(name string) (uint64, error)
	// DWARF compiles a variable expression at the probe address; nil when
	// the module has no debug info (then a DWARF name is an error saying
	// so). The string is the whole token's FETCH part, e.g. "req->path".
	DWARF func(expr string) (DwarfVar, error)
	// Params lists the parameter names of the probed function, for
	// $params (nil = no debug info).
	Params func() ([]string, error)
}

// DwarfVar is a variable compiled by the DWARF layer.
type DwarfVar interface {
	// Read evaluates the variable at a hit. raw is its value as an integer
	// (pointers: the address; integers: zero-extended bits; other types:
	// 0) for TYPE casts and filters; text is its natural rendering (ints
	// as ints, char* as a quoted string, structs compactly {a=1,b=2}).
	Read(h *HitEnv) (raw uint64, text string, err error)
}

// DwarfIntType may be implemented by a DwarfVar that is an integer. A
// filter then compares it with its own size and signedness; without it, a
// DWARF field compares as an unsigned 64-bit number (or signed, when the
// filter's number is negative).
type DwarfIntType interface {
	IntType() (size int, signed bool)
}

// HitEnv is what fetching reads at a hit.
type HitEnv struct {
	Regs *unix.PtraceRegs
	// FPRegs, if not nil, reads the thread's floating-point and SSE
	// registers (PTRACE_GETFPREGS's layout), for DWARF variables there;
	// nil where they are not known (a record of the tracee's).
	FPRegs    func() []byte
	Mem       Memory // the tracee's memory; reads may fail: (fault)
	Comm      string
	Symbolize func(addr uint64) string // "sym+0xoff/0xsize", or "" if unknown
}

// Args is a compiled list of fetch-args and an optional filter. Fetch and
// Keep are meant to run on the tracer's ptrace thread; an Args may be
// fetched from several goroutines at once, but Keep uses the comm of the
// last Fetch on the same Args (for filters on the thread's comm), so call
// it right after Fetch on the same goroutine.
type Args struct {
	args       []fetchArg
	names      []string
	filter     *filter
	retval     bool
	stackWords uint64 // stack words read in one go when any $stackN/$argN needs them
	readsMem   bool   // some fetch-arg reads memory: Fetch needs a scratch buffer
	comm       string // the thread's comm at the last Fetch, for filters on comm
}

// Limits, as the kernel's (kernel/trace/trace_probe.h).
const (
	maxFetchArgs   = 128 // MAX_TRACE_ARGS
	maxArgNameLen  = 32  // MAX_ARG_NAME_LEN
	maxDerefs      = 12  // FETCH_INSN_MAX 16: fetch + 12 derefs + store + modify + end
	maxArgNum      = 2048
	maxStackBatch  = 64 // words of stack read in one go
	fetchWordBytes = 8
)

// reservedFieldNames are the kernel's (reserved_field_names).
var reservedFieldNames = []string{
	"common_type", "common_flags", "common_preempt_count", "common_pid",
	"common_tgid", "__probe_ip", "__probe_ret_ip", "__probe_func",
}

type baseOp uint8

const (
	baseReg     baseOp = iota + 1 // a register, or part of one
	baseStack                     // the word at sp + 8*imm
	baseImm                       // an immediate, or an address
	baseComm                      // the thread's comm
	baseData                      // an immediate string
	baseDwarf                     // a DWARF variable's raw value
	baseExpr                      // worked out from the fields before it (expr.go)
	baseIndexed                   // a register plus another times a scale (an SDT note's x86 operand)
)

// fetchArg is one compiled fetch-arg: a base value, dereferences (the
// last one is where the value itself is read), a store type, an optional
// bitfield and an array length.
type fetchArg struct {
	name  string
	base  baseOp
	reg   regDesc
	index regDesc // baseIndexed's, times imm (reg: none if its width is 0)
	imm   uint64
	data  string
	dwarf DwarfVar
	expr  *exprNode // baseExpr's
	// dwarfRec says whether the DWARF variable reads nothing but
	// registers and stack words (dwarfrecord.go): 0 not known yet, 1
	// yes, -1 no.
	dwarfRec int8
	derefs   []int64 // offsets, innermost first
	typ      Type
	count    uint8
	bf       bool
	lsh      uint8
	rsh      uint8
}

// ArgError is bad input in a fetch-arg or a filter. It is an ErrBadInput;
// Err is the DWARF or symbol layer's error, when that is the cause.
type ArgError struct {
	Token  string // the fetch-arg token, or the filter expression
	Reason string
	Err    error
	filter bool
}

// Is makes every ArgError an ErrBadInput.
func (e *ArgError) Is(target error) bool { return target == ErrBadInput }

func (e *ArgError) Unwrap() error { return e.Err }

func (e *ArgError) Error() string {
	if e.filter {
		return "bad filter " + strconv.Quote(e.Token) + ": " + e.Reason
	}
	if strings.Contains(e.Reason, strconv.Quote(e.Token)) {
		return e.Reason // it names the token already
	}
	return e.Reason + " in " + strconv.Quote(e.Token)
}

func argErr(tok, format string, args ...any) error {
	return &ArgError{Token: tok, Reason: fmt.Sprintf(format, args...)}
}

// wrapErr wraps a callback's error, kept on one line.
func wrapErr(tok, what string, err error) error {
	msg := strings.Join(strings.Fields(err.Error()), " ")
	if !strings.Contains(msg, what) {
		msg = what + ": " + msg
	}
	return &ArgError{Token: tok, Reason: msg, Err: err}
}

// Compile compiles a probe's fetch-arg tokens (Spec.Args): every token
// up to one that is exactly "if" is a fetch-arg; the tokens after it,
// joined by single spaces, are the filter.
func Compile(tokens []string, env CompileEnv) (*Args, error) {
	a := &Args{}
	var filterText string
	hasFilter := false
	for i, tok := range tokens {
		if tok == "if" {
			filterText = strings.Join(tokens[i+1:], " ")
			hasFilter = true
			tokens = tokens[:i]
			break
		}
	}
	c := compiler{env: &env, args: a}
	for _, tok := range tokens {
		if err := c.compileToken(tok); err != nil {
			return nil, err
		}
	}
	for i := range a.args {
		f := &a.args[i]
		a.names = append(a.names, f.name)
		if f.base == baseStack && f.imm < maxStackBatch && f.imm+1 > a.stackWords {
			a.stackWords = f.imm + 1
		}
		if f.base == baseStack || len(f.derefs) > 0 || f.base == baseImm && f.typ.IsString() {
			a.readsMem = true
		}
	}
	if hasFilter {
		f, err := compileFilter(filterText, a)
		if err != nil {
			return nil, err
		}
		a.filter = f
	}
	return a, nil
}

// Names returns the field names, in order.
func (a *Args) Names() []string {
	if a == nil {
		return nil
	}
	return append([]string(nil), a.names...)
}

// Len returns the number of fields Fetch appends.
func (a *Args) Len() int {
	if a == nil {
		return 0
	}
	return len(a.args)
}

// HasRetval reports whether some fetch-arg reads $retval.
func (a *Args) HasRetval() bool { return a != nil && a.retval }

// Filter returns the filter expression ("" when there is none).
func (a *Args) Filter() string {
	if a == nil || a.filter == nil {
		return ""
	}
	return a.filter.text
}

type compiler struct {
	env  *CompileEnv
	args *Args
}

func (c *compiler) compileToken(tok string) error {
	if len(c.args.args) >= maxFetchArgs {
		return argErr(tok, "too many fetch-args (max %d)", maxFetchArgs)
	}
	name, body, named := strings.Cut(tok, "=")
	if !named {
		name, body = "", tok
	} else if name == "" {
		return argErr(tok, "missing argument name before \"=\"")
	}
	if body == "" {
		return argErr(tok, "missing fetch argument")
	}
	fetch, typ, typed := strings.Cut(body, ":")
	if fetch == "" {
		return argErr(tok, "missing fetch argument before \":\"")
	}
	if typed && typ == "" {
		return argErr(tok, "missing type after \":\"")
	}
	if fetch == "$params" || fetch == "$arg*" {
		return c.compileParams(tok, fetch, named, typ, typed)
	}
	if named {
		if err := checkArgName(tok, name); err != nil {
			return err
		}
	} else {
		name = c.defaultName(fetch, typ, typed)
	}
	if names := c.args.argNames(); named && isExprBody(fetch, names) {
		return c.compileExpr(tok, name, fetch, typ, typed, names)
	}
	f, err := c.compileBody(tok, fetch, typ, typed)
	if err != nil {
		return err
	}
	f.name = name
	return c.add(tok, f, named)
}

// compileParams expands $params (perf probe) or $arg* (the kernel's
// BTF form) into one DWARF fetch-arg per parameter, named after it.
func (c *compiler) compileParams(tok, fetch string, named bool, typ string, typed bool) error {
	if named {
		return argErr(tok, "%s expands to one argument per parameter: it cannot be named", fetch)
	}
	if c.env.Params == nil {
		return argErr(tok, "%s needs debug info (DWARF), and the probed module has none", fetch)
	}
	params, err := c.env.Params()
	if err != nil {
		return wrapErr(tok, fetch, err)
	}
	for _, p := range params {
		if len(c.args.args) >= maxFetchArgs {
			return argErr(tok, "too many fetch-args (max %d)", maxFetchArgs)
		}
		f, err := c.compileBody(tok, p, typ, typed)
		if err != nil {
			return err
		}
		f.name = sanitizeArgName(p)
		if f.name == "" {
			f.name = "arg" + strconv.Itoa(len(c.args.args)+1)
		}
		if err := c.add(tok, f, false); err != nil {
			return err
		}
	}
	return nil
}

func (c *compiler) add(tok string, f fetchArg, named bool) error {
	for _, r := range reservedFieldNames {
		if f.name == r {
			return argErr(tok, "argument name %q is reserved", f.name)
		}
	}
	for i := range c.args.args {
		if c.args.args[i].name == f.name {
			if named {
				return argErr(tok, "argument name %q is used twice", f.name)
			}
			return argErr(tok, "argument name %q is used twice (name this one with NAME=)", f.name)
		}
	}
	c.args.args = append(c.args.args, f)
	return nil
}

// compileExpr compiles NAME=EXPR, a fetch-arg worked out from those
// before it (names), of an integer type (s64 unless typed).
func (c *compiler) compileExpr(tok, name, body, typ string, typed bool, names []string) error {
	f := fetchArg{name: name, base: baseExpr, typ: TypeS64}
	n, why := parseExpr(body, names)
	if why != "" {
		return argErr(tok, "%s", why)
	}
	f.expr = n
	if typed {
		if err := parseFetchType(tok, typ, &f); err != nil {
			return err
		}
		if info := f.typ.info(); info.str || info.size == 0 || f.bf || f.count > 0 {
			return argErr(tok, "an expression is an integer: type %q cannot be", typ)
		}
	}
	return c.add(tok, f, true)
}

// argNames is the fetch-args' names so far.
func (a *Args) argNames() []string {
	names := make([]string, len(a.args))
	for i := range a.args {
		names[i] = a.args[i].name
	}
	return names
}

func checkArgName(tok, name string) error {
	if len(name) > maxArgNameLen {
		return argErr(tok, "argument name %q is too long (max %d)", name, maxArgNameLen)
	}
	if !isIdent(name) {
		return argErr(tok, "bad argument name %q (want letters, digits and _, not starting with a digit)", name)
	}
	return nil
}

// defaultName names an unnamed fetch-arg. As the kernel: "arg" and the
// argument's position from 1. A DWARF variable is named as perf probe
// names it (tools/perf/util/probe-event.c parse_perf_probe_arg and
// probe-finder.c find_variable): by its last field name, not an array
// index (req->method: "method", p->a.b[3]: "b", arr[2]: "arr"), and a
// plain variable by itself, its type appended after "_" when one is given
// (req: "req", len:u32: "len_u32").
func (c *compiler) defaultName(fetch, typ string, typed bool) string {
	if isDwarfStart(fetch) {
		if n := sanitizeArgName(perfArgName(fetch, typ, typed)); n != "" {
			return n
		}
	}
	return "arg" + strconv.Itoa(len(c.args.args)+1)
}

func perfArgName(expr, typ string, typed bool) string {
	expr = strings.TrimLeft(expr, "*")
	i := strings.IndexAny(expr, "-.[")
	if i < 0 {
		if typed {
			return expr + "_" + typ
		}
		return expr
	}
	good, rest := expr[:i], expr[i:]
	for rest != "" {
		switch {
		case rest[0] == '[':
			j := strings.IndexByte(rest, ']')
			if j < 0 {
				return good
			}
			rest = rest[j+1:]
			continue
		case strings.HasPrefix(rest, "->"):
			rest = rest[2:]
		case rest[0] == '.':
			rest = rest[1:]
		default:
			return good
		}
		end := strings.IndexAny(rest, "-.[")
		if end < 0 {
			end = len(rest)
		}
		if rest[:end] != "" {
			good = rest[:end]
		}
		rest = rest[end:]
	}
	return good
}

// FieldName is s made a field's name, as $params names a parameter's
// field: what a name cannot hold turned into "_", cut to the longest
// name; "" where s cannot be one (empty, or a name the kernel keeps).
func FieldName(s string) string {
	if name := sanitizeArgName(s); !slices.Contains(reservedFieldNames, name) {
		return name
	}
	return ""
}

// sanitizeArgName turns what cannot be in an event field name into "_".
func sanitizeArgName(s string) string {
	if s == "" {
		return ""
	}
	b := []byte(s)
	for i, ch := range b {
		if !(ch == '_' || ch >= 'a' && ch <= 'z' || ch >= 'A' && ch <= 'Z' || ch >= '0' && ch <= '9') {
			b[i] = '_'
		}
	}
	if b[0] >= '0' && b[0] <= '9' {
		b = append([]byte{'_'}, b...)
	}
	if len(b) > maxArgNameLen {
		b = b[:maxArgNameLen]
	}
	return string(b)
}

func isDwarfStart(s string) bool {
	s = strings.TrimLeft(s, "*") // *p: what p points to
	return s != "" && (s[0] == '_' || s[0] >= 'a' && s[0] <= 'z' || s[0] >= 'A' && s[0] <= 'Z')
}

// compileBody compiles FETCH[:TYPE] (the type already split off).
func (c *compiler) compileBody(tok, fetch, typ string, typed bool) (fetchArg, error) {
	var f fetchArg
	count := 0
	if typed {
		if i := strings.IndexByte(typ, '['); i >= 0 {
			inner := typ[i+1:]
			j := strings.IndexByte(inner, ']')
			if j < 0 {
				return f, argErr(tok, "array type %q has no closing \"]\"", typ)
			}
			if j != len(inner)-1 {
				return f, argErr(tok, "junk %q after the array length", inner[j+1:])
			}
			n, ok := parseCUint(inner[:j])
			if !ok || n == 0 {
				return f, argErr(tok, "bad array length %q", inner[:j])
			}
			if n > MaxArrayLen {
				return f, argErr(tok, "array length %d is too big (max %d)", n, MaxArrayLen)
			}
			count = int(n)
			typ = typ[:i]
		}
	}
	if err := c.parseFetch(tok, fetch, &f, 0); err != nil {
		return f, err
	}

	// $comm and immediate strings are strings, never arrays.
	if f.base == baseComm || f.base == baseData {
		if count > 0 || typed && typ != "string" {
			return f, argErr(tok, "%s can only be of type string", fetch)
		}
		f.typ = TypeString
		return f, nil
	}
	switch {
	case typed:
		if err := parseFetchType(tok, typ, &f); err != nil {
			return f, err
		}
	case f.base == baseDwarf && len(f.derefs) == 0:
		f.typ = TypeDwarf // printed in its own type
	case f.base == baseReg && len(f.derefs) == 0 && f.reg.width < 64:
		f.typ = [...]Type{1: TypeX8, 2: TypeX16, 4: TypeX32}[f.reg.width/8]
	default:
		f.typ = TypeX64
	}
	f.count = uint8(count)

	// A DWARF variable typed as a string or an array is a pointer to it,
	// as the kernel treats a BTF char * (check_prepare_btf_string_fetch).
	if f.base == baseDwarf && len(f.derefs) == 0 && (f.typ.IsString() || count > 0) {
		f.derefs = append(f.derefs, 0)
	}
	if f.typ.IsString() && len(f.derefs) == 0 && (f.base != baseImm || count > 0) {
		return f, argErr(tok, "type %s needs a memory reference (e.g. +0(%s):%s)", typ, fetch, typ)
	}
	if count > 0 && len(f.derefs) == 0 {
		return f, argErr(tok, "an array needs a memory reference (e.g. +0(%s):%s[%d])", fetch, typ, count)
	}
	return f, nil
}

// parseFetchType parses TYPE (without [N]).
func parseFetchType(tok, typ string, f *fetchArg) error {
	if typ != "" && typ[0] == 'b' {
		return parseBitfield(tok, typ, f)
	}
	for t := TypeU8; t < TypeDwarf; t++ {
		if t.String() == typ {
			f.typ = t
			return nil
		}
	}
	return argErr(tok, "bad type %q (want u8-u64, s8-s64, x8-x64, char, string, ustring, symbol, b<width>@<offset>/<size> or TYPE[N])", typ)
}

// parseBitfield parses b<width>@<offset>/<container-size>: the bits are
// shifted out of a container-size read and printed as its unsigned type,
// as the kernel's __parse_bitfield_probe_arg and find_fetch_type.
func parseBitfield(tok, typ string, f *fetchArg) error {
	bad := func() error {
		return argErr(tok, "bad bitfield %q (want b<width>@<offset>/<container-size>, container 8, 16, 32 or 64)", typ)
	}
	bw, rest := parseCPrefix(typ[1:])
	if bw == 0 || !strings.HasPrefix(rest, "@") {
		return bad()
	}
	s := rest[1:]
	bo, rest := parseCPrefix(s)
	if len(rest) == len(s) || !strings.HasPrefix(rest, "/") {
		return bad()
	}
	bs, ok := parseCUint(rest[1:])
	if !ok {
		return bad()
	}
	switch bs {
	case 8:
		f.typ = TypeU8
	case 16:
		f.typ = TypeU16
	case 32:
		f.typ = TypeU32
	case 64:
		f.typ = TypeU64
	default:
		return bad()
	}
	if bw > bs || bo > bs || bw+bo > bs {
		return argErr(tok, "bitfield %q does not fit in %d bits", typ, bs)
	}
	f.bf = true
	f.lsh = uint8(bs - (bw + bo))
	f.rsh = uint8(bs - bw)
	return nil
}

// parseFetch parses FETCH, recursing into dereferences.
func (c *compiler) parseFetch(tok, s string, f *fetchArg, depth int) error {
	if s == "" {
		return argErr(tok, "empty fetch argument")
	}
	switch s[0] {
	case '$':
		return c.parseVar(tok, s, f)
	case '%':
		r, ok := fetchRegs[s[1:]]
		if !ok {
			return argErr(tok, "unknown register %q", s)
		}
		f.base, f.reg = baseReg, r
		return nil
	case '@':
		if len(s) > 1 && s[1] >= '0' && s[1] <= '9' {
			addr, ok := parseCUint(s[1:])
			if !ok {
				return argErr(tok, "bad address %q", s)
			}
			f.base, f.imm = baseImm, addr
		} else if len(s) > 1 && s[1] == '+' {
			return argErr(tok, "file offsets (%s) are not supported: use @SYM[+OFFS] or @0xADDR", s)
		} else {
			addr, err := c.resolve(tok, s[1:])
			if err != nil {
				return err
			}
			f.base, f.imm = baseImm, addr
		}
		f.derefs = append(f.derefs, 0)
		return c.checkDepth(tok, f)
	case '+', '-':
		r := s
		if len(r) > 1 && r[1] == 'u' { // +u/-u: a user-space dereference; ours all are
			r = r[:1] + r[2:]
		}
		if r[0] == '+' {
			r = r[1:]
		}
		open := strings.IndexByte(r, '(')
		if open < 0 {
			return argErr(tok, "dereference %q needs \"(\": want +|-OFFS(FETCH)", s)
		}
		off, ok := parseCInt(r[:open])
		if !ok {
			return argErr(tok, "bad dereference offset %q in %q", r[:open], s)
		}
		inner := r[open+1:]
		end := strings.LastIndexByte(inner, ')')
		if end < 0 {
			return argErr(tok, "dereference %q has no closing \")\"", s)
		}
		if end != len(inner)-1 {
			return argErr(tok, "junk %q after dereference %q", inner[end+1:], s[:len(s)-len(inner)+end+1])
		}
		if depth >= maxDerefs {
			return argErr(tok, "too many dereferences (max %d)", maxDerefs)
		}
		if strings.Contains(inner[:end], ",") && !strings.Contains(inner[:end], "(") {
			if err := parseIndexed(tok, inner[:end], f); err != nil {
				return err
			}
			f.derefs = append(f.derefs, off)
			return c.checkDepth(tok, f)
		}
		if err := c.parseFetch(tok, inner[:end], f, depth+1); err != nil {
			return err
		}
		if f.base == baseComm || f.base == baseData {
			return argErr(tok, "%s cannot be dereferenced", inner[:end])
		}
		f.derefs = append(f.derefs, off)
		return c.checkDepth(tok, f)
	case '\\':
		if len(s) > 1 && s[1] == '"' {
			str := s[2:]
			if !strings.HasSuffix(str, `"`) {
				return argErr(tok, "immediate string %q has no closing quote", s)
			}
			f.base, f.data = baseData, str[:len(str)-1]
			return nil
		}
		v, ok := parseImmediate(s[1:])
		if !ok {
			return argErr(tok, "bad immediate %q (want \\NUM, decimal or 0x hex, or \\\"STRING\")", s)
		}
		f.base, f.imm = baseImm, v
		return nil
	}
	if isDwarfStart(s) {
		return c.compileDwarf(tok, s, f)
	}
	return argErr(tok, "bad fetch argument %q", s)
}

// parseIndexed parses an x86 indexed address, "%BASE,%INDEX[,SCALE]"
// (the base may be left out: ",%INDEX,SCALE"), as gcc writes an array
// element in an SDT note (8@(%rdi,%rdx,8)): the base of f's first
// dereference.
func parseIndexed(tok, s string, f *fetchArg) error {
	parts := strings.Split(s, ",")
	if len(parts) < 2 || len(parts) > 3 {
		return argErr(tok, "bad indexed address %q (want %%BASE,%%INDEX[,SCALE])", s)
	}
	reg := func(name string) (regDesc, error) {
		r, ok := fetchRegs[strings.TrimPrefix(name, "%")]
		if !ok || !strings.HasPrefix(name, "%") || r.width != 64 || r.shift != 0 || r.idx == regPC {
			return regDesc{}, argErr(tok, "bad register %q in indexed address %q (want a 64-bit general register)", name, s)
		}
		return r, nil
	}
	var err error
	if parts[0] != "" {
		if f.reg, err = reg(parts[0]); err != nil {
			return err
		}
	}
	if f.index, err = reg(parts[1]); err != nil {
		return err
	}
	f.imm = 1
	if len(parts) == 3 {
		switch parts[2] {
		case "1", "2", "4", "8":
			f.imm = uint64(parts[2][0] - '0')
		default:
			return argErr(tok, "bad scale %q in indexed address %q (want 1, 2, 4 or 8)", parts[2], s)
		}
	}
	f.base = baseIndexed
	return nil
}

func (c *compiler) checkDepth(tok string, f *fetchArg) error {
	if len(f.derefs) > maxDerefs {
		return argErr(tok, "too many dereferences (max %d)", maxDerefs)
	}
	return nil
}

// parseVar parses $retval, $stack, $stackN, $argN and $comm.
func (c *compiler) parseVar(tok, s string, f *fetchArg) error {
	v := s[1:]
	switch {
	case v == "retval":
		if !c.env.Return {
			return argErr(tok, "$retval is only available in a return probe (r:)")
		}
		f.base, f.reg = baseReg, regDesc{idx: regResult, width: 64}
		c.args.retval = true
		return nil
	case v == "comm" || v == "COMM":
		f.base = baseComm
		return nil
	case v == "stack":
		f.base, f.reg = baseReg, regDesc{idx: regSP, width: 64}
		return nil
	case strings.HasPrefix(v, "stack") && len(v) > 5 && isDigits(v[5:]):
		n, err := strconv.ParseUint(v[5:], 10, 64)
		if err != nil {
			return argErr(tok, "bad stack slot %q", s)
		}
		f.base, f.imm = baseStack, n
		return nil
	case strings.HasPrefix(v, "arg") && len(v) > 3 && isDigits(v[3:]):
		n, err := strconv.ParseUint(v[3:], 10, 64)
		if err != nil || n == 0 || n > maxArgNum {
			return argErr(tok, "bad argument number %q (want $arg1 to $arg%d)", s, maxArgNum)
		}
		if c.env.Return {
			return argErr(tok, "%s is only available in an entry probe: at a return the argument registers no longer hold the arguments", s)
		}
		if c.env.Syscall {
			if n > uint64(len(syscallArgRegs)) {
				return argErr(tok, "bad argument number %q (a system call has $arg1 to $arg%d)", s, len(syscallArgRegs))
			}
			f.base, f.reg = baseReg, regDesc{idx: syscallArgRegs[n-1], width: 64}
		} else if n <= uint64(len(fetchArgRegs)) {
			f.base, f.reg = baseReg, regDesc{idx: fetchArgRegs[n-1], width: 64}
		} else {
			// The first argument past the registers is at
			// firstStackArg (x86-64: above the return address, as
			// regs_get_kernel_argument has it).
			f.base, f.imm = baseStack, n-uint64(len(fetchArgRegs))-1+firstStackArg
		}
		return nil
	}
	return argErr(tok, "unknown variable %q (want $retval, $stack, $stackN, $argN, $comm or $params)", s)
}

// regDesc is a register or a part of one: (word >> shift) cut to width bits.
type regDesc struct {
	idx   uint8
	shift uint8
	width uint8 // bits: 64, 32, 16 or 8
}

func isDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}

// resolve gives SYM[+|-OFFS]'s address, as traceprobe_split_symbol_offset.
func (c *compiler) resolve(tok, s string) (uint64, error) {
	sym, off := s, int64(0)
	if i := strings.IndexAny(s, "+-"); i >= 0 {
		o, ok := parseCInt(s[i:])
		if !ok {
			return 0, argErr(tok, "bad symbol offset %q", s[i:])
		}
		sym, off = s[:i], o
	}
	if sym == "" {
		return 0, argErr(tok, "missing symbol name in %q", "@"+s)
	}
	if c.env.ResolveSymbol == nil {
		return 0, argErr(tok, "cannot resolve symbol %q here", sym)
	}
	addr, err := c.env.ResolveSymbol(sym)
	if err != nil {
		return 0, wrapErr(tok, "@"+sym, err)
	}
	return addr + uint64(off), nil
}

func (c *compiler) compileDwarf(tok, expr string, f *fetchArg) error {
	if c.env.DWARF == nil {
		return argErr(tok, "%q looks like a variable, which needs debug info (DWARF), and the probed module has none", expr)
	}
	v, err := c.env.DWARF(expr)
	if err != nil {
		return wrapErr(tok, strconv.Quote(expr), err)
	}
	if v == nil {
		return argErr(tok, "no variable %q", expr)
	}
	f.base, f.dwarf = baseDwarf, v
	return nil
}

// C-style numbers, as the kernel's kstrtoull/kstrtoll with base 0:
// 0x hex, a leading 0 octal, else decimal; no spaces, no underscores.

// cBase reads a C number's base from its prefix: 0x hex, a leading 0
// octal, else decimal. It returns the base and the digits.
func cBase(s string) (uint64, string) {
	switch {
	case len(s) >= 3 && s[0] == '0' && s[1]|0x20 == 'x' && isHexDigit(s[2]):
		return 16, s[2:]
	case len(s) > 1 && s[0] == '0':
		return 8, s
	}
	return 10, s
}

func parseCDigits(s string) (uint64, bool) {
	base, s := cBase(s)
	if s == "" {
		return 0, false
	}
	var v uint64
	for i := 0; i < len(s); i++ {
		d := digitValue(s[i])
		if d >= base {
			return 0, false
		}
		if v > (^uint64(0)-d)/base {
			return 0, false
		}
		v = v*base + d
	}
	return v, true
}

func parseCUint(s string) (uint64, bool) {
	s = strings.TrimPrefix(s, "+")
	return parseCDigits(s)
}

func parseCInt(s string) (int64, bool) {
	if strings.HasPrefix(s, "-") {
		u, ok := parseCDigits(s[1:])
		if !ok || u > 1<<63 {
			return 0, false
		}
		return -int64(u), true
	}
	u, ok := parseCUint(s)
	if !ok || u > 1<<63-1 {
		return 0, false
	}
	return int64(u), true
}

// parseImmediate parses \IMM as the kernel's str_to_immediate.
func parseImmediate(s string) (uint64, bool) {
	switch {
	case s == "":
		return 0, false
	case s[0] >= '0' && s[0] <= '9':
		return parseCUint(s)
	case s[0] == '-':
		v, ok := parseCInt(s)
		return uint64(v), ok
	case s[0] == '+':
		v, ok := parseCInt(s[1:])
		return uint64(v), ok
	}
	return 0, false
}

// parseCPrefix parses the longest number at the start of s, as the
// kernel's simple_strtoul with base 0, and returns the rest.
func parseCPrefix(s string) (uint64, string) {
	base, s := cBase(s)
	var v uint64
	i := 0
	for ; i < len(s); i++ {
		d := digitValue(s[i])
		if d >= base {
			break
		}
		if v > 1<<32 {
			v = 1 << 40 // saturate: far more bits than any container
			continue
		}
		v = v*base + d
	}
	return v, s[i:]
}

func isHexDigit(c byte) bool { return digitValue(c) < 16 }

func digitValue(c byte) uint64 {
	switch {
	case c >= '0' && c <= '9':
		return uint64(c - '0')
	case c >= 'a' && c <= 'f':
		return uint64(c-'a') + 10
	case c >= 'A' && c <= 'F':
		return uint64(c-'A') + 10
	}
	return 99
}

// fetchScratch holds the buffers of one Fetch.
type fetchScratch struct {
	h          *HitEnv
	stackWords uint64
	stackRead  bool
	stackValid uint64
	word       [8]byte
	stack      [maxStackBatch * fetchWordBytes]byte
	buf        [MaxStringSize]byte
}

var fetchScratchPool = sync.Pool{New: func() any { return new(fetchScratch) }}

// Fetch evaluates every fetch-arg at a hit and appends one Field per arg
// to dst (pass dst[:0] of a previous result to reuse it). A value that
// cannot be read is marked faulted and prints as (fault).
func (a *Args) Fetch(h *HitEnv, dst []Field) []Field {
	if a == nil {
		return dst
	}
	if h == nil {
		h = &HitEnv{}
	}
	if a.filter != nil && a.filter.needComm {
		a.comm = h.Comm
	}
	if len(a.args) == 0 {
		return dst
	}
	var sc *fetchScratch // nil when no fetch-arg reads memory
	if a.readsMem {
		sc = fetchScratchPool.Get().(*fetchScratch)
		sc.h, sc.stackWords, sc.stackRead, sc.stackValid = h, a.stackWords, false, 0
	}
	first := len(dst)
	for i := range a.args {
		f := &a.args[i]
		if f.base == baseExpr {
			dst = append(dst, Field{Name: f.name, Value: f.exprValue(dst[first:])})
			continue
		}
		dst = append(dst, Field{Name: f.name, Value: f.fetch(h, sc)})
	}
	if sc != nil {
		sc.h = nil
		fetchScratchPool.Put(sc)
	}
	return dst
}

// exprValue is a baseExpr's value from the fields before it.
func (f *fetchArg) exprValue(fields []Field) Value {
	v, ok := f.expr.eval(fields)
	if !ok {
		return faultAll(Value{typ: f.typ})
	}
	return Value{typ: f.typ, bits: uint64(v)}
}

func (f *fetchArg) fetch(h *HitEnv, sc *fetchScratch) Value {
	v := Value{typ: f.typ, n: f.count}
	if f.typ == TypeDwarf {
		raw, text, err := f.dwarf.Read(h)
		if err != nil {
			v.fault = 1
			return v
		}
		v.bits, v.str = raw, text
		return v
	}
	val, ok := f.baseValue(h, sc)
	if !ok {
		return faultAll(v)
	}
	nd := len(f.derefs)
	var addr uint64 // where the value is, when it is read from memory
	if nd > 0 {
		for _, off := range f.derefs[:nd-1] {
			if val, ok = sc.readUint(val+uint64(off), 8); !ok {
				return faultAll(v)
			}
		}
		addr = val + uint64(f.derefs[nd-1])
	}

	switch {
	case f.typ.IsString() && f.count == 0:
		switch {
		case f.base == baseComm:
			v.str = h.Comm
		case f.base == baseData:
			v.str = f.data
		case nd == 0: // \IMM:string: the string at IMM
			v.str, ok = sc.readString(val)
		default:
			v.str, ok = sc.readString(addr)
		}
		if !ok {
			v.fault = 1
		}
		return v

	case f.typ.IsString():
		// An array of string pointers, at addr.
		v.elems = make([]Value, f.count)
		for i := range v.elems {
			e := &v.elems[i]
			e.typ = f.typ
			p, ok := sc.readUint(addr+uint64(i)*8, 8)
			if ok {
				e.str, ok = sc.readString(p)
			}
			if !ok {
				e.fault = 1
			}
		}
		return v

	case f.count > 0:
		return f.fetchArray(sc, v, addr)
	}

	size := fetchTypes[f.typ].size
	if nd > 0 {
		if val, ok = sc.readUint(addr, int(size)); !ok {
			v.fault = 1
			return v
		}
	}
	v.bits = f.finish(val)
	if f.typ == TypeSymbol && h.Symbolize != nil {
		v.str = h.Symbolize(v.bits)
	}
	return v
}

// finish cuts a value to its type's size and extracts its bitfield.
func (f *fetchArg) finish(x uint64) uint64 {
	m := valueMask(fetchTypes[f.typ].size)
	x &= m
	if f.bf {
		x = ((x << f.lsh) & m) >> f.rsh
	}
	return x
}

// fetchArray reads count elements at addr in one read if it can, element
// by element if that faults, so that each element faults alone.
func (f *fetchArg) fetchArray(sc *fetchScratch, v Value, addr uint64) Value {
	size := int(fetchTypes[f.typ].size)
	total := size * int(f.count)
	buf := sc.buf[:total]
	n := sc.read(buf, addr)
	for i := 0; i < int(f.count); i++ {
		off := i * size
		el := buf[off : off+size]
		if off+size > n && sc.read(el, addr+uint64(off)) < size {
			v.fault |= 1 << uint(i)
			clear(el)
			continue
		}
		if f.bf {
			x := f.finish(valueLE(el))
			putLE(el, x)
		}
	}
	if v.fault == allElems(f.count) {
		return v
	}
	if f.typ == TypeSymbol {
		v.elems = make([]Value, f.count)
		for i := range v.elems {
			e := &v.elems[i]
			e.typ = f.typ
			if v.fault&(1<<uint(i)) != 0 {
				e.fault = 1
				continue
			}
			e.bits = binary.LittleEndian.Uint64(buf[i*8:])
			if sc.h.Symbolize != nil {
				e.str = sc.h.Symbolize(e.bits)
			}
		}
		v.fault = 0
		return v
	}
	v.str = string(buf)
	return v
}

func putLE(b []byte, x uint64) {
	for i := range b {
		b[i] = byte(x >> (8 * uint(i)))
	}
}

func allElems(n uint8) uint64 { return uint64(1)<<n - 1 }

// faultAll marks a value, or every element of an array, faulted.
func faultAll(v Value) Value {
	if v.n == 0 {
		v.fault = 1
	} else {
		v.fault = allElems(v.n)
	}
	return v
}

func (f *fetchArg) baseValue(h *HitEnv, sc *fetchScratch) (uint64, bool) {
	switch f.base {
	case baseReg:
		if h.Regs == nil {
			return 0, false
		}
		x := fetchRegWord(h.Regs, f.reg.idx) >> f.reg.shift
		if f.reg.width < 64 {
			x &= 1<<f.reg.width - 1
		}
		return x, true
	case baseStack:
		return sc.stackWord(f.imm)
	case baseImm:
		return f.imm, true
	case baseIndexed:
		if h.Regs == nil {
			return 0, false
		}
		var x uint64
		if f.reg.width != 0 {
			x = fetchRegWord(h.Regs, f.reg.idx)
		}
		return x + fetchRegWord(h.Regs, f.index.idx)*f.imm, true
	case baseDwarf:
		raw, _, err := f.dwarf.Read(h)
		return raw, err == nil
	}
	return 0, true // $comm, immediate strings: no integer
}

// stackWord reads the word at sp+8*n, from one read of the first
// stackWords words when it can.
func (sc *fetchScratch) stackWord(n uint64) (uint64, bool) {
	if sc.h.Regs == nil {
		return 0, false
	}
	sp := fetchRegWord(sc.h.Regs, regSP)
	if n < sc.stackWords {
		if !sc.stackRead {
			sc.stackRead = true
			sc.stackValid = uint64(sc.read(sc.stack[:sc.stackWords*8], sp) / 8)
		}
		if n < sc.stackValid {
			return binary.LittleEndian.Uint64(sc.stack[n*8:]), true
		}
	}
	return sc.readUint(sp+8*n, 8)
}

// read reads into p at addr and returns how many bytes it got.
func (sc *fetchScratch) read(p []byte, addr uint64) int {
	if sc.h.Mem == nil || len(p) == 0 || int64(addr) < 0 {
		return 0
	}
	n, _ := sc.h.Mem.ReadAt(p, int64(addr))
	if n < 0 {
		return 0
	}
	return min(n, len(p))
}

func (sc *fetchScratch) readUint(addr uint64, size int) (uint64, bool) {
	b := sc.word[:size]
	if sc.read(b, addr) < size {
		return 0, false
	}
	return valueLE(b), true
}

// ReadString reads the NUL-terminated string at addr in mem as a string
// fetch-arg does: at most MaxStringSize-1 bytes; false if it faults.
func ReadString(mem Memory, addr uint64) (string, bool) {
	sc := fetchScratchPool.Get().(*fetchScratch)
	defer fetchScratchPool.Put(sc)
	sc.h = &HitEnv{Mem: mem}
	return sc.readString(addr)
}

// readString reads a NUL-terminated string at addr, at most
// MaxStringSize-1 bytes, a page at a time (the first read is short, as
// most strings are). Any fault before the NUL faults the whole string, as
// the kernel's strncpy_from_user.
func (sc *fetchScratch) readString(addr uint64) (string, bool) {
	const page = 4096
	limit := MaxStringSize - 1
	total, chunk := 0, 128
	for total < limit {
		at := addr + uint64(total)
		want := min(chunk, limit-total, int(page-at%page))
		n := sc.read(sc.buf[total:total+want], at)
		if n == 0 {
			if want == 1 {
				return "", false
			}
			chunk = want / 2 // a read across a hole: retry shorter
			continue
		}
		for i, c := range sc.buf[total : total+n] {
			if c == 0 {
				return string(sc.buf[:total+i]), true
			}
		}
		total += n
		chunk = page
	}
	return string(sc.buf[:total]), true
}
