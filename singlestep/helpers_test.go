package singlestep

import (
	"encoding/binary"
	"fmt"
	"testing"

	"github.com/probedbg/probe/internal/testhex"
)

// hx parses hex bytes written with spaces, e.g. "48 89 e5".
var hx = testhex.Bytes

// fakeMem is a sparse tracee address space: bytes not present are unmapped.
type fakeMem struct {
	bytes     map[uint64]byte
	readOnly  bool // every write fails
	writes    int  // successful WriteAt calls
	lastWrite uint64
}

func newFakeMem() *fakeMem { return &fakeMem{bytes: map[uint64]byte{}} }

// mapRange makes [addr, addr+n) accessible, zero-filled.
func (m *fakeMem) mapRange(addr uint64, n int) {
	for i := range n {
		m.bytes[addr+uint64(i)] = 0
	}
}

func (m *fakeMem) ReadAt(p []byte, off int64) (int, error) {
	for i := range p {
		b, ok := m.bytes[uint64(off)+uint64(i)]
		if !ok {
			return i, fmt.Errorf("unmapped address %#x", uint64(off)+uint64(i))
		}
		p[i] = b
	}
	return len(p), nil
}

func (m *fakeMem) WriteAt(p []byte, off int64) (int, error) {
	if m.readOnly {
		return 0, fmt.Errorf("write to %#x refused", uint64(off))
	}
	for i := range p {
		if _, ok := m.bytes[uint64(off)+uint64(i)]; !ok {
			return i, fmt.Errorf("unmapped address %#x", uint64(off)+uint64(i))
		}
	}
	for i, b := range p {
		m.bytes[uint64(off)+uint64(i)] = b
	}
	m.writes++
	m.lastWrite = uint64(off)
	return len(p), nil
}

func (m *fakeMem) u64(t testing.TB, addr uint64) uint64 {
	t.Helper()
	var b [8]byte
	if _, err := m.ReadAt(b[:], int64(addr)); err != nil {
		t.Fatalf("reading fake memory: %v", err)
	}
	return binary.LittleEndian.Uint64(b[:])
}

func (m *fakeMem) putU64(addr, v uint64) {
	for i := range 8 {
		m.bytes[addr+uint64(i)] = byte(v >> (8 * i))
	}
}
