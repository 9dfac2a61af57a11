package fetch

import "testing"

func TestValueText(t *testing.T) {
	tests := []struct {
		v    Value
		want string
	}{
		{UintValue(TypeU8, 0x1ff), "255"},
		{UintValue(TypeU64, 1<<63), "9223372036854775808"},
		{UintValue(TypeS16, 0xfffe), "-2"},
		{UintValue(TypeS64, 1<<63), "-9223372036854775808"},
		{UintValue(TypeX32, 0xdeadbeef), "0xdeadbeef"},
		{UintValue(TypeX8, 0), "0x0"},
		{UintValue(TypeChar, 'a'), "'a'"},
		{UintValue(TypeChar, '\n'), `'\n'`},
		{UintValue(TypeChar, 0), `'\0'`},
		{UintValue(TypeChar, 0xe9), `'\xe9'`},
		{UintValue(TypeChar, '\''), `'''`},
		{UintValue(TypeSymbol, 0x1234), "0x1234"},
		{StringValue("a\tb\r\n\x7f\"é"), `"a\tb\r\n\x7f"é"`},
		{StringValue(""), `""`},
		{FaultValue(TypeString), "(fault)"},
		{FaultValue(TypeU32), "(fault)"},
		{Value{}, "(fault)"},
		{Value{typ: TypeDwarf, str: "{a=1,\nb=2}"}, `{a=1,\nb=2}`},
		{Value{typ: TypeU16, n: 2, str: "\x01\x00\xff\xff"}, "{1,65535}"},
		{Value{typ: TypeS16, n: 2, str: "\x01\x00\xff\xff"}, "{1,-1}"},
		{Value{typ: TypeS16, n: 2, str: "\x01\x00\xff\xff", fault: 2}, "{1,(fault)}"},
		{Value{typ: TypeString, n: 2, fault: 3}, "{(fault),(fault)}"},
		{Value{typ: TypeString, n: 2, elems: []Value{StringValue("a"), FaultValue(TypeString)}}, `{"a",(fault)}`},
	}
	for _, tt := range tests {
		if got := tt.v.String(); got != tt.want {
			t.Errorf("%#v: got %s, want %s", tt.v, got, tt.want)
		}
	}
}

func TestValueAccessors(t *testing.T) {
	v := UintValue(TypeS8, 0xff)
	if v.Int() != -1 || v.Uint() != 0xff || v.Type() != TypeS8 || v.Len() != 0 || v.Faulted() {
		t.Errorf("s8: %d %d %v %d %v", v.Int(), v.Uint(), v.Type(), v.Len(), v.Faulted())
	}
	arr := Value{typ: TypeU16, n: 3, str: "\x01\x00\x02\x00\x03\x00", fault: 4}
	if arr.Len() != 3 || arr.Elem(1).Uint() != 2 || !arr.Elem(2).Faulted() || arr.Faulted() || !arr.Elem(5).Faulted() {
		t.Errorf("array accessors")
	}
	if all := (Value{typ: TypeU8, n: 64, fault: ^uint64(0)}); !all.Faulted() {
		t.Errorf("64 faulted elements: not Faulted")
	}
	if TypeS32.Size() != 4 || !TypeS32.Signed() || TypeU32.Signed() || !TypeUstring.IsString() || TypeString.Size() != 0 {
		t.Errorf("type info")
	}
	if Type(200).String() != "none" || TypeX64.String() != "x64" {
		t.Errorf("type names")
	}
	fields := []Field{{"a", UintValue(TypeU32, 1)}, {"b", StringValue("x")}}
	if got := string(AppendFields([]byte("ev:"), fields)); got != `ev: a=1 b="x"` {
		t.Errorf("AppendFields: %s", got)
	}
}

// TestPrintStringNotText: a string's UTF-8 text is kept, its other bytes
// >= 0x80 escaped (a buffer's garbage past its text, which printed raw
// made the line itself invalid text).
func TestPrintStringNotText(t *testing.T) {
	for in, want := range map[string]string{
		"héllo":              `"héllo"`,
		"ab\xff\xfe\x7f":     `"ab\xff\xfe\x7f"`,
		"\xe2\x82":           `"\xe2\x82"`, // a cut sequence
		"a\xe2\x82\xacb\x80": `"a€b\x80"`,
	} {
		if got := StringValue(in).String(); got != want {
			t.Errorf("%q: %s, want %s", in, got, want)
		}
	}
}
