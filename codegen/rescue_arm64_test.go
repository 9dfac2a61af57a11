package codegen

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/probedbg/probe/singlestep"
)

// The handler decodes whole, its every branch lands on one of its own
// words, it names the page by its address, the restorer is
// rt_sigreturn, and the guard's stub svc then brk, at the code's end.
func TestRescueCode(t *testing.T) {
	const at, page = 0x7f00000000, 0x7f12345000
	code, entries, err := (&RescueCode{Page: page}).Code(at)
	restorer := entries.Restorer
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
	if entries.Syscall != restorer+8 || off+16 != uint64(len(code)) {
		t.Fatalf("restorer at +%#x, stub at %#x, want the last four words of %#x bytes", off, entries.Syscall, len(code))
	}
	if w := binary.LittleEndian.Uint32(code[off+8:]); w != a64Svc {
		t.Errorf("the guard's stub: %08x, want svc #0", w)
	}
	if !bytes.Equal(code[off+12:], singlestep.BreakpointInsn) {
		t.Errorf("the guard's stub then: % x, want brk", code[off+12:])
	}
	if w := binary.LittleEndian.Uint32(code[off:]); w != 0xd2801168 { // mov x8, #139
		t.Errorf("restorer: %08x, want mov x8, #SYS_rt_sigreturn", w)
	}
	if w := binary.LittleEndian.Uint32(code[off+4:]); w != a64Svc {
		t.Errorf("restorer then: %08x, want svc #0", w)
	}
}
