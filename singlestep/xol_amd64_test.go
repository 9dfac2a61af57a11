package singlestep

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"

	"golang.org/x/arch/x86/x86asm"
	"golang.org/x/sys/unix"
)

const (
	modAddr  = 0x555555554000 + 0x1139 // a PIE function
	slotNear = 0x555555700000          // XOL page placed near the module
)

// ripTarget returns the absolute address an instruction at addr reaches
// through its rip-relative displacement, which sits at dispOff.
func ripTarget(code []byte, addr uint64, dispOff int) uint64 {
	disp := int32(binary.LittleEndian.Uint32(code[dispOff:]))
	return addr + uint64(len(code)) + uint64(int64(disp))
}

func TestXOLRipRelative(t *testing.T) {
	tests := []struct {
		name    string
		code    string
		dispOff int  // where the disp32 is, to check the parse independently
		vex     bool // x86asm cannot see rip-relative VEX operands
	}{
		{"mov rax,[rip+d]", "48 8b 05 10 20 00 00", 3, false},
		{"jmp *[rip+d]", "ff 25 e2 2e 00 00", 2, false},
		{"call *[rip+d]", "ff 15 e2 2e 00 00", 2, false},
		{"notrack call *[rip+d]", "3e ff 15 e2 2e 00 00", 3, false},
		{"lea rdi,[rip+d] negative", "48 8d 3d 00 f0 ff ff", 3, false},
		{"mov dword [rip+d],imm32", "c7 05 10 20 00 00 2a 00 00 00", 2, false},
		{"mov byte [rip+d],imm8", "c6 05 10 20 00 00 01", 2, false},
		{"cmp qword [rip+d],imm8", "48 83 3d 10 20 00 00 00", 3, false},
		{"lock cmpxchg [rip+d],rcx", "f0 48 0f b1 0d 10 20 00 00", 5, false},
		{"movbe eax,[rip+d] (0f 38)", "0f 38 f0 05 10 20 00 00", 4, false},
		{"pcmpistri xmm0,[rip+d],1 (0f 3a)", "66 0f 3a 63 05 10 20 00 00 01", 5, false},
		{"movsd xmm0,[rip+d]", "f2 0f 10 05 10 20 00 00", 4, false},
		{"fld dword [rip+d]", "d9 05 10 20 00 00", 2, false},
		{"push [rip+d]", "ff 35 10 20 00 00", 2, false},
		{"r13 base is still rip", "4c 8b 2d 10 20 00 00", 3, false}, // mov r13,[rip+d]; REX.B does not turn rm=101 into r13
		{"vmovdqu ymm0,[rip+d] (VEX2)", "c5 fe 6f 05 10 20 00 00", 4, true},
		{"vpbroadcastd ymm0,[rip+d] (VEX3)", "c4 e2 7d 58 05 10 20 00 00", 5, true},
		{"vinsertf128 ymm1,ymm0,[rip+d],1 (VEX3 imm)", "c4 e3 7d 18 0d 10 20 00 00 01", 5, true},
		{"vmovdqu64 zmm0,[rip+d] (EVEX)", "62 f1 fe 48 6f 05 10 20 00 00", 6, true},
	}
	slots := []uint64{slotNear, modAddr - 0x10000000, modAddr + 0x7fff0000}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code := hx(t, tt.code)
			in, err := Analyze(append(code, 0xcc), modAddr)
			if err != nil {
				t.Fatalf("Analyze: %v", err)
			}
			if in.Len != len(code) || in.arch.ripDispOff != tt.dispOff {
				t.Fatalf("len %d, disp at %d; want %d, %d", in.Len, in.arch.ripDispOff, len(code), tt.dispOff)
			}
			want := ripTarget(code, modAddr, tt.dispOff)
			for _, slot := range slots {
				out, err := in.XOL(slot)
				if err != nil {
					t.Fatalf("XOL(%#x): %v", slot, err)
				}
				if len(out) != len(code) {
					t.Fatalf("XOL length %d, want %d", len(out), len(code))
				}
				// Only the displacement may change.
				for i := range out {
					if (i < tt.dispOff || i >= tt.dispOff+4) && out[i] != code[i] {
						t.Fatalf("byte %d changed: % x -> % x", i, code, out)
					}
				}
				if got := ripTarget(out, slot, tt.dispOff); got != want {
					t.Errorf("slot %#x: target %#x, want %#x", slot, got, want)
				}
				if tt.vex {
					continue
				}
				// And the decoder agrees the copy reaches the same place.
				inst, err := x86asm.Decode(out, 64)
				if err != nil {
					t.Fatalf("decoding the copy: %v", err)
				}
				var mem x86asm.Mem
				for _, a := range inst.Args {
					if m, ok := a.(x86asm.Mem); ok {
						mem = m
					}
				}
				// x86asm zero-extends disp32; the CPU sign-extends it.
				reach := slot + uint64(inst.Len) + uint64(int64(int32(mem.Disp)))
				if mem.Base != x86asm.RIP || reach != want {
					t.Errorf("slot %#x: decoded copy %v reaches %#x, want %#x", slot, inst, reach, want)
				}
			}
		})
	}
}

func TestXOLUnchanged(t *testing.T) {
	for _, code := range []string{"48 8b 45 f8", "89 7d fc", "ff d0", "c9", "0f 1f 44 00 00", "55", "c3", "c5 f8 77", "48 a1 88 77 66 55 44 33 22 11"} {
		b := hx(t, code)
		in, err := Analyze(b, modAddr)
		if err != nil {
			t.Fatal(err)
		}
		out, err := in.XOL(0x10000) // far away: no displacement to fix
		if err != nil || !bytes.Equal(out, b) {
			t.Errorf("%s: XOL = % x, %v; want the original bytes", code, out, err)
		}
	}
}

func TestXOLOutOfRange(t *testing.T) {
	in, err := Analyze(hx(t, "48 8b 05 10 20 00 00"), modAddr)
	if err != nil {
		t.Fatal(err)
	}
	target := ripTarget(in.Bytes, modAddr, 3)
	for _, slot := range []uint64{modAddr + 0x90000000, modAddr - 0x90000000, 0x7fff00000000} {
		_, err := in.XOL(slot)
		var oe *OutOfRangeError
		if !errors.As(err, &oe) || oe.Target != target || oe.Slot != slot || oe.Addr != modAddr {
			t.Errorf("slot %#x: error %v, want *OutOfRangeError for target %#x", slot, err, target)
		}
	}
	// The limits of int32, exactly.
	if _, err := in.XOL(target - 0x7fffffff - uint64(in.Len)); err != nil {
		t.Errorf("displacement +0x7fffffff: %v", err)
	}
	if _, err := in.XOL(target - 0x80000000 - uint64(in.Len)); err == nil {
		t.Errorf("displacement +0x80000000 accepted")
	}
	if _, err := in.XOL(target + 0x80000000 - uint64(in.Len)); err != nil {
		t.Errorf("displacement -0x80000000: %v", err)
	}
}

func TestXOLRefusesRelativeBranches(t *testing.T) {
	for _, code := range []string{"eb 10", "e9 00 01 00 00", "74 10", "0f 84 00 01 00 00", "e8 00 00 00 00", "e2 fe"} {
		in, err := Analyze(hx(t, code), modAddr)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := in.XOL(slotNear); !errors.As(err, new(*UnsupportedError)) {
			t.Errorf("%s: XOL error %v, want *UnsupportedError", code, err)
		}
		if in.CanBoost() {
			t.Errorf("%s: CanBoost", code)
		}
	}
}

func TestFixup(t *testing.T) {
	const slot = slotNear + 2*SlotSize
	const rsp = stackTop - 0x100
	tests := []struct {
		name    string
		code    string
		regs    unix.PtraceRegs // after the step
		stack   uint64          // value at [rsp] after the step
		wantRip uint64
		wantTop uint64 // value at [rsp] after fixup
		wantErr bool
	}{
		{name: "fall through", code: "48 8b 05 10 20 00 00", regs: unix.PtraceRegs{Rip: slot + 7, Rsp: rsp}, wantRip: modAddr + 7},
		{name: "fall through, emulatable push", code: "55", regs: unix.PtraceRegs{Rip: slot + 1, Rsp: rsp}, wantRip: modAddr + 1},
		{name: "indirect call", code: "ff 15 e2 2e 00 00", regs: unix.PtraceRegs{Rip: 0x7f0000001000, Rsp: rsp}, stack: slot + 6,
			wantRip: 0x7f0000001000, wantTop: modAddr + 6},
		{name: "indirect call via register", code: "ff d0", regs: unix.PtraceRegs{Rip: 0x401000, Rsp: rsp}, stack: slot + 2,
			wantRip: 0x401000, wantTop: modAddr + 2},
		{name: "indirect jmp", code: "ff e0", regs: unix.PtraceRegs{Rip: 0x401000, Rsp: rsp}, wantRip: 0x401000},
		{name: "indirect jmp rip-relative", code: "ff 25 e2 2e 00 00", regs: unix.PtraceRegs{Rip: 0x7f0000002000, Rsp: rsp}, wantRip: 0x7f0000002000},
		{name: "stepped ret", code: "c3", regs: unix.PtraceRegs{Rip: 0x401234, Rsp: rsp}, wantRip: 0x401234},
		{name: "pushf clears TF in the pushed copy", code: "9c", regs: unix.PtraceRegs{Rip: slot + 1, Rsp: rsp}, stack: 0x346,
			wantRip: modAddr + 1, wantTop: 0x246},
		{name: "pushf keeps other flags", code: "9c", regs: unix.PtraceRegs{Rip: slot + 1, Rsp: rsp}, stack: 0x202,
			wantRip: modAddr + 1, wantTop: 0x202},
		{name: "rep stos unfinished restarts at the original", code: "f3 48 ab", regs: unix.PtraceRegs{Rip: slot, Rsp: rsp, Rcx: 5}, wantRip: modAddr},
		{name: "rep stos finished", code: "f3 48 ab", regs: unix.PtraceRegs{Rip: slot + 3, Rsp: rsp}, wantRip: modAddr + 3},
		{name: "unexpected rip", code: "48 8b 05 10 20 00 00", regs: unix.PtraceRegs{Rip: slot + 3, Rsp: rsp}, wantErr: true},
		{name: "not rep: rip at slot is unexpected", code: "48 ab", regs: unix.PtraceRegs{Rip: slot, Rsp: rsp}, wantErr: true},
		{name: "call without its return address", code: "ff d0", regs: unix.PtraceRegs{Rip: 0x401000, Rsp: rsp}, stack: 0x1234, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in, err := Analyze(hx(t, tt.code), modAddr)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := in.XOL(slot); err != nil {
				t.Fatal(err)
			}
			m := stack()
			m.putU64(rsp, tt.stack)
			regs := tt.regs
			err = in.Fixup(&regs, m, slot)
			if tt.wantErr {
				if !errors.As(err, new(*FixupError)) {
					t.Fatalf("Fixup = %v, want *FixupError", err)
				}
				if regs != tt.regs {
					t.Errorf("regs changed on error")
				}
				return
			}
			if err != nil {
				t.Fatalf("Fixup: %v", err)
			}
			if regs.Rip != tt.wantRip {
				t.Errorf("rip = %#x, want %#x", regs.Rip, tt.wantRip)
			}
			if got := m.u64(t, rsp); got != tt.wantTop {
				t.Errorf("[rsp] = %#x, want %#x", got, tt.wantTop)
			}
			want := tt.regs
			want.Rip = regs.Rip
			if regs != want {
				t.Errorf("registers other than rip changed: %+v", regs)
			}
		})
	}
}

func TestFixupRelativeBranch(t *testing.T) {
	in, err := Analyze(hx(t, "74 10"), modAddr)
	if err != nil {
		t.Fatal(err)
	}
	regs := unix.PtraceRegs{Rip: slotNear + 2}
	if err := in.Fixup(&regs, stack(), slotNear); !errors.As(err, new(*UnsupportedError)) {
		t.Errorf("Fixup of a jcc: %v", err)
	}
}

func TestBoost(t *testing.T) {
	tests := []struct {
		code     string
		canBoost bool
	}{
		{"48 8b 05 10 20 00 00", true},
		{"c7 05 10 20 00 00 2a 00 00 00", true},
		{"89 7d fc", true},
		{"f3 48 ab", true}, // runs to completion without the trap flag
		{"9c", true},       // no trap flag to leak without a single-step
		{"ff e0", true},    // never reaches the jmp back; harmless
		{"ff 25 e2 2e 00 00", true},
		{"ff d0", false}, // return address would point into the slot
		{"ff 15 e2 2e 00 00", false},
		{"e8 00 00 00 00", false},
		{"74 10", false},
	}
	for _, tt := range tests {
		t.Run(tt.code, func(t *testing.T) {
			in, err := Analyze(hx(t, tt.code), modAddr)
			if err != nil {
				t.Fatal(err)
			}
			if in.CanBoost() != tt.canBoost {
				t.Fatalf("CanBoost = %v, want %v", in.CanBoost(), tt.canBoost)
			}
			out, err := in.XOLBoosted(slotNear)
			if !tt.canBoost {
				if !errors.As(err, new(*UnsupportedError)) {
					t.Errorf("XOLBoosted = % x, %v; want *UnsupportedError", out, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			plain, _ := in.XOL(slotNear)
			if len(out) != in.Len+5 || len(out) > SlotSize || !bytes.Equal(out[:in.Len], plain) {
				t.Fatalf("XOLBoosted = % x, want XOL bytes % x + jmp", out, plain)
			}
			jmpAt := slotNear + uint64(in.Len)
			jmp, err := x86asm.Decode(out[in.Len:], 64)
			if err != nil || jmp.Op != x86asm.JMP || jmp.Len != 5 {
				t.Fatalf("tail % x decodes as %v, %v; want jmp rel32", out[in.Len:], jmp, err)
			}
			if got := jmpAt + 5 + uint64(int64(jmp.Args[0].(x86asm.Rel))); got != modAddr+uint64(in.Len) {
				t.Errorf("jmp back reaches %#x, want %#x", got, modAddr+uint64(in.Len))
			}
		})
	}

	in, _ := Analyze(hx(t, "89 7d fc"), modAddr)
	var oe *OutOfRangeError
	if _, err := in.XOLBoosted(modAddr + 0x90000000); !errors.As(err, &oe) || oe.Target != modAddr+3 {
		t.Errorf("far slot: %v, want *OutOfRangeError to %#x", err, modAddr+3)
	}
}
