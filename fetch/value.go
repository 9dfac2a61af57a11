package fetch

import (
	"strconv"
	"unicode/utf8"
)

// Type is how a fetched value is stored and printed. These are the
// kprobe_events fetch types (kernel/trace/trace_probe.c probe_fetch_types),
// plus TypeDwarf for a DWARF variable printed in its own type.
type Type uint8

// The fetch types. Bitfields (b<width>@<offset>/<size>) are stored and
// printed as the unsigned type of their container, as the kernel does.
const (
	TypeNone Type = iota
	TypeU8
	TypeU16
	TypeU32
	TypeU64
	TypeS8
	TypeS16
	TypeS32
	TypeS64
	TypeX8
	TypeX16
	TypeX32
	TypeX64
	TypeChar
	TypeString
	TypeUstring
	TypeSymbol
	TypeDwarf // a DWARF variable in its natural rendering (DwarfVar.Read's text)
)

// FaultString is what a value that could not be read prints as, as the
// kernel's FAULT_STRING.
const FaultString = "(fault)"

// MaxStringSize is the most bytes a string fetch keeps, its NUL included,
// as the kernel's MAX_STRING_SIZE (PATH_MAX): longer strings are cut at
// MaxStringSize-1 bytes.
const MaxStringSize = 4096

// MaxArrayLen is the longest TYPE[N] array, as the kernel's MAX_ARRAY_LEN.
const MaxArrayLen = 64

type typeInfo struct {
	name   string
	size   uint8 // bytes of one element; 0 for strings and DWARF text
	signed bool
	str    bool // compared as a string by filters
	print  func(dst []byte, v Value) []byte
}

// types is the one table of print functions, indexed by Type. The formats
// are the kernel's: "%u"/"%Lu", "%d"/"%Ld", "0x%x"/"0x%Lx", "'%c'",
// "\"%s\"", "%pS".
var fetchTypes = [...]typeInfo{
	TypeNone:    {name: "none", print: printFault},
	TypeU8:      {name: "u8", size: 1, print: printUnsigned},
	TypeU16:     {name: "u16", size: 2, print: printUnsigned},
	TypeU32:     {name: "u32", size: 4, print: printUnsigned},
	TypeU64:     {name: "u64", size: 8, print: printUnsigned},
	TypeS8:      {name: "s8", size: 1, signed: true, print: printSigned},
	TypeS16:     {name: "s16", size: 2, signed: true, print: printSigned},
	TypeS32:     {name: "s32", size: 4, signed: true, print: printSigned},
	TypeS64:     {name: "s64", size: 8, signed: true, print: printSigned},
	TypeX8:      {name: "x8", size: 1, print: printHex},
	TypeX16:     {name: "x16", size: 2, print: printHex},
	TypeX32:     {name: "x32", size: 4, print: printHex},
	TypeX64:     {name: "x64", size: 8, print: printHex},
	TypeChar:    {name: "char", size: 1, print: printChar},
	TypeString:  {name: "string", str: true, print: printString},
	TypeUstring: {name: "ustring", str: true, print: printString},
	TypeSymbol:  {name: "symbol", size: 8, print: printSymbol},
	TypeDwarf:   {name: "dwarf", print: printText},
}

func (t Type) info() *typeInfo {
	if int(t) < len(fetchTypes) {
		return &fetchTypes[t]
	}
	return &fetchTypes[TypeNone]
}

// String returns the type's name as written in a fetch-arg (u32, string...).
func (t Type) String() string { return t.info().name }

// Size returns the bytes of one element of an integer type, 0 for strings
// and DWARF text.
func (t Type) Size() int { return int(t.info().size) }

// Signed reports whether the type is s8..s64.
func (t Type) Signed() bool { return t.info().signed }

// IsString reports whether the type is string or ustring.
func (t Type) IsString() bool { return t.info().str }

// Value is one fetched value: an integer (its bits, already cut to the
// type's size), a string, or an array of either, any of which may have
// faulted. The zero Value prints as (fault).
type Value struct {
	bits  uint64
	str   string  // strings; symbol names; DWARF text; numeric arrays: their bytes, little-endian
	elems []Value // arrays of strings or symbols
	fault uint64  // scalars: 1 if it faulted; numeric arrays: bit i for element i
	typ   Type
	n     uint8 // array length, 0 for a scalar
}

// UintValue returns an integer value of type t (bits are cut to its size).
func UintValue(t Type, bits uint64) Value {
	return Value{typ: t, bits: bits & valueMask(t.info().size)}
}

// StringValue returns a string value.
func StringValue(s string) Value { return Value{typ: TypeString, str: s} }

// DwarfValue returns a DWARF variable's value as its rendering prints it.
func DwarfValue(text string) Value { return Value{typ: TypeDwarf, str: text} }

// FaultValue returns a value of type t that could not be read.
func FaultValue(t Type) Value { return Value{typ: t, fault: 1} }

// Type returns the value's type (for an array, its elements' type).
func (v Value) Type() Type { return v.typ }

// Len returns the number of elements of an array, 0 for a scalar.
func (v Value) Len() int { return int(v.n) }

// Faulted reports whether the value could not be read (for an array:
// whether no element could).
func (v Value) Faulted() bool {
	if v.n == 0 {
		return v.fault != 0
	}
	if v.elems != nil {
		for i := range v.elems {
			if v.elems[i].fault == 0 {
				return false
			}
		}
		return true
	}
	return v.fault == allElems(v.n)
}

// Uint returns an integer value's bits (pointers, DWARF raw values).
func (v Value) Uint() uint64 { return v.bits }

// Int returns an integer value sign-extended from its type's size.
func (v Value) Int() int64 {
	var shift uint
	switch v.typ {
	case TypeS8, TypeU8, TypeX8, TypeChar:
		shift = 56
	case TypeS16, TypeU16, TypeX16:
		shift = 48
	case TypeS32, TypeU32, TypeX32:
		shift = 32
	}
	return int64(v.bits<<shift) >> shift
}

// Str returns a string value, a symbol's name ("" if unknown), or a DWARF
// variable's text.
func (v Value) Str() string {
	if v.n != 0 {
		return ""
	}
	return v.str
}

// Elem returns element i of an array.
func (v Value) Elem(i int) Value {
	if i < 0 || i >= int(v.n) {
		return Value{typ: v.typ, fault: 1}
	}
	if v.elems != nil {
		return v.elems[i]
	}
	size := int(v.typ.info().size)
	e := Value{typ: v.typ}
	if v.fault&(1<<uint(i)) != 0 || (i+1)*size > len(v.str) {
		e.fault = 1
		return e
	}
	e.bits = valueLE(v.str[i*size : (i+1)*size])
	return e
}

// AppendText appends the value as ftrace prints it.
func (v Value) AppendText(dst []byte) []byte {
	if v.n == 0 {
		return v.appendScalar(dst)
	}
	dst = append(dst, '{')
	for i := 0; i < int(v.n); i++ {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = v.Elem(i).appendScalar(dst)
	}
	return append(dst, '}')
}

func (v Value) appendScalar(dst []byte) []byte {
	if v.fault != 0 {
		return append(dst, FaultString...)
	}
	return v.typ.info().print(dst, v)
}

// String returns the value as ftrace prints it.
func (v Value) String() string { return string(v.AppendText(nil)) }

// Field is one fetched argument.
type Field struct {
	Name  string
	Value Value
}

// AppendFields appends " name=value" for every field, as ftrace prints a
// probe event's arguments.
func AppendFields(dst []byte, fields []Field) []byte {
	for i := range fields {
		dst = append(dst, ' ')
		dst = append(dst, fields[i].Name...)
		dst = append(dst, '=')
		dst = fields[i].Value.AppendText(dst)
	}
	return dst
}

func printFault(dst []byte, _ Value) []byte { return append(dst, FaultString...) }

func printUnsigned(dst []byte, v Value) []byte { return strconv.AppendUint(dst, v.bits, 10) }

func printSigned(dst []byte, v Value) []byte { return strconv.AppendInt(dst, v.Int(), 10) }

func printHex(dst []byte, v Value) []byte {
	return strconv.AppendUint(append(dst, '0', 'x'), v.bits, 16)
}

func printChar(dst []byte, v Value) []byte {
	dst = append(dst, '\'')
	if v.bits == 0 {
		dst = append(dst, '\\', '0')
	} else {
		dst = appendValueByte(dst, byte(v.bits), true)
	}
	return append(dst, '\'')
}

// printString prints "%s" in quotes as the kernel does. The kernel copies
// the bytes as they are; control bytes are escaped here (\n, \t, \r,
// \xNN) so that a value can never break an event's line, and so are
// bytes that are not UTF-8 text (a buffer's garbage past its string).
func printString(dst []byte, v Value) []byte {
	dst = append(dst, '"')
	for i := 0; i < len(v.str); {
		if c := v.str[i]; c >= utf8.RuneSelf {
			if r, n := utf8.DecodeRuneInString(v.str[i:]); r != utf8.RuneError || n > 1 {
				dst = append(dst, v.str[i:i+n]...)
				i += n
				continue
			}
			dst = appendValueByte(dst, c, true)
			i++
			continue
		}
		dst = appendValueByte(dst, v.str[i], false)
		i++
	}
	return append(dst, '"')
}

// printSymbol prints %pS: sym+0xoff/0xsize, or the address in hex when no
// symbol covers it (as the kernel's sprint_symbol).
func printSymbol(dst []byte, v Value) []byte {
	if v.str != "" {
		return append(dst, v.str...)
	}
	return printHex(dst, v)
}

// printText prints a DWARF variable's own rendering.
func printText(dst []byte, v Value) []byte {
	for i := 0; i < len(v.str); i++ {
		c := v.str[i]
		if c < 0x20 || c == 0x7f {
			dst = appendValueByte(dst, c, false)
		} else {
			dst = append(dst, c)
		}
	}
	return dst
}

const valueHexDigits = "0123456789abcdef"

// appendValueByte appends c, escaping control bytes (and, for a char,
// bytes >= 0x80, which alone are not text).
func appendValueByte(dst []byte, c byte, char bool) []byte {
	switch {
	case c == '\n':
		return append(dst, '\\', 'n')
	case c == '\t':
		return append(dst, '\\', 't')
	case c == '\r':
		return append(dst, '\\', 'r')
	case c < 0x20 || c == 0x7f || char && c >= 0x80:
		return append(dst, '\\', 'x', valueHexDigits[c>>4], valueHexDigits[c&15])
	}
	return append(dst, c)
}

func valueMask(size uint8) uint64 {
	if size == 0 || size >= 8 {
		return ^uint64(0)
	}
	return 1<<(8*uint(size)) - 1
}

// valueLE decodes a little-endian integer of 1, 2, 4 or 8 bytes.
func valueLE[T string | []byte](b T) uint64 {
	var x uint64
	switch len(b) {
	case 1, 2, 4, 8:
		for i := len(b) - 1; i >= 0; i-- {
			x = x<<8 | uint64(b[i])
		}
	}
	return x
}
