package symbols

import (
	"debug/dwarf"
	"fmt"
	"strings"

	"github.com/go-delve/delve/pkg/dwarf/godwarf"
)

// A function's signature as the C calling convention sees it: for each
// parameter and the result, what decides where a call passes it (its
// class and size) and how to print it. The placement itself is the
// platform ABI's, the tracer's business (probe/funcargs_*.go).

// ValueClass is the kind of a parameter's or a result's type.
type ValueClass uint8

const (
	ClassVoid      ValueClass = iota // no value: a void result
	ClassInt                         // an integer, enum, bool or char
	ClassPointer                     // a pointer (or an array parameter, which is one)
	ClassFloat                       // float or double
	ClassAggregate                   // a struct or union passed by value
	ClassOther                       // long double, _Complex, __int128, a vector: not placed
)

// ABIValue is one parameter, or the result.
type ABIValue struct {
	Name  string
	Class ValueClass
	Size  int // bytes
	// ClassInt: signed, a char type, a bool. ClassPointer: String when it
	// points to a char type (a C string).
	Signed, Char, Bool, String bool
	// ClassAggregate: the class of each 8-byte word (ClassInt or
	// ClassFloat) as the SysV x86-64 ABI classifies it, or nil when the
	// ABI passes it in memory (over 16 bytes, or a field not aligned).
	Words []ValueClass
	// Enum names the values of an enum type (ClassInt).
	Enum map[int64]string
	// Format names how a value of a type known by name only is shown
	// (a prototype table's "oflags", "mode"); "" for DWARF's types.
	Format string
	// ClassAggregate: HFA is the member count of a homogeneous
	// floating-point aggregate (AAPCS64: 1 to 4 members of one float
	// type, passed in SIMD registers), else 0.
	HFA int
	// ClassAggregate: ByReference, a C++ class the C++ ABI (Itanium's,
	// x86-64's and arm64's alike) passes and returns by a hidden
	// pointer whatever its size: one with a non-trivial copy or move
	// constructor or destructor (std::string).
	ByReference bool
}

// Signature is a function's parameters, in order, and its result.
type Signature struct {
	Params   []ABIValue
	Result   ABIValue
	Variadic bool // ends in "...": what the caller passed there is not listed
	// Results are a Go function's results, in order (its DWARF lists
	// them among the parameters, DW_AT_variable_parameter set); Result
	// is not set for Go.
	Results []ABIValue
}

// Signature reads the signature of the function containing runtime
// address pc.
func (d *DebugInfo) Signature(pc uint64) (sig Signature, err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.load(); err != nil {
		return sig, err
	}
	defer recoverDelve(&err, "read the signature")
	fn := d.bi.PCToFunc(pc)
	if fn == nil {
		return sig, fmt.Errorf("no DWARF function at 0x%x in %s", pc, d.name)
	}
	e := d.subprogramDIE(fn.Entry)
	if e == nil {
		return sig, fmt.Errorf("%s: no DWARF entry for the function", userName(fn))
	}
	img := d.bi.Images[0]
	typeAt := func(e *dwarf.Entry) (godwarf.Type, bool) {
		off, ok := e.Val(dwarf.AttrType).(dwarf.Offset)
		if !ok {
			return nil, false
		}
		t, err := img.Type(off)
		return t, err == nil
	}
	valueOf := func(t godwarf.Type) ABIValue {
		v := classify(t)
		if v.Class == ClassAggregate {
			v.ByReference = d.byReference(resolveType(t).Common().Offset, 0)
		}
		return v
	}
	if t, ok := typeAt(e); ok {
		sig.Result = valueOf(t)
	}
	r := d.dw.Reader()
	r.Seek(e.Offset)
	if _, err := r.Next(); err != nil || !e.Children {
		return sig, err
	}
	for {
		c, err := r.Next()
		if err != nil {
			return sig, err
		}
		if c == nil || c.Tag == 0 {
			break
		}
		switch c.Tag {
		case dwarf.TagFormalParameter:
			c = d.withOrigin(c)
			v := ABIValue{Class: ClassOther}
			if t, ok := typeAt(c); ok {
				v = valueOf(t)
			}
			v.Name, _ = c.Val(dwarf.AttrName).(string)
			if isResult, _ := c.Val(dwarf.AttrVarParam).(bool); isResult {
				sig.Results = append(sig.Results, v)
				break
			}
			sig.Params = append(sig.Params, v)
		case dwarf.TagUnspecifiedParameters:
			sig.Variadic = true
		}
		if c.Children {
			r.SkipChildren()
		}
	}
	return sig, nil
}

// classify says how a value of type t travels in a call.
func classify(t godwarf.Type) ABIValue {
	t = resolveType(t)
	v := ABIValue{Class: ClassOther, Size: int(t.Common().ByteSize)}
	switch x := t.(type) {
	case *godwarf.VoidType:
		v.Class = ClassVoid
	case *godwarf.IntType:
		v.Class, v.Signed = ClassInt, true
	case *godwarf.UintType:
		v.Class = ClassInt
	case *godwarf.CharType:
		v.Class, v.Signed, v.Char = ClassInt, true, true
	case *godwarf.UcharType:
		v.Class, v.Char = ClassInt, true
	case *godwarf.BoolType:
		v.Class, v.Bool = ClassInt, true
	case *godwarf.EnumType:
		v.Class, v.Enum = ClassInt, map[int64]string{}
		for _, val := range x.Val {
			v.Signed = v.Signed || val.Val < 0
			v.Enum[val.Val] = val.Name
		}
	case *godwarf.PtrType:
		v.Class, v.Size, v.String = ClassPointer, 8, isCharType(x.Type)
	case *godwarf.ArrayType:
		v.Class, v.Size, v.String = ClassPointer, 8, isCharType(x.Type) // a parameter: decays
	case *godwarf.FuncType:
		v.Class, v.Size = ClassPointer, 8
	case *godwarf.FloatType:
		if v.Size == 4 || v.Size == 8 {
			v.Class = ClassFloat
		}
	case *godwarf.StructType:
		v.Class = ClassAggregate
		v.Words = eightbytes(x, v.Size)
		v.HFA = homogeneousFloats(x)
	}
	if v.Class == ClassInt && (v.Size < 1 || v.Size > 8) {
		v.Class = ClassOther // __int128
	}
	return v
}

// eightbytes classifies a struct's 8-byte words as the SysV x86-64 ABI
// does (3.2.3): a word holding only float or double fields is SSE
// (ClassFloat), any other INTEGER; nil for MEMORY: over 16 bytes, a
// field not aligned to its size, or one the rules do not cover here.
func eightbytes(s *godwarf.StructType, size int) []ValueClass {
	if size <= 0 || size > 16 {
		return nil
	}
	words := make([]ValueClass, (size+7)/8)
	ok := true
	var walk func(t godwarf.Type, at int64, depth int)
	walk = func(t godwarf.Type, at int64, depth int) {
		t = resolveType(t)
		n := t.Common().ByteSize
		switch x := t.(type) {
		case *godwarf.StructType:
			if depth > 8 {
				ok = false
				return
			}
			for _, f := range x.Field {
				walk(f.Type, at+f.ByteOffset, depth+1) // a bitfield: its container
			}
			return
		case *godwarf.ArrayType:
			if x.Count < 0 || depth > 8 {
				ok = false
				return
			}
			stride := resolveType(x.Type).Common().ByteSize
			for i := range x.Count {
				walk(x.Type, at+i*stride, depth+1)
			}
			return
		}
		if n <= 0 || at%n != 0 || at+n > int64(len(words))*8 {
			ok = false
			return
		}
		c := ClassInt
		if _, isFloat := t.(*godwarf.FloatType); isFloat && (n == 4 || n == 8) {
			c = ClassFloat
		} else if isFloat {
			ok = false // long double: x87, MEMORY
			return
		}
		w := &words[at/8]
		if *w == ClassVoid || *w == ClassFloat {
			*w = c
		}
	}
	walk(s, 0, 0)
	if !ok {
		return nil
	}
	for i, w := range words {
		if w == ClassVoid {
			words[i] = ClassFloat // padding only: no INTEGER field makes it INTEGER
		}
	}
	return words
}

// homogeneousFloats returns the member count of s if it is an AAPCS64
// homogeneous floating-point aggregate: 1 to 4 members, all of one float
// type (nested structs and arrays flattened), else 0.
func homogeneousFloats(s *godwarf.StructType) int {
	var kind int64 // the members' size; 0: none yet
	n := 0
	var walk func(t godwarf.Type, depth int) bool
	walk = func(t godwarf.Type, depth int) bool {
		t = resolveType(t)
		switch x := t.(type) {
		case *godwarf.StructType:
			if depth > 8 || x.Kind == "union" {
				return false
			}
			for _, f := range x.Field {
				if !walk(f.Type, depth+1) {
					return false
				}
			}
			return true
		case *godwarf.ArrayType:
			for i := int64(0); i < x.Count; i++ {
				if !walk(x.Type, depth+1) {
					return false
				}
			}
			return x.Count >= 0
		case *godwarf.FloatType:
			size := x.ByteSize
			if kind != 0 && size != kind || size != 4 && size != 8 {
				return false
			}
			kind = size
			n++
			return n <= 4
		}
		return false
	}
	if !walk(s, 0) || n == 0 {
		return 0
	}
	return n
}

// DWARF's DW_AT_calling_convention values for a type (DWARF 5).
const (
	ccPassByReference = 4
	ccPassByValue     = 5
)

// byReference reports whether the class whose DIE is at off is
// non-trivial for the purposes of calls (the Itanium C++ ABI): passed and
// returned by a hidden pointer. DWARF says so where the compiler writes
// DW_AT_calling_convention (clang); gcc does not, so the class's own
// declarations tell, as gdb reads them: a destructor, or a copy or move
// constructor, that is user-provided (not implicit, not defaulted in the
// class), a virtual function or base, or such a base or member. A C
// struct declares none.
func (d *DebugInfo) byReference(off dwarf.Offset, depth int) bool {
	r := d.dw.Reader()
	r.Seek(off)
	e, err := r.Next()
	if err != nil || e == nil || depth > 8 {
		return false
	}
	switch e.Tag {
	case dwarf.TagStructType, dwarf.TagClassType, dwarf.TagUnionType:
	default:
		return false
	}
	switch cc, _ := e.Val(dwarf.AttrCalling).(int64); cc {
	case ccPassByReference:
		return true
	case ccPassByValue:
		return false
	}
	class, _ := e.Val(dwarf.AttrName).(string)
	class, _, _ = strings.Cut(class, "<") // a template's constructors are named without its arguments
	// The copy and move constructors declared: if all are deleted,
	// the class cannot be copied and goes by reference too.
	copies, deleted := 0, 0
	if !e.Children {
		return false
	}
	for {
		c, err := r.Next()
		if err != nil || c == nil || c.Tag == 0 {
			break
		}
		switch c.Tag {
		case dwarf.TagInheritance:
			if c.Val(dwarf.AttrVirtuality) != nil {
				return true
			}
			if t, ok := c.Val(dwarf.AttrType).(dwarf.Offset); ok && d.byReference(d.strippedType(t), depth+1) {
				return true
			}
		case dwarf.TagMember:
			if c.Val(dwarf.AttrExternal) != nil {
				break // a static member (DWARF 4)
			}
			if t, ok := c.Val(dwarf.AttrType).(dwarf.Offset); ok && d.byReference(d.strippedType(t), depth+1) {
				return true
			}
		case dwarf.TagSubprogram:
			if c.Val(dwarf.AttrVirtuality) != nil {
				return true // a vtable pointer to copy: a non-trivial copy
			}
			name, _ := c.Val(dwarf.AttrName).(string)
			implicit, _ := c.Val(dwarf.AttrArtificial).(bool)
			defaulted, _ := c.Val(dwarf.AttrDefaulted).(int64)
			isDeleted, _ := c.Val(dwarf.AttrDeleted).(bool)
			provided := !implicit && defaulted != 1 && !isDeleted // (1: DW_DEFAULTED_in_class)
			switch {
			case strings.HasPrefix(name, "~"):
				if provided {
					return true
				}
			case name == class && c.Children:
				if !d.copiesClass(r, off) {
					continue // (its children read)
				}
				copies++
				if isDeleted {
					deleted++
				} else if provided {
					return true
				}
				continue
			}
		}
		if c.Children {
			r.SkipChildren()
		}
	}
	return copies > 0 && copies == deleted
}

// copiesClass reads the parameters of the constructor r is at the
// children of, and reports whether it is a copy or a move constructor
// of the class at class: its one parameter besides this a reference to
// the class.
func (d *DebugInfo) copiesClass(r *dwarf.Reader, class dwarf.Offset) bool {
	var params []dwarf.Offset
	for depth := 1; depth > 0; {
		c, err := r.Next()
		if err != nil || c == nil {
			return false
		}
		if c.Tag == 0 {
			depth--
			continue
		}
		if artificial, _ := c.Val(dwarf.AttrArtificial).(bool); depth == 1 && c.Tag == dwarf.TagFormalParameter && !artificial {
			t, _ := c.Val(dwarf.AttrType).(dwarf.Offset)
			params = append(params, t)
		}
		if c.Children {
			depth++
		}
	}
	if len(params) != 1 {
		return false
	}
	r2 := d.dw.Reader()
	r2.Seek(params[0])
	ref, err := r2.Next()
	if err != nil || ref == nil || ref.Tag != dwarf.TagReferenceType && ref.Tag != dwarf.TagRvalueReferenceType {
		return false
	}
	to, _ := ref.Val(dwarf.AttrType).(dwarf.Offset)
	return d.strippedType(to) == class
}

// strippedType is the type at off without its typedefs, const and
// volatile, and array dimensions (a member array of a class is as the
// class).
func (d *DebugInfo) strippedType(off dwarf.Offset) dwarf.Offset {
	for range 16 {
		r := d.dw.Reader()
		r.Seek(off)
		e, err := r.Next()
		if err != nil || e == nil {
			return off
		}
		switch e.Tag {
		case dwarf.TagTypedef, dwarf.TagConstType, dwarf.TagVolatileType, dwarf.TagArrayType:
			next, ok := e.Val(dwarf.AttrType).(dwarf.Offset)
			if !ok {
				return off
			}
			off = next
		default:
			return off
		}
	}
	return off
}
