package symbols

// Variables: perf-probe style expressions compiled against the DWARF at a
// PC, evaluated in a stopped thread with delve's proc.EvalScope. See the
// top of dwarf.go for why delve is used without a proc.Target.

import (
	"bytes"
	"debug/dwarf"
	"encoding/binary"
	"errors"
	"fmt"
	"go/ast"
	"go/constant"
	"go/parser"
	"go/printer"
	"go/token"
	"io"
	"math"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/go-delve/delve/pkg/dwarf/frame"
	"github.com/go-delve/delve/pkg/dwarf/godwarf"
	"github.com/go-delve/delve/pkg/dwarf/op"
	"github.com/go-delve/delve/pkg/proc"
	"golang.org/x/sys/unix"
)

// Var is a variable expression compiled at one PC; Read evaluates it.
type Var struct {
	d      *DebugInfo
	pc     uint64
	expr   string // as written
	goExpr string // in delve's Go syntax
	base   string // the variable the expression starts from
	fn     *proc.Function
	file   string
	line   int
	cCode  bool
	typ    godwarf.Type
	tname  string
	fnDIE  *dwarf.Entry // for DW_AT_frame_base
	varDIE *dwarf.Entry // set for a bare enum variable, see readEnumVar
}

// Limits of what Read formats.
const (
	maxStringLen   = 256
	maxArrayValues = 16
	maxFields      = 32
	maxDepth       = 2
)

// loadCfg is how much delve loads. Pointers are not followed: a pointer
// prints as its address, and C strings (char *) are loaded as strings by
// delve whatever FollowPointers says.
var loadCfg = proc.LoadConfig{
	FollowPointers:     false,
	MaxVariableRecurse: maxDepth,
	MaxStringLen:       maxStringLen,
	MaxArrayValues:     maxArrayValues,
	MaxStructFields:    maxFields,
}

// Var compiles a variable expression at runtime address pc: `name`,
// `name->field`, `name.field`, `name[N]`, `*name` and chains of these, as
// perf probe takes them (`->` and `.` are both accepted on pointers). The
// name is a parameter or local visible at pc, or a global variable.
func (d *DebugInfo) Var(pc uint64, expr string) (v *Var, err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.load(); err != nil {
		return nil, err
	}
	defer recoverDelve(&err, "compile "+expr)
	fn := d.bi.PCToFunc(pc)
	if fn == nil {
		return nil, fmt.Errorf("no DWARF function at 0x%x in %s", pc, d.name)
	}
	goExpr := strings.ReplaceAll(strings.TrimSpace(expr), "->", ".")
	node, err := parser.ParseExpr(goExpr)
	if err != nil || goExpr == "" {
		return nil, fmt.Errorf("bad variable expression %q", expr)
	}
	base := baseIdent(node)
	if base == nil {
		return nil, fmt.Errorf("bad variable expression %q: it must start with a variable name", expr)
	}
	file, line, _ := d.bi.PCToLine(pc)
	v = &Var{d: d, pc: pc, expr: expr, base: base.Name, fn: fn, file: file, line: line, cCode: isC(fn)}
	v.fnDIE = d.subprogramDIE(fn.Entry)

	// The variables visible at pc, with their types; registers other than
	// the PC and memory are not needed to list them (their values come
	// out unreadable, which is fine here).
	scope := v.scope(d.zeroRegs(pc), noMemory{})
	locals, err := scope.Locals(0, "")
	if err != nil {
		return nil, fmt.Errorf("%s: variables at 0x%x: %w", userName(fn), pc, err)
	}
	var inScope []string
	var baseType godwarf.Type
	for _, l := range locals {
		if l.Flags&proc.VariableShadowed != 0 || l.Name == "" || strings.HasPrefix(l.Name, "~") {
			continue
		}
		if !slices.Contains(inScope, l.Name) {
			inScope = append(inScope, l.Name)
		}
		if l.Name == base.Name {
			baseType = l.DwarfType
		}
	}
	if baseType == nil {
		// A global: delve looks it up as a package variable ("C.name"
		// for C). Functions of that name are not variables.
		if g, err := scope.EvalExpression(base.Name, proc.LoadConfig{}); err == nil && g.Kind != reflect.Func && g.DwarfType != nil {
			baseType = g.DwarfType
		}
	}
	if baseType == nil {
		where := fmt.Sprintf("%s:%d", filepath.Base(file), line)
		if file == "" {
			where = userName(fn)
		}
		list := "nothing"
		if len(inScope) > 0 {
			list = strings.Join(inScope, ", ")
		}
		return nil, fmt.Errorf("no variable %q at %s (in scope: %s)", base.Name, where, list)
	}

	if v.cCode {
		fixArraySizes(baseType, map[godwarf.Type]bool{})
	}
	typ, node, err := v.check(node, baseType)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", expr, err)
	}
	v.typ = typ
	v.tname = typeName(typ, v.cCode)
	var buf bytes.Buffer
	printer.Fprint(&buf, token.NewFileSet(), node)
	v.goExpr = buf.String()
	if _, ok := resolveType(typ).(*godwarf.EnumType); ok && node == ast.Expr(base) {
		v.varDIE = d.findVarDIE(v.fnDIE, base.Name, pc)
	}
	return v, nil
}

// Type returns the type of the expression: C spelling for C code
// ("struct req *", "const char *"), Go spelling for Go code.
func (v *Var) Type() string { return v.tname }

// IntType says whether the variable is an integer (C's and Go's integer
// types, char, bool, an enum), and then its size and signedness.
func (v *Var) IntType() (size int, signed, ok bool) {
	t := v.typ
	for {
		td, isTypedef := t.(*godwarf.TypedefType)
		if !isTypedef {
			break
		}
		t = td.Type
	}
	switch t.(type) {
	case *godwarf.IntType, *godwarf.CharType:
		return int(t.Common().ByteSize), true, true
	case *godwarf.UintType, *godwarf.UcharType, *godwarf.BoolType:
		return int(t.Common().ByteSize), false, true
	case *godwarf.EnumType:
		return int(t.Common().ByteSize), false, true
	}
	return 0, false, false
}

// String returns the expression as written.
func (v *Var) String() string { return v.expr }

func baseIdent(e ast.Expr) *ast.Ident {
	for {
		switch x := e.(type) {
		case *ast.Ident:
			return x
		case *ast.ParenExpr:
			e = x.X
		case *ast.StarExpr:
			e = x.X
		case *ast.SelectorExpr:
			e = x.X
		case *ast.IndexExpr:
			e = x.X
		default:
			return nil
		}
	}
}

// check type-checks the expression against the DWARF types so that a bad
// field or index is an error at compile time, with what would have been
// valid, and returns its type. It also rewrites `*s` for a C `char *` s
// to `s[0]`: delve loads C char pointers as strings, which its `*`
// refuses to dereference.
func (v *Var) check(e ast.Expr, baseType godwarf.Type) (godwarf.Type, ast.Expr, error) {
	switch x := e.(type) {
	case *ast.Ident:
		return baseType, x, nil
	case *ast.ParenExpr:
		t, inner, err := v.check(x.X, baseType)
		return t, &ast.ParenExpr{X: inner}, err
	case *ast.StarExpr:
		t, inner, err := v.check(x.X, baseType)
		if err != nil {
			return nil, nil, err
		}
		p, ok := resolveType(t).(*godwarf.PtrType)
		if !ok {
			return nil, nil, fmt.Errorf("%s is not a pointer (it is %s)", exprString(x.X), typeName(t, v.cCode))
		}
		if _, void := resolveType(p.Type).(*godwarf.VoidType); void {
			return nil, nil, fmt.Errorf("cannot dereference %s (%s)", exprString(x.X), typeName(t, v.cCode))
		}
		if v.cCode && isCharType(p.Type) {
			return p.Type, &ast.IndexExpr{X: inner, Index: &ast.BasicLit{Kind: token.INT, Value: "0"}}, nil
		}
		return p.Type, &ast.StarExpr{X: inner}, nil
	case *ast.SelectorExpr:
		t, inner, err := v.check(x.X, baseType)
		if err != nil {
			return nil, nil, err
		}
		rt := resolveType(t)
		if p, ok := rt.(*godwarf.PtrType); ok {
			rt = resolveType(p.Type)
		}
		st, ok := rt.(*godwarf.StructType)
		if !ok {
			return nil, nil, fmt.Errorf("%s is not a struct or a pointer to one (it is %s)", exprString(x.X), typeName(t, v.cCode))
		}
		var names []string
		for _, f := range st.Field {
			if f.Name == x.Sel.Name {
				return f.Type, &ast.SelectorExpr{X: inner, Sel: x.Sel}, nil
			}
			names = append(names, f.Name)
		}
		return nil, nil, fmt.Errorf("%s has no member %q (members: %s)", typeName(st, v.cCode), x.Sel.Name, strings.Join(names, ", "))
	case *ast.IndexExpr:
		t, inner, err := v.check(x.X, baseType)
		if err != nil {
			return nil, nil, err
		}
		lit, ok := x.Index.(*ast.BasicLit)
		if !ok || lit.Kind != token.INT {
			return nil, nil, fmt.Errorf("index of %s must be a number", exprString(x.X))
		}
		n, err := strconv.ParseInt(lit.Value, 0, 64)
		if err != nil {
			return nil, nil, fmt.Errorf("bad index %s", lit.Value)
		}
		idx := &ast.IndexExpr{X: inner, Index: lit}
		switch rt := resolveType(t).(type) {
		case *godwarf.ArrayType:
			if rt.Count >= 0 && n >= rt.Count && !(rt.Count == 0 && v.cCode) {
				return nil, nil, fmt.Errorf("index %d out of range for %s", n, typeName(t, v.cCode))
			}
			return rt.Type, idx, nil
		case *godwarf.PtrType:
			if !v.cCode {
				return nil, nil, fmt.Errorf("cannot index Go pointer %s", exprString(x.X))
			}
			if _, void := resolveType(rt.Type).(*godwarf.VoidType); void {
				return nil, nil, fmt.Errorf("cannot index %s (%s)", exprString(x.X), typeName(t, v.cCode))
			}
			return rt.Type, idx, nil
		case *godwarf.SliceType:
			return rt.ElemType, idx, nil
		}
		return nil, nil, fmt.Errorf("%s cannot be indexed (it is %s)", exprString(x.X), typeName(t, v.cCode))
	}
	return nil, nil, fmt.Errorf("unsupported expression %s (use var, var->field, var.field, var[N], *var)", exprString(e))
}

// fixArraySizes fills in the size of C array types reachable from t.
// gcc gives DW_TAG_array_type no DW_AT_byte_size, godwarf sets ByteSize
// -1, and delve computes the element stride as ByteSize/Count: every
// element would read as the first. The types are delve's cached objects,
// so fixing them here fixes every later evaluation too.
func fixArraySizes(t godwarf.Type, seen map[godwarf.Type]bool) {
	if t == nil || seen[t] || len(seen) > 10000 {
		return
	}
	seen[t] = true
	switch x := t.(type) {
	case *godwarf.TypedefType:
		fixArraySizes(x.Type, seen)
	case *godwarf.QualType:
		fixArraySizes(x.Type, seen)
	case *godwarf.PtrType:
		fixArraySizes(x.Type, seen)
	case *godwarf.StructType:
		for _, f := range x.Field {
			fixArraySizes(f.Type, seen)
		}
	case *godwarf.ArrayType:
		fixArraySizes(x.Type, seen)
		if x.ByteSize <= 0 && x.Count > 0 {
			stride := x.StrideBitSize / 8
			if stride == 0 {
				stride = x.Type.Size()
			}
			x.ByteSize = stride * x.Count
		}
	}
}

func exprString(e ast.Expr) string {
	var buf bytes.Buffer
	printer.Fprint(&buf, token.NewFileSet(), e)
	return buf.String()
}

// resolveType strips typedefs and qualifiers.
func resolveType(t godwarf.Type) godwarf.Type {
	for range 64 {
		switch x := t.(type) {
		case *godwarf.TypedefType:
			t = x.Type
		case *godwarf.QualType:
			t = x.Type
		default:
			return t
		}
	}
	return t
}

func isCharType(t godwarf.Type) bool {
	switch resolveType(t).(type) {
	case *godwarf.CharType, *godwarf.UcharType:
		return true
	}
	return false
}

// typeName spells a type as C (for C code) or Go does. godwarf's String()
// is Go syntax ("*struct req") even for C.
func typeName(t godwarf.Type, c bool) string {
	if t == nil {
		return "?"
	}
	if !c {
		return t.String()
	}
	return cTypeName(t, 0)
}

func cTypeName(t godwarf.Type, depth int) string {
	if depth > 16 {
		return "..."
	}
	switch x := t.(type) {
	case *godwarf.PtrType:
		elem := cTypeName(x.Type, depth+1)
		if fn, ok := resolveType(x.Type).(*godwarf.FuncType); ok && x.Type == godwarf.Type(fn) {
			return cFuncPtr(fn, depth)
		}
		if strings.HasSuffix(elem, "*") {
			return elem + "*"
		}
		return elem + " *"
	case *godwarf.QualType:
		return x.Qual + " " + cTypeName(x.Type, depth+1)
	case *godwarf.StructType:
		if x.StructName == "" {
			return x.Kind + " {...}"
		}
		return x.Kind + " " + x.StructName
	case *godwarf.EnumType:
		if x.EnumName == "" {
			return "enum {...}"
		}
		return "enum " + x.EnumName
	case *godwarf.ArrayType:
		if x.Count < 0 {
			return cTypeName(x.Type, depth+1) + " []"
		}
		return fmt.Sprintf("%s [%d]", cTypeName(x.Type, depth+1), x.Count)
	case *godwarf.FuncType:
		return cFuncPtr(x, depth) // without the pointer: rare
	case *godwarf.VoidType:
		return "void"
	}
	if name := t.Common().Name; name != "" {
		return name
	}
	return t.String()
}

func cFuncPtr(fn *godwarf.FuncType, depth int) string {
	ret := "void"
	if fn.ReturnType != nil {
		ret = cTypeName(fn.ReturnType, depth+1)
	}
	var params []string
	for _, p := range fn.ParamType {
		params = append(params, cTypeName(p, depth+1))
	}
	return fmt.Sprintf("%s (*)(%s)", ret, strings.Join(params, ", "))
}

// scope builds delve's EvalScope without a proc.Target. Its exported
// fields are enough for EvalExpression and Locals as long as evaluation
// never needs a goroutine (g), a thread or call injection: those fields
// stay nil and delve checks them before use on the paths we take
// (identifiers, selectors, index, deref). For C code the line is set
// past any declaration: delve hides a local until the line after its
// declaration, perf and gdb show every local of the enclosing lexical
// blocks (which delve still checks by PC).
func (v *Var) scope(regs op.DwarfRegisters, mem proc.MemoryReadWriter) *proc.EvalScope {
	line := v.line
	if v.cCode {
		line = math.MaxInt32
	}
	return &proc.EvalScope{
		Location: proc.Location{PC: v.pc, File: v.file, Line: line, Fn: v.fn},
		Regs:     regs,
		Mem:      mem,
		BinInfo:  v.d.bi,
	}
}

// zeroRegs is a register set with only the PC, for listing variables.
func (d *DebugInfo) zeroRegs(pc uint64) op.DwarfRegisters {
	var regs unix.PtraceRegs
	return newDwarfRegs(&regs, nil, pc, d.bias)
}

// Read evaluates the variable in a stopped thread whose registers at the
// compiled PC are regs (the PC used is the compiled one, whatever
// regs says) and whose memory is mem. raw is the value as an integer
// (pointers and C strings: the address; integers, enums, bools, chars:
// their bits zero-extended; floats: their bits; anything else 0). text is
// the value formatted in its type; "<optimized out>" when the DWARF has no
// location for it at this PC, "(fault)" when memory could not be read.
// err is for everything else (a broken frame, an expression delve
// refuses).
func (v *Var) Read(regs *unix.PtraceRegs, mem io.ReaderAt) (raw uint64, text string, err error) {
	return v.ReadFP(regs, nil, mem)
}

// ReadFP is Read with the thread's SSE registers too (FXSAVE's layout,
// as PTRACE_GETFPREGS gives it): floats and doubles in registers are
// read there. Without them (nil), a variable in one is unavailable.
func (v *Var) ReadFP(regs *unix.PtraceRegs, xmm []byte, mem io.ReaderAt) (raw uint64, text string, err error) {
	d := v.d
	d.mu.Lock()
	defer d.mu.Unlock()
	defer recoverDelve(&err, "read "+v.expr)

	m := &readerMem{r: mem}
	dregs := newDwarfRegs(regs, xmm, v.pc, d.bias)
	cfa, cfaErr := d.cfa(v.pc, &dregs, m)
	dregs.CFA = cfa
	if v.fnDIE != nil && v.fnDIE.Val(dwarf.AttrFrameBase) != nil {
		fb, _, _, err := d.bi.Location(v.fnDIE, dwarf.AttrFrameBase, v.pc, dregs, m)
		if err == nil {
			dregs.FrameBase = fb
		}
	}
	unavailable := func(cause error) (uint64, string, error) {
		switch {
		case m.faulted:
			return 0, "(fault)", nil
		case cfaErr != nil:
			return 0, "", fmt.Errorf("%s: %w (and %v)", v.expr, cfaErr, cause)
		}
		return 0, "<optimized out>", nil
	}

	if v.varDIE != nil {
		if raw, ok := v.readEnumVar(dregs, m); ok {
			return raw, enumText(v.typ, raw), nil
		}
		return unavailable(errors.New("no location"))
	}

	scope := v.scope(dregs, m)
	val, err := scope.EvalExpression(v.goExpr, loadCfg)
	if err != nil {
		// A member or element of something unreadable; a nil pointer
		// dereference is a fault, as the kernel's fetch-args report it.
		if m.faulted || strings.Contains(err.Error(), "nil pointer") {
			return 0, "(fault)", nil
		}
		if b, berr := scope.EvalExpression(v.base, proc.LoadConfig{}); berr == nil && b.Unreadable != nil {
			return unavailable(b.Unreadable)
		}
		return 0, "", fmt.Errorf("%s: %w", v.expr, err)
	}
	if val.Unreadable != nil && !isEnumInMemory(val) {
		return unavailable(val.Unreadable)
	}
	f := formatter{mem: m, c: v.cCode, dw: v.d.dw}
	return f.raw(val), f.text(val, 0), nil
}

// recoverDelve turns a panic inside delve into an error: we drive it
// without the Target its code paths were written for.
func recoverDelve(err *error, what string) {
	if r := recover(); r != nil {
		*err = fmt.Errorf("%s: internal error in the DWARF evaluator: %v", what, r)
	}
}

// cfa computes the canonical frame address at pc from the call frame
// information. delve's EvalScope expects the caller to have filled
// Regs.CFA (its stack iterator does it); gcc's DW_AT_frame_base is
// DW_OP_call_frame_cfa at every optimisation level, so without it no
// stack variable is readable.
func (d *DebugInfo) cfa(pc uint64, regs *op.DwarfRegisters, mem proc.MemoryReader) (int64, error) {
	fdes, err := d.loadFrames()
	if err != nil {
		return 0, err
	}
	fde, err := fdes.FDEForPC(pc)
	if err != nil {
		return 0, err
	}
	fctx, err := fde.EstablishFrame(pc)
	if err != nil {
		return 0, err
	}
	switch fctx.CFA.Rule {
	case frame.RuleCFA:
		r := regs.Reg(fctx.CFA.Reg)
		if r == nil {
			return 0, fmt.Errorf("CFA at 0x%x: register %d unknown", pc, fctx.CFA.Reg)
		}
		return int64(r.Uint64Val) + fctx.CFA.Offset, nil
	case frame.RuleExpression, frame.RuleValExpression:
		// DW_CFA_def_cfa_expression: the value of the expression is the
		// CFA (delve's unwinder dereferences it; DWARF 5 6.4.2.2 does not).
		v, _, err := op.ExecuteStackProgram(*regs, fctx.CFA.Expression, 8, mem.ReadMemory)
		return v, err
	}
	return 0, fmt.Errorf("CFA at 0x%x: unsupported rule %d", pc, fctx.CFA.Rule)
}

// readerMem is delve's memory interface over an io.ReaderAt; it remembers
// whether any read failed, which tells a fault from "optimized out".
type readerMem struct {
	r       io.ReaderAt
	faulted bool
}

func (m *readerMem) ReadMemory(buf []byte, addr uint64) (int, error) {
	if addr > math.MaxInt64 || addr+uint64(len(buf)) < addr {
		m.faulted = true
		return 0, fmt.Errorf("read 0x%x: bad address", addr)
	}
	n, err := m.r.ReadAt(buf, int64(addr))
	if n == len(buf) {
		return n, nil
	}
	m.faulted = true
	if err == nil {
		err = io.ErrUnexpectedEOF
	}
	return n, fmt.Errorf("read %d bytes at 0x%x: %w", len(buf), addr, err)
}

func (m *readerMem) WriteMemory(uint64, []byte) (int, error) { return 0, errReadOnly }

// noMemory fails every read; for compiling, where no process is at hand.
type noMemory struct{}

func (noMemory) ReadMemory([]byte, uint64) (int, error)  { return 0, errors.New("no memory") }
func (noMemory) WriteMemory(uint64, []byte) (int, error) { return 0, errReadOnly }

// Enums: delve v1.27.2 has no case for godwarf.EnumType in newVariable and
// marks every enum "unknown type". An enum in memory is read from its
// address; a bare enum variable (the usual case, and at -O2 often in a
// register) is located here from its own DIE.

func isEnumInMemory(v *proc.Variable) bool {
	_, ok := resolveType(v.DwarfType).(*godwarf.EnumType)
	return ok && v.Addr != 0 && v.Addr < fakeAddressLimit
}

// fakeAddressLimit: delve gives values that live in registers fake
// addresses from 0xbeed000000000000 up; user space is far below.
const fakeAddressLimit = 0xbeed000000000000

func (v *Var) readEnumVar(regs op.DwarfRegisters, mem *readerMem) (uint64, bool) {
	size := int(v.typ.Common().ByteSize)
	if size <= 0 || size > 8 {
		return 0, false
	}
	addr, pieces, _, err := v.d.bi.Location(v.varDIE, dwarf.AttrLocation, v.pc, regs, mem)
	if err != nil {
		return 0, false
	}
	var b []byte
	if pieces == nil {
		b = make([]byte, size)
		if _, err := mem.ReadMemory(b, uint64(addr)); err != nil {
			return 0, false
		}
	}
	for _, p := range pieces {
		switch p.Kind {
		case op.RegPiece:
			rb := regs.Bytes(p.Val)
			if rb == nil {
				return 0, false
			}
			n := p.Size
			if n == 0 || n > len(rb) {
				n = len(rb)
			}
			b = append(b, rb[:n]...)
		case op.ImmPiece:
			if p.Bytes != nil {
				b = append(b, p.Bytes...)
			} else {
				b = binary.LittleEndian.AppendUint64(b, p.Val)
			}
		case op.AddrPiece:
			pb := make([]byte, p.Size)
			if _, err := mem.ReadMemory(pb, p.Val); err != nil {
				return 0, false
			}
			b = append(b, pb...)
		}
	}
	if len(b) < size {
		return 0, false
	}
	return leUint(b[:size]), true
}

func leUint(b []byte) uint64 {
	var buf [8]byte
	copy(buf[:], b)
	return binary.LittleEndian.Uint64(buf[:])
}

func enumText(t godwarf.Type, raw uint64) string {
	et, ok := resolveType(t).(*godwarf.EnumType)
	if !ok {
		return strconv.FormatUint(raw, 10)
	}
	val := signExtend(raw, et.ByteSize)
	for _, e := range et.Val {
		if e.Val == val || uint64(e.Val) == raw {
			return e.Name
		}
	}
	return strconv.FormatInt(val, 10)
}

func signExtend(raw uint64, size int64) int64 {
	if size <= 0 || size >= 8 {
		return int64(raw)
	}
	shift := 64 - 8*uint(size)
	return int64(raw<<shift) >> shift
}

// findVarDIE finds the DIE of the variable name visible at pc inside the
// function DIE fnDIE: the innermost lexical block wins.
func (d *DebugInfo) findVarDIE(fnDIE *dwarf.Entry, name string, pc uint64) *dwarf.Entry {
	if fnDIE == nil || !fnDIE.Children {
		return nil
	}
	link := pc - d.bias
	r := d.dw.Reader()
	r.Seek(fnDIE.Offset)
	if _, err := r.Next(); err != nil {
		return nil
	}
	var best *dwarf.Entry
	var walk func(depth int)
	walk = func(depth int) {
		for {
			e, err := r.Next()
			if err != nil || e == nil || e.Tag == 0 {
				return
			}
			switch e.Tag {
			case dwarf.TagVariable, dwarf.TagFormalParameter:
				if m := d.withOrigin(e); m.Val(dwarf.AttrName) == name {
					best = m
				}
			case dwarf.TagLexDwarfBlock:
				if e.Children && d.containsPC(e, link) {
					walk(depth + 1)
					continue
				}
			}
			if e.Children {
				r.SkipChildren()
			}
		}
	}
	walk(0)
	return best
}

func (d *DebugInfo) containsPC(e *dwarf.Entry, link uint64) bool {
	rs, err := d.dw.Ranges(e)
	if err != nil {
		return false
	}
	for _, rg := range rs {
		if link >= rg[0] && link < rg[1] {
			return true
		}
	}
	return false
}

// formatter turns delve's loaded Variables into our compact text.
type formatter struct {
	mem *readerMem
	c   bool
	dw  *dwarf.Data // for what delve does not decode (bitfield offsets)
}

func (f formatter) raw(v *proc.Variable) uint64 {
	switch v.Kind {
	case reflect.Ptr, reflect.UnsafePointer:
		return ptrValue(v)
	case reflect.String:
		if _, isPtr := v.RealType.(*godwarf.PtrType); isPtr {
			return v.Base // a C char *
		}
	case reflect.Bool:
		if v.Value != nil && constant.BoolVal(v.Value) {
			return 1
		}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		n, _ := constant.Int64Val(v.Value)
		size := v.RealType.Size()
		if size > 0 && size < 8 {
			return uint64(n) & (1<<(8*uint(size)) - 1)
		}
		return uint64(n)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		n, _ := constant.Uint64Val(v.Value)
		return n
	case reflect.Float32:
		x, _ := constant.Float64Val(v.Value)
		return uint64(math.Float32bits(float32(x)))
	case reflect.Float64:
		x, _ := constant.Float64Val(v.Value)
		return math.Float64bits(x)
	case reflect.Invalid:
		if n, ok := f.enumValue(v); ok {
			return n
		}
	}
	return 0
}

func ptrValue(v *proc.Variable) uint64 {
	if v.Value != nil {
		if n, ok := constant.Uint64Val(v.Value); ok {
			return n
		}
	}
	if len(v.Children) > 0 {
		return v.Children[0].Addr
	}
	return v.Base
}

// enumValue reads an enum delve could not (see readEnumVar) from memory.
func (f formatter) enumValue(v *proc.Variable) (uint64, bool) {
	et, ok := resolveType(v.DwarfType).(*godwarf.EnumType)
	if !ok || v.Addr == 0 || v.Addr >= fakeAddressLimit || et.ByteSize <= 0 || et.ByteSize > 8 {
		return 0, false
	}
	b := make([]byte, et.ByteSize)
	if _, err := f.mem.ReadMemory(b, v.Addr); err != nil {
		return 0, false
	}
	return leUint(b), true
}

func (f formatter) text(v *proc.Variable, depth int) string {
	if v.Unreadable != nil {
		if n, ok := f.enumValue(v); ok {
			return enumText(v.DwarfType, n)
		}
		if f.mem.faulted {
			return "(fault)"
		}
		return "<optimized out>"
	}
	switch v.Kind {
	case reflect.Bool:
		if v.Value == nil {
			return "?"
		}
		return strconv.FormatBool(constant.BoolVal(v.Value))
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		n, _ := constant.Int64Val(v.Value)
		if f.c && isCharType(v.DwarfType) {
			return charLit(byte(n))
		}
		return strconv.FormatInt(n, 10)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		n, _ := constant.Uint64Val(v.Value)
		if f.c && isCharType(v.DwarfType) {
			return charLit(byte(n))
		}
		return strconv.FormatUint(n, 10)
	case reflect.Uintptr:
		n, _ := constant.Uint64Val(v.Value)
		return fmt.Sprintf("0x%x", n)
	case reflect.Float32, reflect.Float64:
		x, _ := constant.Float64Val(v.Value)
		bits := 64
		if v.Kind == reflect.Float32 {
			bits = 32
		}
		return strconv.FormatFloat(x, 'g', -1, bits)
	case reflect.Complex64, reflect.Complex128:
		return v.Value.String()
	case reflect.String:
		if _, isPtr := v.RealType.(*godwarf.PtrType); isPtr && v.Base == 0 {
			return "(null)"
		}
		s := ""
		if v.Value != nil {
			s = constant.StringVal(v.Value)
		}
		q := strconv.Quote(s)
		if v.Len > int64(len(s)) {
			q += "..."
		}
		return q
	case reflect.Ptr, reflect.UnsafePointer:
		return fmt.Sprintf("0x%x", ptrValue(v))
	case reflect.Chan:
		return fmt.Sprintf("chan 0x%x", v.Base)
	case reflect.Func:
		if v.Value != nil && v.Value.Kind() == constant.String {
			return constant.StringVal(v.Value)
		}
		return fmt.Sprintf("0x%x", v.Base)
	case reflect.Interface:
		if len(v.Children) == 0 || v.Children[0].Kind == reflect.Invalid && v.Children[0].Addr == 0 {
			return "nil"
		}
		return f.text(&v.Children[0], depth)
	case reflect.Struct:
		if depth > maxDepth || (len(v.Children) == 0 && v.Len > 0) {
			return "{...}"
		}
		var b strings.Builder
		b.WriteByte('{')
		bits := f.bitfields(v)
		for i := range v.Children {
			if i > 0 {
				b.WriteByte(',')
			}
			c := &v.Children[i]
			if c.Name != "" {
				b.WriteString(c.Name)
				b.WriteByte('=')
			}
			if bf, ok := bits[c.Name]; ok {
				b.WriteString(f.bitfield(v.Addr, bf))
				continue
			}
			b.WriteString(f.text(c, depth+1))
		}
		if v.Len > int64(len(v.Children)) {
			b.WriteString(",...")
		}
		b.WriteByte('}')
		return b.String()
	case reflect.Array, reflect.Slice:
		if f.c && v.Kind == reflect.Array && len(v.Children) > 0 && isCharType(v.Children[0].DwarfType) {
			return f.charArray(v)
		}
		if depth > maxDepth {
			return "{...}"
		}
		return f.list(v, depth, func(c *proc.Variable) string { return f.text(c, depth+1) })
	case reflect.Map:
		if depth > maxDepth {
			return "{...}"
		}
		var b strings.Builder
		b.WriteByte('{')
		for i := 0; i+1 < len(v.Children); i += 2 {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(f.text(&v.Children[i], depth+1))
			b.WriteByte(':')
			b.WriteString(f.text(&v.Children[i+1], depth+1))
		}
		if v.Len > int64(len(v.Children)/2) {
			b.WriteString(",...")
		}
		b.WriteByte('}')
		return b.String()
	case reflect.Invalid:
		if n, ok := f.enumValue(v); ok {
			return enumText(v.DwarfType, n)
		}
	}
	return "?"
}

func (f formatter) list(v *proc.Variable, depth int, elem func(*proc.Variable) string) string {
	var b strings.Builder
	b.WriteByte('{')
	for i := range v.Children {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(elem(&v.Children[i]))
	}
	if v.Len > int64(len(v.Children)) {
		b.WriteString(",...")
	}
	b.WriteByte('}')
	return b.String()
}

// charArray prints a C char array as a string, up to its first NUL.
func (f formatter) charArray(v *proc.Variable) string {
	var s []byte
	for i := range v.Children {
		c := &v.Children[i]
		if c.Unreadable != nil || c.Value == nil {
			break
		}
		n, _ := constant.Int64Val(c.Value)
		if n == 0 {
			return strconv.Quote(string(s))
		}
		s = append(s, byte(n))
	}
	q := strconv.Quote(string(s))
	if v.Len > int64(len(v.Children)) {
		q += "..."
	}
	return q
}

func charLit(b byte) string {
	switch {
	case b == '\'' || b == '\\':
		return `'\` + string(b) + `'`
	case b >= 0x20 && b < 0x7f:
		return "'" + string(b) + "'"
	case b == 0:
		return `'\0'`
	case b == '\n':
		return `'\n'`
	case b == '\t':
		return `'\t'`
	}
	return fmt.Sprintf(`'\x%02x'`, b)
}

// bitfields returns the bit-field members of struct v by name. delve reads
// only DWARF 2's DW_AT_bit_offset and loads a bit-field as the whole
// integer at its byte offset (0 under DWARF 4/5's DW_AT_data_bit_offset,
// which gcc emits), so their values come from debug/dwarf's own decoding.
func (f formatter) bitfields(v *proc.Variable) map[string]*dwarf.StructField {
	st, ok := v.RealType.(*godwarf.StructType)
	if !ok || f.dw == nil {
		return nil
	}
	has := false
	for _, fl := range st.Field {
		has = has || fl.BitSize > 0
	}
	if !has {
		return nil
	}
	t, err := f.dw.Type(st.Offset)
	if err != nil {
		return nil
	}
	dst, ok := t.(*dwarf.StructType)
	if !ok {
		return nil
	}
	m := make(map[string]*dwarf.StructField)
	for _, fl := range dst.Field {
		if fl.BitSize > 0 {
			m[fl.Name] = fl
		}
	}
	return m
}

// bitfield reads one bit-field of the struct at base.
func (f formatter) bitfield(base uint64, fl *dwarf.StructField) string {
	off := fl.DataBitOffset
	if off == 0 && fl.BitOffset != 0 {
		// DWARF 2: bit offset from the most significant bit of a
		// ByteSize container (little-endian).
		off = fl.ByteOffset*8 + fl.ByteSize*8 - fl.BitOffset - fl.BitSize
	}
	var buf [16]byte
	n := int((off%8 + fl.BitSize + 7) / 8)
	if n > 8 || f.mem == nil {
		return "?"
	}
	if _, err := f.mem.ReadMemory(buf[:n], base+uint64(off/8)); err != nil {
		return "(fault)"
	}
	raw := binary.LittleEndian.Uint64(buf[:8]) >> (off % 8) & (1<<uint(fl.BitSize) - 1)
	if it, ok := fl.Type.(*dwarf.IntType); ok && it != nil && raw>>(fl.BitSize-1) == 1 {
		return strconv.FormatInt(int64(raw)-1<<uint(fl.BitSize), 10)
	}
	return strconv.FormatUint(raw, 10)
}

// UsesFloat reports whether the variable is, or holds, a floating-point
// value (a float, a complex, a struct or array with one): one that may
// live in an SSE register, which only ReadFP reads.
func (v *Var) UsesFloat() bool { return hasFloat(v.typ, 0) }

func hasFloat(t godwarf.Type, depth int) bool {
	if depth > maxDepth+4 {
		return true // deep: assume so
	}
	switch x := resolveType(t).(type) {
	case *godwarf.FloatType, *godwarf.ComplexType:
		return true
	case *godwarf.StructType:
		for _, f := range x.Field {
			if hasFloat(f.Type, depth+1) {
				return true
			}
		}
	case *godwarf.ArrayType:
		return hasFloat(x.Type, depth+1)
	}
	return false
}
