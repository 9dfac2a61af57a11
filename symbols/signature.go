package symbols

import (
	"debug/dwarf"
	"fmt"

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
}

// Signature is a function's parameters, in order, and its result.
type Signature struct {
	Params   []ABIValue
	Result   ABIValue
	Variadic bool // ends in "...": what the caller passed there is not listed
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
	if t, ok := typeAt(e); ok {
		sig.Result = classify(t)
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
			if isResult, _ := c.Val(dwarf.AttrVarParam).(bool); isResult {
				break
			}
			v := ABIValue{Class: ClassOther}
			if t, ok := typeAt(c); ok {
				v = classify(t)
			}
			v.Name, _ = c.Val(dwarf.AttrName).(string)
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
