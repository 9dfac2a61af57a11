package symbols

import (
	"encoding/binary"
	"slices"
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

	// Frames over 512 bytes (gcc -O2 and -O0 -pg, aarch64-linux-gnu-gcc 12).
	a64Sub640    = 0xd10a03ff // sub sp, sp, #640
	a64Sub688    = 0xd10ac3ff // sub sp, sp, #688
	a64Sub400    = 0xd10643ff // sub sp, sp, #400
	a64Sub17x4K  = 0xd14047ff // sub sp, sp, #17, lsl #12
	a64MovX12    = 0xd282760c // mov x12, #5040
	a64MovkX12   = 0xf2a0002c // movk x12, #1, lsl #16
	a64SubX12    = 0xcb2c63ff // sub sp, sp, x12
	a64SubX13    = 0xcb2d63ff // sub sp, sp, x13
	a64StpFP0    = 0xa9007bfd // stp x29, x30, [sp]
	a64AddFP16   = 0x910043fd // add x29, sp, #16
	a64AddFP32   = 0x910083fd // add x29, sp, #32
	a64SaveX19At = 0xa90253f3 // stp x19, x20, [sp, #32]
	a64StrX19At  = 0xf90013f3 // str x19, [sp, #32]
	a64StrX1At24 = 0xf9000fe1 // str x1, [sp, #24]: the slot when x29 is sp+16
	a64Stp48Pre  = 0xa9bd7bfd // stp x29, x30, [sp, #-48]! (after a sub: not gcc's)
	a64Autiasp   = 0xd50323bf
)

// TestA64PrologueEnd: past the bl of _mcount after gcc's frames (`stp
// x29, x30, [sp, #-N]!; mov x29, sp`, or sp lowered by N first and the
// record R bytes up) and instructions that keep x29 and the saved x30
// at [x29, #8], sp N-R above x29, the key of a paciasp or pacibsp
// first; nothing for anything else.
func TestA64PrologueEnd(t *testing.T) {
	gccO2 := []uint32{a64Stp48, a64MovFP, a64SaveX19, a64Xpaclri, a64MovW19, a64MovX0LR, a64Bl}
	with := func(after int, ws ...uint32) []uint32 { // gccO2 with ws after its first after words
		return append(append(append([]uint32{}, gccO2[:after]...), ws...), gccO2[after:]...)
	}
	// gcc's frames over 512 bytes: big(600 bytes of locals), -O2 and -O0;
	// big3 (outgoing arguments: the record 16 bytes up); big2 (5040
	// bytes); big4 (70,000 bytes).
	big := []uint32{a64Sub640, a64StpFP0, a64MovFP, a64SaveX19, a64Xpaclri, a64MovW19, a64MovX0LR, a64Bl}
	bigO0 := []uint32{a64Sub640, a64StpFP0, a64MovFP, a64MovX1LR, a64StrW0, a64MovLRX1, a64Xpaclri, a64MovX0LR, a64Bl}
	big3 := []uint32{a64Sub688, a64StpFP16, a64AddFP16, a64SaveX19At, a64Xpaclri, a64MovW19, a64MovX0LR, a64Bl}
	big2 := []uint32{a64MovX12, a64SubX12, a64StpFP0, a64MovFP, a64SaveX19, a64Xpaclri, a64MovW19, a64MovX0LR, a64Bl}
	big4 := []uint32{a64Sub400, a64Sub17x4K, a64StpFP0, a64MovFP, a64SaveX19, a64Xpaclri, a64MovW19, a64MovX0LR, a64Bl}
	signed := func(key uint32, code []uint32) []uint32 { return append([]uint32{key}, code...) }
	for _, tc := range []struct {
		name   string
		code   []uint32
		mcount bool // the bl calls _mcount
		end    int
		above  uint64
		key    byte
	}{
		{"gcc -O2", gccO2, true, 28, 48, 0},
		{"bti c first", append([]uint32{a64BtiC}, gccO2...), true, 32, 48, 0},
		{"-O0's copy of x30", []uint32{a64Stp48, a64MovFP, a64MovX1LR, a64StrW0, a64MovLRX1, a64Xpaclri, a64MovX0LR, a64Bl}, true, 32, 48, 0},
		{"a 512-byte frame", append([]uint32{a64Stp512}, gccO2[1:]...), true, 28, 512, 0},
		{"a store below x29 once sp is lowered", with(3, a64Sub16, a64StrSlot), true, 36, 48, 0},
		{"a q register saved", with(3, a64StrQ0), true, 32, 48, 0},
		{"signed: paciasp", signed(a64Paciasp, gccO2), true, 32, 48, 'A'},
		{"signed: pacibsp", signed(a64Pacibsp, gccO2), true, 32, 48, 'B'},
		{"signed after bti c", append([]uint32{a64BtiC}, signed(a64Paciasp, gccO2)...), true, 36, 48, 'A'},
		{"sub sp, then the record", big, true, 32, 640, 0},
		{"sub sp, then the record, -O0", bigO0, true, 36, 640, 0},
		{"sub sp, the record 16 bytes up", big3, true, 32, 672, 0},
		{"sub sp, x12", big2, true, 36, 5040, 0},
		{"sub sp, x12 of a movz and movk", append([]uint32{a64MovX12, a64MovkX12}, big2[1:]...), true, 40, 5040 + 1<<16, 0},
		{"two subs", big4, true, 36, 400 + 17<<12, 0},
		{"sub sp, signed", signed(a64Paciasp, big), true, 36, 640, 'A'},
		{"sub sp: a store over the slot", append(slices.Clone(big3[:3]), a64StrX1At24, a64Xpaclri, a64MovX0LR, a64Bl), true, 0, 0, 0},
		{"sub sp: a store above the slot", append(slices.Clone(big3[:3]), a64StrX19At, a64Xpaclri, a64MovX0LR, a64Bl), true, 28, 672, 0},
		{"not _mcount", gccO2, false, 0, 0, 0},
		{"paciasp later", with(2, a64Paciasp), true, 0, 0, 0},
		{"the slot overwritten", with(2, a64StrSlot), true, 0, 0, 0},
		{"the slot overwritten once sp is lowered", with(3, a64Sub16, a64Str24), true, 0, 0, 0},
		{"the slot overwritten by a pair", with(2, a64StpD8), true, 0, 0, 0},
		{"the slot overwritten through x29", with(2, a64SturFP4), true, 0, 0, 0},
		{"x29 written", with(2, a64MovFPX1), true, 0, 0, 0},
		{"x29 loaded", with(2, a64LdpFP), true, 0, 0, 0},
		{"sp written back", with(2, a64PushX19), true, 0, 0, 0},
		{"a branch first", with(2, a64Cbz), true, 0, 0, 0},
		{"no frame record first", append([]uint32{a64StpFP16}, gccO2[1:]...), true, 0, 0, 0},
		{"no mov x29, sp", append([]uint32{a64Stp48}, gccO2[2:]...), true, 0, 0, 0},
		{"no bl", gccO2[:6], true, 0, 0, 0},
		{"sub sp: x29 not at the record", append([]uint32{a64Sub688, a64StpFP16, a64AddFP32}, big3[3:]...), true, 0, 0, 0},
		{"sub sp: mov x29, sp, the record 16 up", append([]uint32{a64Sub688, a64StpFP16, a64MovFP}, big3[3:]...), true, 0, 0, 0},
		{"sub sp, x13 after mov x12", append([]uint32{a64MovX12, a64SubX13}, big2[2:]...), true, 0, 0, 0},
		{"sub sp, then a pushed record", append([]uint32{a64Sub640, a64Stp48Pre}, gccO2[1:]...), true, 0, 0, 0},
		{"sub sp, no record", append([]uint32{a64Sub640}, gccO2[1:]...), true, 0, 0, 0},
		{"signed, not first", append([]uint32{a64Sub640, a64Paciasp}, big[1:]...), true, 0, 0, 0},
		{"autiasp is no sign", signed(a64Autiasp, gccO2), true, 0, 0, 0},
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
		if end, above, key := a64PrologueEnd(code, isMcount); end != tc.end || above != tc.above || key != tc.key {
			t.Errorf("%s: got end %d, sp x29+%d, key %q; want %d, x29+%d, %q", tc.name, end, above, key, tc.end, tc.above, tc.key)
		}
	}
}
