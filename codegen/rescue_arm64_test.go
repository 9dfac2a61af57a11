package codegen

import (
	"bytes"
	"encoding/binary"
	"testing"
)

// The handler decodes whole, its every branch lands on one of its own
// words, it names the page by its address, and the restorer is
// rt_sigreturn.
func TestRescueCode(t *testing.T) {
	const at, page = 0x7f00000000, 0x7f12345000
	code, restorer, err := (&RescueCode{Page: page}).Code(at)
	if err != nil {
		t.Fatal(err)
	}
	checkA64(t, "rescue", code, at)
	want := &a64{}
	want.mov64(21, page)
	if !bytes.Contains(code, want.bytes()) {
		t.Errorf("the page %#x is not put in x21", page)
	}
	off := restorer - at
	if off+8 != uint64(len(code)) {
		t.Fatalf("restorer at +%#x, want the last two words of %#x bytes", off, len(code))
	}
	if w := binary.LittleEndian.Uint32(code[off:]); w != 0xd2801168 { // mov x8, #139
		t.Errorf("restorer: %08x, want mov x8, #SYS_rt_sigreturn", w)
	}
	if w := binary.LittleEndian.Uint32(code[off+4:]); w != a64Svc {
		t.Errorf("restorer then: %08x, want svc #0", w)
	}
}
