package singlestep

import (
	"errors"
	"testing"

	"golang.org/x/sys/unix"
)

const (
	codeAddr  = 0x401000
	stackTop  = 0x7ffc0000
	stackSize = 0x1000
)

// analyzeEmulate analyses code placed at codeAddr and insists on Emulate.
func analyzeEmulate(t *testing.T, code string) *Insn {
	t.Helper()
	in, err := Analyze(hx(t, code), codeAddr)
	if err != nil {
		t.Fatalf("Analyze(%s): %v", code, err)
	}
	if in.Kind != Emulate {
		t.Fatalf("Analyze(%s): kind %v, want emulate", code, in.Kind)
	}
	return in
}

func stack() *fakeMem {
	m := newFakeMem()
	m.mapRange(stackTop-stackSize, stackSize)
	return m
}

func TestEmulateStack(t *testing.T) {
	tests := []struct {
		name  string
		code  string
		setup func(r *unix.PtraceRegs, m *fakeMem)
		check func(t *testing.T, r *unix.PtraceRegs, m *fakeMem)
	}{
		{
			name:  "push rbp",
			code:  "55",
			setup: func(r *unix.PtraceRegs, m *fakeMem) { r.Rbp = 0x1122334455667788 },
			check: func(t *testing.T, r *unix.PtraceRegs, m *fakeMem) {
				eq(t, "rsp", r.Rsp, stackTop-0x108)
				eq(t, "stack", m.u64(t, stackTop-0x108), 0x1122334455667788)
				eq(t, "rip", r.Rip, codeAddr+1)
			},
		},
		{
			name:  "push r12",
			code:  "41 54",
			setup: func(r *unix.PtraceRegs, m *fakeMem) { r.R12 = 0xabc },
			check: func(t *testing.T, r *unix.PtraceRegs, m *fakeMem) {
				eq(t, "rsp", r.Rsp, stackTop-0x108)
				eq(t, "stack", m.u64(t, stackTop-0x108), 0xabc)
				eq(t, "rip", r.Rip, codeAddr+2)
			},
		},
		{
			name: "push rsp pushes the old value",
			code: "54",
			check: func(t *testing.T, r *unix.PtraceRegs, m *fakeMem) {
				eq(t, "stack", m.u64(t, stackTop-0x108), stackTop-0x100)
			},
		},
		{
			name:  "pop rbp",
			code:  "5d",
			setup: func(r *unix.PtraceRegs, m *fakeMem) { m.putU64(stackTop-0x100, 0xfeedface) },
			check: func(t *testing.T, r *unix.PtraceRegs, m *fakeMem) {
				eq(t, "rbp", r.Rbp, 0xfeedface)
				eq(t, "rsp", r.Rsp, stackTop-0xf8)
				eq(t, "rip", r.Rip, codeAddr+1)
			},
		},
		{
			name:  "pop r15",
			code:  "41 5f",
			setup: func(r *unix.PtraceRegs, m *fakeMem) { m.putU64(stackTop-0x100, 42) },
			check: func(t *testing.T, r *unix.PtraceRegs, m *fakeMem) {
				eq(t, "r15", r.R15, 42)
				eq(t, "rsp", r.Rsp, stackTop-0xf8)
				eq(t, "rip", r.Rip, codeAddr+2)
			},
		},
		{
			name:  "pop rsp takes the popped value",
			code:  "5c",
			setup: func(r *unix.PtraceRegs, m *fakeMem) { m.putU64(stackTop-0x100, stackTop-0x800) },
			check: func(t *testing.T, r *unix.PtraceRegs, m *fakeMem) {
				eq(t, "rsp", r.Rsp, stackTop-0x800)
			},
		},
		{
			name: "call rel32",
			code: "e8 fb 0f 00 00", // call 0x402000
			check: func(t *testing.T, r *unix.PtraceRegs, m *fakeMem) {
				eq(t, "rip", r.Rip, 0x402000)
				eq(t, "rsp", r.Rsp, stackTop-0x108)
				eq(t, "return address", m.u64(t, stackTop-0x108), codeAddr+5)
			},
		},
		{
			name: "call rel32 backwards",
			code: "e8 f0 ff ff ff", // call codeAddr+5-16
			check: func(t *testing.T, r *unix.PtraceRegs, m *fakeMem) {
				eq(t, "rip", r.Rip, codeAddr+5-16)
				eq(t, "return address", m.u64(t, stackTop-0x108), codeAddr+5)
			},
		},
		{
			name:  "ret",
			code:  "c3",
			setup: func(r *unix.PtraceRegs, m *fakeMem) { m.putU64(stackTop-0x100, 0x401234) },
			check: func(t *testing.T, r *unix.PtraceRegs, m *fakeMem) {
				eq(t, "rip", r.Rip, 0x401234)
				eq(t, "rsp", r.Rsp, stackTop-0xf8)
			},
		},
		{
			name:  "bnd ret",
			code:  "f2 c3",
			setup: func(r *unix.PtraceRegs, m *fakeMem) { m.putU64(stackTop-0x100, 0x401234) },
			check: func(t *testing.T, r *unix.PtraceRegs, m *fakeMem) {
				eq(t, "rip", r.Rip, 0x401234)
				eq(t, "rsp", r.Rsp, stackTop-0xf8)
			},
		},
		{
			name:  "ret imm16",
			code:  "c2 10 00",
			setup: func(r *unix.PtraceRegs, m *fakeMem) { m.putU64(stackTop-0x100, 0x401234) },
			check: func(t *testing.T, r *unix.PtraceRegs, m *fakeMem) {
				eq(t, "rip", r.Rip, 0x401234)
				eq(t, "rsp", r.Rsp, stackTop-0x100+8+0x10)
			},
		},
		{
			name:  "ret imm16 large",
			code:  "c2 00 80", // pops 0x8000 bytes: imm16 is unsigned
			setup: func(r *unix.PtraceRegs, m *fakeMem) { m.putU64(stackTop-0x100, 0x401234) },
			check: func(t *testing.T, r *unix.PtraceRegs, m *fakeMem) {
				eq(t, "rsp", r.Rsp, stackTop-0x100+8+0x8000)
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := analyzeEmulate(t, tt.code)
			m := stack()
			regs := unix.PtraceRegs{Rip: codeAddr + 1, Rsp: stackTop - 0x100, Rax: 7, Rcx: 8, Eflags: 0x202}
			if tt.setup != nil {
				tt.setup(&regs, m)
			}
			before := regs
			if err := in.Emulate(&regs, m); err != nil {
				t.Fatalf("Emulate: %v", err)
			}
			tt.check(t, &regs, m)
			if regs.Rax != before.Rax || regs.Rcx != before.Rcx || regs.Eflags != before.Eflags {
				t.Errorf("unrelated registers changed: %+v -> %+v", before, regs)
			}
		})
	}
}

func eq(t *testing.T, what string, got, want uint64) {
	t.Helper()
	if got != want {
		t.Errorf("%s = %#x, want %#x", what, got, want)
	}
}

func TestEmulateMovAndNop(t *testing.T) {
	tests := []struct {
		code     string
		rbp, rsp uint64 // expected
	}{
		{"48 89 e5", 0x2000, 0x2000}, // mov %rsp,%rbp
		{"48 8b ec", 0x2000, 0x2000}, // mov %rsp,%rbp, other encoding
		{"48 89 ec", 0x3000, 0x3000}, // mov %rbp,%rsp
		{"48 8b e5", 0x3000, 0x3000}, // mov %rbp,%rsp, other encoding
		{"90", 0x3000, 0x2000},
		{"66 90", 0x3000, 0x2000},
		{"0f 1f 44 00 00", 0x3000, 0x2000}, // the fentry nop of -mnop-mcount
		{"66 2e 0f 1f 84 00 00 00 00 00", 0x3000, 0x2000},
		{"f3 0f 1e fa", 0x3000, 0x2000},
	}
	for _, tt := range tests {
		t.Run(tt.code, func(t *testing.T) {
			in := analyzeEmulate(t, tt.code)
			regs := unix.PtraceRegs{Rsp: 0x2000, Rbp: 0x3000, Eflags: 0x246}
			want := regs
			want.Rbp, want.Rsp, want.Rip = tt.rbp, tt.rsp, codeAddr+uint64(in.Len)
			if err := in.Emulate(&regs, nil); err != nil {
				t.Fatal(err)
			}
			if regs != want {
				t.Errorf("regs = %+v, want %+v", regs, want)
			}
		})
	}
}

func TestEmulateStackAdjust(t *testing.T) {
	// Expected flags were read from the CPU (ADDQ/SUBQ then PUSHFQ).
	tests := []struct {
		name    string
		code    string
		rsp     uint64
		wantRSP uint64
		want    uint64 // arithmetic flags
	}{
		{"sub to zero", "48 83 ec 10", 0x10, 0, flagZF | flagPF},
		{"sub with half borrow", "48 83 ec 08", 0x1004, 0xffc, flagAF | flagPF},
		{"sub overflow", "48 83 ec 01", 0x8000000000000000, 0x7fffffffffffffff, flagOF | flagAF | flagPF},
		{"sub borrow", "48 81 ec 00 01 00 00", 0x10, 0xffffffffffffff10, flagCF | flagSF},
		{"sub typical", "48 81 ec 18 01 00 00", 0x7ffc12345670, 0x7ffc12345558, flagAF},
		{"add carry to zero", "48 83 c4 01", 0xffffffffffffffff, 0, flagCF | flagZF | flagAF | flagPF},
		{"add overflow", "48 83 c4 01", 0x7fffffffffffffff, 0x8000000000000000, flagOF | flagSF | flagAF | flagPF},
		{"add typical", "48 83 c4 10", 0x7ffc12345670, 0x7ffc12345680, 0},
		{"add zero", "48 83 c4 00", 0x7ffc12345670, 0x7ffc12345670, 0},
		{"sub zero", "48 83 ec 00", 0x7ffc12345671, 0x7ffc12345671, flagPF},
		{"add negative imm32", "48 81 c4 f0 ff ff ff", 0x7ffc12345680, 0x7ffc12345670, flagCF},
		{"sub negative imm8", "48 83 ec f0", 0x7ffc12345670, 0x7ffc12345680, flagCF},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := analyzeEmulate(t, tt.code)
			const keep = 0x202 | flagTF // IF, reserved bit 1 and TF survive
			regs := unix.PtraceRegs{Rsp: tt.rsp, Eflags: keep | arithFlags}
			if err := in.Emulate(&regs, nil); err != nil {
				t.Fatal(err)
			}
			if regs.Rsp != tt.wantRSP {
				t.Errorf("rsp = %#x, want %#x", regs.Rsp, tt.wantRSP)
			}
			if got := regs.Eflags &^ keep; got != tt.want {
				t.Errorf("flags = %s, want %s", flagNames(got), flagNames(tt.want))
			}
			if regs.Eflags&keep != keep {
				t.Errorf("eflags %#x lost non-arithmetic bits", regs.Eflags)
			}
			if regs.Rip != codeAddr+uint64(in.Len) {
				t.Errorf("rip = %#x", regs.Rip)
			}
		})
	}
}

func flagNames(f uint64) string {
	s := ""
	for _, n := range []struct {
		bit  uint64
		name string
	}{{flagCF, "CF"}, {flagPF, "PF"}, {flagAF, "AF"}, {flagZF, "ZF"}, {flagSF, "SF"}, {flagOF, "OF"}} {
		if f&n.bit != 0 {
			s += n.name + " "
		} else {
			s += "-- "
		}
	}
	return s
}

func TestEmulateJumps(t *testing.T) {
	tests := []struct {
		code string
		want uint64
	}{
		{"eb 10", codeAddr + 2 + 0x10},
		{"eb fe", codeAddr},           // jmp to itself
		{"eb 80", codeAddr + 2 - 128}, // most negative rel8
		{"e9 00 01 00 00", codeAddr + 5 + 0x100},
		{"e9 fb ef ff ff", codeAddr + 5 - 0x1005},
		{"f2 e9 00 01 00 00", codeAddr + 6 + 0x100}, // bnd jmp
	}
	for _, tt := range tests {
		t.Run(tt.code, func(t *testing.T) {
			in := analyzeEmulate(t, tt.code)
			regs := unix.PtraceRegs{Rsp: 0x2000, Eflags: 0x246}
			if err := in.Emulate(&regs, nil); err != nil {
				t.Fatal(err)
			}
			if regs.Rip != tt.want || regs.Rsp != 0x2000 {
				t.Errorf("rip = %#x, want %#x", regs.Rip, tt.want)
			}
		})
	}
}

func TestEmulateJcc(t *testing.T) {
	// For each condition code: flag sets under which it is taken and not.
	tests := []struct {
		cc       byte
		name     string
		taken    []uint64
		notTaken []uint64
	}{
		{0x0, "jo", []uint64{flagOF}, []uint64{0, arithFlags &^ flagOF}},
		{0x1, "jno", []uint64{0, arithFlags &^ flagOF}, []uint64{flagOF}},
		{0x2, "jb", []uint64{flagCF}, []uint64{0, arithFlags &^ flagCF}},
		{0x3, "jae", []uint64{0, flagZF}, []uint64{flagCF}},
		{0x4, "je", []uint64{flagZF}, []uint64{0, arithFlags &^ flagZF}},
		{0x5, "jne", []uint64{0, flagCF | flagSF}, []uint64{flagZF}},
		{0x6, "jbe", []uint64{flagCF, flagZF, flagCF | flagZF}, []uint64{0, flagSF | flagOF}},
		{0x7, "ja", []uint64{0, flagSF}, []uint64{flagCF, flagZF}},
		{0x8, "js", []uint64{flagSF}, []uint64{0, arithFlags &^ flagSF}},
		{0x9, "jns", []uint64{0}, []uint64{flagSF}},
		{0xa, "jp", []uint64{flagPF}, []uint64{0, arithFlags &^ flagPF}},
		{0xb, "jnp", []uint64{0}, []uint64{flagPF}},
		{0xc, "jl", []uint64{flagSF, flagOF}, []uint64{0, flagSF | flagOF}},
		{0xd, "jge", []uint64{0, flagSF | flagOF}, []uint64{flagSF, flagOF}},
		{0xe, "jle", []uint64{flagZF, flagSF, flagOF, flagZF | flagSF | flagOF}, []uint64{0, flagSF | flagOF}},
		{0xf, "jg", []uint64{0, flagSF | flagOF}, []uint64{flagZF, flagSF, flagOF, flagZF | flagSF | flagOF}},
	}
	for _, tt := range tests {
		short := []byte{0x70 | tt.cc, 0x20}                        // jcc rel8 +0x20
		near := []byte{0x0f, 0x80 | tt.cc, 0x00, 0xf0, 0xff, 0xff} // jcc rel32 -0x1000
		for _, form := range []struct {
			code   []byte
			target uint64
		}{
			{short, codeAddr + 2 + 0x20},
			{near, codeAddr + 6 - 0x1000},
		} {
			in, err := Analyze(form.code, codeAddr)
			if err != nil || in.Kind != Emulate || in.Mnemonic != tt.name {
				t.Fatalf("% x: %v, %v; want emulated %s", form.code, in, err, tt.name)
			}
			run := func(flags uint64, want uint64) {
				regs := unix.PtraceRegs{Eflags: 0x202 | flags}
				if err := in.Emulate(&regs, nil); err != nil {
					t.Fatal(err)
				}
				if regs.Rip != want {
					t.Errorf("%s (% x) with %s: rip = %#x, want %#x", tt.name, form.code, flagNames(flags), regs.Rip, want)
				}
			}
			for _, f := range tt.taken {
				run(f, form.target)
			}
			for _, f := range tt.notTaken {
				run(f, codeAddr+uint64(len(form.code)))
			}
		}
	}
}

func TestEmulateLoop(t *testing.T) {
	tests := []struct {
		code    string
		rcx     uint64
		zf      bool
		wantRCX uint64
		taken   bool
	}{
		{"e2 f0", 5, false, 4, true},
		{"e2 f0", 1, false, 0, false},
		{"e2 f0", 0, false, 0xffffffffffffffff, true},
		{"e1 f0", 5, true, 4, true}, // loope
		{"e1 f0", 5, false, 4, false},
		{"e0 f0", 5, false, 4, true}, // loopne
		{"e0 f0", 5, true, 4, false},
		{"e3 f0", 0, false, 0, true}, // jrcxz
		{"e3 f0", 3, false, 3, false},
	}
	for _, tt := range tests {
		in := analyzeEmulate(t, tt.code)
		regs := unix.PtraceRegs{Rcx: tt.rcx, Eflags: 0x202}
		if tt.zf {
			regs.Eflags |= flagZF
		}
		flags := regs.Eflags
		if err := in.Emulate(&regs, nil); err != nil {
			t.Fatal(err)
		}
		want := uint64(codeAddr + 2)
		if tt.taken {
			want -= 0x10
		}
		if regs.Rip != want || regs.Rcx != tt.wantRCX || regs.Eflags != flags {
			t.Errorf("%s rcx=%d zf=%v: rip=%#x rcx=%#x flags=%#x, want rip=%#x rcx=%#x flags unchanged",
				tt.code, tt.rcx, tt.zf, regs.Rip, regs.Rcx, regs.Eflags, want, tt.wantRCX)
		}
	}
}

func TestEmulateMemoryFailureLeavesRegs(t *testing.T) {
	for _, code := range []string{"55", "5d", "e8 00 00 00 00", "c3"} {
		in := analyzeEmulate(t, code)
		m := newFakeMem() // nothing mapped
		regs := unix.PtraceRegs{Rip: codeAddr + 1, Rsp: stackTop - 0x100, Rbp: 9}
		before := regs
		err := in.Emulate(&regs, m)
		var me *MemoryError
		if !errors.As(err, &me) || me.Addr < stackTop-0x108 || me.Addr > stackTop-0x100 {
			t.Errorf("%s: error = %v, want *MemoryError at the stack", code, err)
		}
		if regs != before {
			t.Errorf("%s: regs changed on failure: %+v", code, regs)
		}
	}
	// A read-only stack: writes fail, nothing changes.
	m := stack()
	m.readOnly = true
	regs := unix.PtraceRegs{Rsp: stackTop - 0x100}
	if err := analyzeEmulate(t, "55").Emulate(&regs, m); err == nil || regs.Rsp != stackTop-0x100 {
		t.Errorf("push on read-only stack: err=%v rsp=%#x", err, regs.Rsp)
	}
	// nil memory is an error, not a panic.
	if err := analyzeEmulate(t, "55").Emulate(&regs, nil); !errors.As(err, new(*MemoryError)) {
		t.Errorf("push with nil memory: %v", err)
	}
}

func TestEmulateRefusesStepKind(t *testing.T) {
	in, err := Analyze(hx(t, "48 8b 05 00 10 00 00"), codeAddr)
	if err != nil {
		t.Fatal(err)
	}
	regs := unix.PtraceRegs{Rip: 5}
	if err := in.Emulate(&regs, stack()); !errors.As(err, new(*UnsupportedError)) || regs.Rip != 5 {
		t.Errorf("Emulate on a Step instruction: %v, rip %#x", err, regs.Rip)
	}
}
