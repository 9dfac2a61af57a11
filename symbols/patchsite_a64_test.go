package symbols

import (
	"encoding/binary"
	"testing"
)

// Instruction words (aarch64-linux-gnu-as) of the prologues
// TestA64PrologueEnd reads.
const (
	a64Stp48   = 0xa9bd7bfd // stp x29, x30, [sp, #-48]!
	a64Stp512  = 0xa9a07bfd // stp x29, x30, [sp, #-512]!
	a64StpFP16 = 0xa9017bfd // stp x29, x30, [sp, #16] (no writeback)
	a64SaveX19 = 0xa90153f3 // stp x19, x20, [sp, #16]
	a64Xpaclri = 0xd50320ff
	a64MovW19  = 0x2a0003f3 // mov w19, w0
	a64MovX0LR = 0xaa1e03e0 // mov x0, x30
	a64Bl      = 0x94000000 // bl .
	a64StrSlot = 0xf90007e1 // str x1, [sp, #8]: the saved x30
	a64Sub16   = 0xd10043ff // sub sp, sp, #0x10
	a64Str24   = 0xf9000fe1 // str x1, [sp, #24]
	a64MovFPX1 = 0xaa0103fd // mov x29, x1
	a64Cbz     = 0xb4000000 // cbz x0, .
	a64MovX1LR = 0xaa1e03e1 // mov x1, x30 (-O0)
	a64StrW0   = 0xb9001fe0 // str w0, [sp, #28]
	a64MovLRX1 = 0xaa0103fe // mov x30, x1
	a64PushX19 = 0xf81f0ff3 // str x19, [sp, #-16]!
	a64StpD8   = 0x6d0027e8 // stp d8, d9, [sp]: over the slot
	a64SturFP4 = 0xf80043a2 // stur x2, [x29, #4]: over the slot
	a64LdpFP   = 0xa94107fd // ldp x29, x1, [sp, #16]
	a64StrQ0   = 0x3d8007e0 // str q0, [sp, #16]
)

// TestA64PrologueEnd: past the bl of _mcount after `stp x29, x30,
// [sp, #-N]!; mov x29, sp` and instructions that keep x29 and the saved
// x30 at [x29, #8], sp N above x29; nothing for anything else.
func TestA64PrologueEnd(t *testing.T) {
	gccO2 := []uint32{a64Stp48, a64MovFP, a64SaveX19, a64Xpaclri, a64MovW19, a64MovX0LR, a64Bl}
	with := func(after int, ws ...uint32) []uint32 { // gccO2 with ws after its first after words
		return append(append(append([]uint32{}, gccO2[:after]...), ws...), gccO2[after:]...)
	}
	for _, tc := range []struct {
		name   string
		code   []uint32
		mcount bool // the bl calls _mcount
		end    int
		above  uint64
	}{
		{"gcc -O2", gccO2, true, 28, 48},
		{"bti c first", append([]uint32{a64BtiC}, gccO2...), true, 32, 48},
		{"-O0's copy of x30", []uint32{a64Stp48, a64MovFP, a64MovX1LR, a64StrW0, a64MovLRX1, a64Xpaclri, a64MovX0LR, a64Bl}, true, 32, 48},
		{"a 512-byte frame", append([]uint32{a64Stp512}, gccO2[1:]...), true, 28, 512},
		{"a store below x29 once sp is lowered", with(3, a64Sub16, a64StrSlot), true, 36, 48},
		{"a q register saved", with(3, a64StrQ0), true, 32, 48},
		{"not _mcount", gccO2, false, 0, 0},
		{"signed: paciasp", append([]uint32{a64Paciasp}, gccO2...), true, 0, 0},
		{"paciasp later", with(2, a64Paciasp), true, 0, 0},
		{"the slot overwritten", with(2, a64StrSlot), true, 0, 0},
		{"the slot overwritten once sp is lowered", with(3, a64Sub16, a64Str24), true, 0, 0},
		{"the slot overwritten by a pair", with(2, a64StpD8), true, 0, 0},
		{"the slot overwritten through x29", with(2, a64SturFP4), true, 0, 0},
		{"x29 written", with(2, a64MovFPX1), true, 0, 0},
		{"x29 loaded", with(2, a64LdpFP), true, 0, 0},
		{"sp written back", with(2, a64PushX19), true, 0, 0},
		{"a branch first", with(2, a64Cbz), true, 0, 0},
		{"no frame record first", append([]uint32{a64StpFP16}, gccO2[1:]...), true, 0, 0},
		{"no mov x29, sp", append([]uint32{a64Stp48}, gccO2[2:]...), true, 0, 0},
		{"no bl", gccO2[:6], true, 0, 0},
	} {
		code := make([]byte, 0, 4*len(tc.code))
		for _, w := range tc.code {
			code = binary.LittleEndian.AppendUint32(code, w)
		}
		isMcount := func(off int) bool {
			if off != 4*(len(tc.code)-1) {
				t.Errorf("%s: asked about a bl at %d", tc.name, off)
			}
			return tc.mcount
		}
		if end, above := a64PrologueEnd(code, isMcount); end != tc.end || above != tc.above {
			t.Errorf("%s: got end %d, sp x29+%d; want %d, x29+%d", tc.name, end, above, tc.end, tc.above)
		}
	}
}
