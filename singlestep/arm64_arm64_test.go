package singlestep

import (
	"encoding/binary"
	"errors"
	"testing"

	"golang.org/x/sys/unix"
)

// The words below are aarch64-linux-gnu-as's, linked at 0x400000 (objdump
// shown beside each), so the expected targets are the assembler's.

func word(w uint32) []byte { return binary.LittleEndian.AppendUint32(nil, w) }

func TestArm64Emulate(t *testing.T) {
	const lit = 0x400800
	tests := []struct {
		name  string
		w     uint32
		addr  uint64
		setup func(r *unix.PtraceRegs)
		check func(r *unix.PtraceRegs) bool
		pc    uint64 // where the thread goes on
	}{
		{"nop", 0xd503201f, 0x400000, nil, nil, 0x400004},
		{"bti c: BTYPE consumed", 0xd503245f, 0x400004, func(r *unix.PtraceRegs) { r.Pstate = 1 << 10 }, func(r *unix.PtraceRegs) bool { return r.Pstate == 0 }, 0x400008},
		{"mov x29, sp", 0x910003fd, 0x400010, nil, func(r *unix.PtraceRegs) bool { return r.Regs[29] == 0x7000 }, 0x400014},
		{"sub sp, sp, #0x40", 0xd10103ff, 0x400014, nil, func(r *unix.PtraceRegs) bool { return r.Sp == 0x7000-0x40 }, 0x400018},
		{"add x0, x1, #0x10, lsl #12", 0x91404020, 0x400018, func(r *unix.PtraceRegs) { r.Regs[1] = 5 }, func(r *unix.PtraceRegs) bool { return r.Regs[0] == 0x10005 }, 0x40001c},
		{"b 400100", 0x14000039, 0x40001c, nil, nil, 0x400100},
		{"bl 3fff00", 0x97ffffb8, 0x400020, nil, func(r *unix.PtraceRegs) bool { return r.Regs[30] == 0x400024 }, 0x3fff00},
		{"b.eq taken", 0x540000e0, 0x400024, func(r *unix.PtraceRegs) { r.Pstate = 1 << 30 }, nil, 0x400040},
		{"b.eq not taken", 0x540000e0, 0x400024, nil, nil, 0x400028},
		{"b.ne taken", 0x540000c1, 0x400028, nil, nil, 0x400040},
		{"b.hi taken (C, not Z)", 0x540000a8, 0x40002c, func(r *unix.PtraceRegs) { r.Pstate = 1 << 29 }, nil, 0x400040},
		{"b.hi not taken (C and Z)", 0x540000a8, 0x40002c, func(r *unix.PtraceRegs) { r.Pstate = 3 << 29 }, nil, 0x400030},
		{"b.lt taken (N, not V)", 0x5400008b, 0x400030, func(r *unix.PtraceRegs) { r.Pstate = 1 << 31 }, nil, 0x400040},
		{"b.lt not taken (N and V)", 0x5400008b, 0x400030, func(r *unix.PtraceRegs) { r.Pstate = 9 << 28 }, nil, 0x400034},
		{"cbz w3: low half zero", 0x34ffff63, 0x400034, func(r *unix.PtraceRegs) { r.Regs[3] = 0xffffffff_00000000 }, nil, 0x400020},
		{"cbnz x3: zero", 0xb5ffff43, 0x400038, nil, nil, 0x40003c},
		{"tbz x5, #33: clear", 0xb60fff25, 0x40003c, func(r *unix.PtraceRegs) { r.Regs[5] = 1 << 32 }, nil, 0x400020},
		{"tbz x5, #33: set", 0xb60fff25, 0x40003c, func(r *unix.PtraceRegs) { r.Regs[5] = 1 << 33 }, nil, 0x400040},
		{"tbnz w5, #2", 0x3717ff05, 0x400040, func(r *unix.PtraceRegs) { r.Regs[5] = 4 }, nil, 0x400020},
		{"adr x7", 0x10008f87, 0x400044, nil, func(r *unix.PtraceRegs) bool { return r.Regs[7] == 0x401234 }, 0x400048},
		{"adrp x8", 0xb0091a28, 0x400048, nil, func(r *unix.PtraceRegs) bool { return r.Regs[8] == 0x12745000 }, 0x40004c},
		{"ldr x9, literal", 0x58003da9, 0x40004c, nil, func(r *unix.PtraceRegs) bool { return r.Regs[9] == 0x80000000_fffffffe }, 0x400050},
		{"ldr w10, literal", 0x18003d8a, 0x400050, nil, func(r *unix.PtraceRegs) bool { return r.Regs[10] == 0xfffffffe }, 0x400054},
		{"ldrsw x11, literal", 0x98003d6b, 0x400054, nil, func(r *unix.PtraceRegs) bool { return r.Regs[11] == 0xffffffff_fffffffe }, 0x400058},
		{"prfm literal", 0xd8003d40, 0x400058, nil, nil, 0x40005c},
		{"br x12", 0xd61f0180, 0x40005c, func(r *unix.PtraceRegs) { r.Regs[12] = 0x123450 }, nil, 0x123450},
		{"blr x13", 0xd63f01a0, 0x400060, func(r *unix.PtraceRegs) { r.Regs[13] = 0x123450 }, func(r *unix.PtraceRegs) bool { return r.Regs[30] == 0x400064 && r.Pstate>>10&3 == 0b10 }, 0x123450},
		{"ret", 0xd65f03c0, 0x400064, func(r *unix.PtraceRegs) { r.Regs[30] = 0x4000 }, nil, 0x4000},
		{"ret x14", 0xd65f01c0, 0x400068, func(r *unix.PtraceRegs) { r.Regs[14] = 0x5000 }, nil, 0x5000},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in, err := Analyze(word(tc.w), tc.addr)
			if err != nil {
				t.Fatal(err)
			}
			if in.Kind != Emulate || !in.RegistersOnly() && in.arch.emu != emuLDRLit {
				t.Fatalf("%v: kind %v, registers only %v", in, in.Kind, in.RegistersOnly())
			}
			mem := newFakeMem()
			mem.putU64(lit, 0x80000000_fffffffe)
			r := unix.PtraceRegs{Sp: 0x7000, Pc: tc.addr}
			if tc.setup != nil {
				tc.setup(&r)
			}
			if err := in.Emulate(&r, mem); err != nil {
				t.Fatal(err)
			}
			if r.Pc != tc.pc {
				t.Errorf("%v: pc %#x, want %#x", in, r.Pc, tc.pc)
			}
			if tc.check != nil && !tc.check(&r) {
				t.Errorf("%v: registers %+v", in, r)
			}
		})
	}
}

func TestArm64EmulateStp(t *testing.T) {
	in, err := Analyze(word(0xa9be7bfd), 0x40000c) // stp x29, x30, [sp, #-32]!
	if err != nil || in.Kind != Emulate || in.RegistersOnly() {
		t.Fatalf("%v, %v", in, err)
	}
	mem := newFakeMem()
	mem.mapRange(0x7000-32, 32)
	r := unix.PtraceRegs{Sp: 0x7000}
	r.Regs[29], r.Regs[30] = 0x29, 0x30
	if err := in.Emulate(&r, mem); err != nil {
		t.Fatal(err)
	}
	if r.Sp != 0x7000-32 || r.Pc != 0x400010 || mem.u64(t, 0x7000-32) != 0x29 || mem.u64(t, 0x7000-24) != 0x30 {
		t.Errorf("sp %#x pc %#x, [sp] %#x [sp+8] %#x", r.Sp, r.Pc, mem.u64(t, 0x7000-32), mem.u64(t, 0x7000-24))
	}
	// An unmapped stack: the error, and the registers as they were.
	r = unix.PtraceRegs{Sp: 0x9000}
	var me *MemoryError
	if err := in.Emulate(&r, newFakeMem()); !errors.As(err, &me) || r.Sp != 0x9000 {
		t.Errorf("unmapped: %v, sp %#x", err, r.Sp)
	}
}

func TestArm64Refused(t *testing.T) {
	for _, w := range []uint32{
		0xd4000001, // svc #0
		0xd4200000, // brk #0
		0xc85f7c20, // ldxr x0, [x1]
		0xc8027c20, // stxr w2, x0, [x1]
		0xd50342df, // msr daifset, #2
		0xd69f03e0, // eret
		0x9c000000, // ldr q0, literal
	} {
		var ue *UnsupportedError
		if in, err := Analyze(word(w), 0x400000); !errors.As(err, &ue) {
			t.Errorf("%#08x: %v, %v: want refused", w, in, err)
		}
	}
}

func TestArm64OutOfLine(t *testing.T) {
	const addr, slot = 0x400000, 0x500000
	for _, w := range []uint32{
		0xd503233f, // paciasp
		0xc8dffc20, // ldar x0, [x1]
		0xc8a07c41, // cas x0, x1, [x2]
		0xf94007e0, // ldr x0, [sp, #8]
		0xd53bd040, // mrs x0, tpidr_el0
	} {
		in, err := Analyze(word(w), addr)
		if err != nil || in.Kind != Step || !in.CanBoost() {
			t.Fatalf("%#08x: %v, %v", w, in, err)
		}
		code, err := in.XOLBoosted(slot)
		d := int64(addr+4) - int64(slot+4)
		back := 0x14000000 | uint32(d/4)&0x3ffffff
		if err != nil || binary.LittleEndian.Uint32(code) != w || binary.LittleEndian.Uint32(code[4:]) != back {
			t.Errorf("%v: boosted % x, %v", in, code, err)
		}
		r := unix.PtraceRegs{Pc: slot + 4}
		if err := in.Fixup(&r, nil, slot); err != nil || r.Pc != addr+4 {
			t.Errorf("%v: fixup pc %#x, %v", in, r.Pc, err)
		}
		r = unix.PtraceRegs{Pc: slot + 8}
		var fe *FixupError
		if err := in.Fixup(&r, nil, slot); !errors.As(err, &fe) {
			t.Errorf("%v: fixup at %#x: %v, want a FixupError", in, r.Pc, err)
		}
		var oe *OutOfRangeError
		if _, err := in.XOLBoosted(addr + 200<<20); !errors.As(err, &oe) {
			t.Errorf("%v: a slot 200 MiB away: %v", in, err)
		}
	}
	// The authenticated branches set pc themselves; blraa's link is fixed.
	in, err := Analyze(word(0xd73f0822), addr) // blraa x1, x2
	if err != nil || in.CanBoost() {
		t.Fatalf("blraa: %v, %v", in, err)
	}
	r := unix.PtraceRegs{Pc: 0x123450}
	r.Regs[30] = slot + 4
	if err := in.Fixup(&r, nil, slot); err != nil || r.Pc != 0x123450 || r.Regs[30] != addr+4 {
		t.Errorf("blraa fixup: pc %#x x30 %#x, %v", r.Pc, r.Regs[30], err)
	}
	for _, w := range []uint32{0xd65f0bff, 0xd61f087f} { // retaa, braaz x3
		in, err := Analyze(word(w), addr)
		r := unix.PtraceRegs{Pc: 0x123450}
		if err != nil || in.CanBoost() || in.Fixup(&r, nil, slot) != nil || r.Pc != 0x123450 {
			t.Errorf("%#08x: %v, %v, pc %#x", w, in, err, r.Pc)
		}
	}
	// A pc-relative instruction never runs out of line.
	in, _ = Analyze(word(0x10008f87), addr) // adr x7
	if _, err := in.XOL(slot); err == nil {
		t.Errorf("adr ran out of line")
	}
}

func TestArm64GoStackCheckEnd(t *testing.T) {
	var code []byte
	for _, w := range []uint32{0xf9400b90, 0xeb3063ff, 0x54000129, 0xf81e0ffe} { // ldr x16, [x28, #16]; cmp sp, x16; b.ls; str x30, [sp, #-32]!
		code = binary.LittleEndian.AppendUint32(code, w)
	}
	if got := GoStackCheckEnd(code); got != 12 {
		t.Errorf("GoStackCheckEnd = %d, want 12", got)
	}
	if got := GoStackCheckEnd(code[4:]); got != 0 {
		t.Errorf("without the load: %d, want 0", got)
	}
}

func TestArm64SweepBranches(t *testing.T) {
	var code []byte
	for _, w := range []uint32{0xd503201f, 0x14000039, 0x97ffffb8, 0x540000e0, 0xd65f03c0} {
		code = binary.LittleEndian.AppendUint32(code, w)
	}
	got := SweepBranches(code, 0x400018, nil)
	want := []Branch{{0x40001c, 0x400100}, {0x400020, 0x3fff00}, {0x400024, 0x400040}}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("branch %d: %v, want %v", i, got[i], want[i])
		}
	}
}
