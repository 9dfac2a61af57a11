package fetch

import (
	"bytes"
	"encoding/gob"
	"testing"
)

func TestValueGobRoundTrip(t *testing.T) {
	values := []Value{
		{},
		UintValue(TypeU32, 7),
		UintValue(TypeS8, 0xff),
		UintValue(TypeX64, 0xdeadbeef),
		StringValue("hi\n"),
		FaultValue(TypeString),
		{typ: TypeU16, n: 3, str: "\x01\x00\x02\x00", fault: 4},
		{typ: TypeString, n: 2, elems: []Value{StringValue("a"), FaultValue(TypeString)}},
		{typ: TypeSymbol, bits: 0x401000, str: "main+0x0/0x20"},
	}
	var buf bytes.Buffer
	if err := gob.NewEncoder(&buf).Encode(values); err != nil {
		t.Fatal(err)
	}
	var got []Value
	if err := gob.NewDecoder(&buf).Decode(&got); err != nil {
		t.Fatal(err)
	}
	if len(got) != len(values) {
		t.Fatalf("got %d values, want %d", len(got), len(values))
	}
	for i := range values {
		if g, w := got[i].String(), values[i].String(); g != w || got[i].Type() != values[i].Type() || got[i].Len() != values[i].Len() {
			t.Errorf("value %d: got %s (%v/%d), want %s (%v/%d)", i, g, got[i].Type(), got[i].Len(), w, values[i].Type(), values[i].Len())
		}
	}
}

func TestValueUnmarshalRejectsGarbage(t *testing.T) {
	for _, b := range [][]byte{nil, {1}, {1, 0, 0x80}, {1, 0, 0, 0, 50, 'x'}} {
		var v Value
		if err := v.UnmarshalBinary(b); err == nil {
			t.Errorf("%x: decoded as %s, want an error", b, v)
		}
	}
}
