package probe

import "testing"

// TestPreIndexedLRSave: the Go assembler's arm64 prologue, as in
// runtime.sigtramp (`MOVD.W R30, -192(RSP)`) and runtime.sigtrampgo's
// 128, gives its frame size; other stores do not.
func TestPreIndexedLRSave(t *testing.T) {
	for _, tc := range []struct {
		insn uint32
		n    int
		ok   bool
	}{
		{0xf8140ffe, 192, true},
		{0xf8180ffe, 128, true},
		{0xf81f0ffe, 16, true},
		{0xf81f83fd, 0, false}, // str x29, [sp, #-8] (no writeback)
		{0xf8140ffd, 0, false}, // x29, not x30
		{0xa9bf7bfd, 0, false}, // stp x29, x30, [sp, #-16]!
	} {
		n, ok := preIndexedLRSave(tc.insn)
		if n != tc.n || ok != tc.ok {
			t.Errorf("%#08x: %d, %v; want %d, %v", tc.insn, n, ok, tc.n, tc.ok)
		}
	}
}
