package probe

import (
	"bytes"
	"testing"
)

// TestRecordedMemory: a record's memory reads as the stub copied it: a
// string copied whole to its bound reads on as NULs past it, but only
// as the string's own tail: the words at sp, above it, read as recorded,
// and memory further on is not recorded at all.
func TestRecordedMemory(t *testing.T) {
	str := snippet{addr: 0x1000, data: bytes.Repeat([]byte{'x'}, 256), got: 256, want: 256, str: true}
	field := snippet{addr: 0x5000, data: []byte{1, 2, 3, 4, 0, 0, 0, 0}, got: 2, want: 4}
	s := &stackWords{sp: 0x1100, words: []uint64{0x1122334455667788}, snips: []snippet{str, field}, nsnips: 2}
	read := func(addr uint64, n int) ([]byte, error) {
		p := make([]byte, n)
		got, err := s.ReadAt(p, int64(addr))
		return p[:got], err
	}
	if b, err := read(0x1100, 8); err != nil || !bytes.Equal(b, []byte{0x88, 0x77, 0x66, 0x55, 0x44, 0x33, 0x22, 0x11}) {
		t.Errorf("the word at sp, above a cut string: %x, %v", b, err)
	}
	if b, err := read(0x10f0, 4); err != nil || string(b) != "xxxx" {
		t.Errorf("the string's bytes: %q, %v", b, err)
	}
	if b, err := read(0x1200, 4); err != nil || !bytes.Equal(b, make([]byte, 4)) {
		t.Errorf("past the string's bound: %x, %v; want NULs", b, err)
	}
	if b, err := read(0x1000+MaxStringSize, 4); err == nil {
		t.Errorf("past the longest string: %x, no error", b)
	}
	if b, err := read(0x5000, 4); err == nil || !bytes.Equal(b, []byte{1, 2}) {
		t.Errorf("a read that faulted after 2 bytes: %x, %v", b, err)
	}
}
