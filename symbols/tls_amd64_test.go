package symbols

import (
	"encoding/binary"
	"os"
	"testing"
)

// errno's slot is the one glibc's own __errno_location loads: on x86-64
// its first instruction is mov disp32(%rip),%rax.
func TestTLSSlotErrno(t *testing.T) {
	path := "/lib/x86_64-linux-gnu/libc.so.6"
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("no glibc at %s: %v", path, err)
	}
	m, err := OpenModule(path)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	slot, ok := m.TLSSlot("errno")
	if !ok {
		t.Fatal("no TLS slot for errno in glibc")
	}
	if m.dynsym != nil {
		t.Error("TLSSlot decoded every dynamic symbol (its table read as bytes is enough)")
	}
	fn, ok := m.Lookup("__errno_location")
	if !ok {
		t.Fatal("no __errno_location")
	}
	code, err := m.ReadCode(fn.Addr, 7)
	if err != nil {
		t.Fatal(err)
	}
	if code[0] != 0x48 || code[1] != 0x8b || code[2] != 0x05 {
		t.Fatalf("__errno_location starts % x, not mov disp32(%%rip),%%rax", code)
	}
	want := fn.Addr + 7 + uint64(int64(int32(binary.LittleEndian.Uint32(code[3:]))))
	if slot != want {
		t.Errorf("errno's slot %#x, __errno_location loads %#x", slot, want)
	}
	if _, ok := m.TLSSlot("no_such_tls"); ok {
		t.Error("a slot for a variable glibc does not have")
	}
}
