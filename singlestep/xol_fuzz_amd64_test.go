package singlestep

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math/bits"
	"testing"

	"golang.org/x/arch/x86/x86asm"
	"golang.org/x/sys/unix"
)

// FuzzXOL analyses any bytes at a probe site and checks what the package
// promises about the result, against x86asm's decoding and a reference
// model written from the instruction set rather than from the package:
//   - Analyze never panics; it returns an Insn or a DecodeError/UnsupportedError.
//   - The out-of-line copy for a slot anywhere within ±2 GiB is the original
//     with only its rip-relative displacement changed: same length, same
//     opcode, and it reaches the same absolute address (or OutOfRangeError
//     exactly when the new displacement does not fit in 32 bits). The
//     boosted copy adds a jmp back to the next instruction.
//   - Fixup after the copy's single-step leaves the state the original would.
//   - Emulate gives what the CPU would for the instruction.
func FuzzXOL(f *testing.F) {
	for _, s := range []string{
		"55", "41 54", "5d", "48 89 e5", "48 83 ec 18", "48 81 c4 00 01 00 00", "f3 0f 1e fa", "0f 1f 44 00 00",
		"e8 00 01 00 00", "e9 f0 ff ff ff", "eb 05", "74 02", "0f 85 10 00 00 00", "e2 fe", "e3 10", "c3", "c2 08 00",
		"48 8b 05 10 20 00 00", "ff 25 e2 2e 00 00", "ff 15 e2 2e 00 00", "3e ff 15 e2 2e 00 00", "48 8d 3d 00 f0 ff ff",
		"c7 05 10 20 00 00 2a 00 00 00", "f0 48 0f b1 0d 10 20 00 00", "66 0f 3a 63 05 10 20 00 00 01",
		"c5 fe 6f 05 10 20 00 00", "62 f1 fe 48 6f 05 10 20 00 00", "ff d0", "9c", "f3 48 a5", "0f 05", "cc", "66 50",
	} {
		f.Add(hx(f, s), uint32(0), int32(0x100000), uint64(0x246), uint64(3))
	}
	f.Fuzz(func(t *testing.T, code []byte, addrLow uint32, slotDelta int32, flags, seed uint64) {
		addr := uint64(0x555555554000) + uint64(addrLow)
		in, err := Analyze(code, addr)
		if err != nil {
			var de *DecodeError
			var ue *UnsupportedError
			if !errors.As(err, &de) && !errors.As(err, &ue) {
				t.Fatalf("% x: error %T %v", code, err, err)
			}
			return
		}
		if in.Len < 1 || in.Len > 15 || in.Len > len(code) || !bytes.Equal(in.Bytes, code[:in.Len]) {
			t.Fatalf("% x: Len %d, Bytes % x", code, in.Len, in.Bytes)
		}
		orig, origErr := x86asm.Decode(in.Bytes, 64)
		decoded := origErr == nil && orig.Op != 0 && in.Mnemonic[:min(5, len(in.Mnemonic))] != "endbr"
		if decoded && orig.Len != in.Len && orig.Op != x86asm.VZEROUPPER && orig.Op != x86asm.VZEROALL {
			t.Fatalf("% x: Len %d, x86asm says %d", code, in.Len, orig.Len)
		}
		_, isRel := orig.Args[0].(x86asm.Rel)
		if decoded && isRel {
			if in.Kind != Emulate {
				t.Fatalf("% x: relative branch %v of kind %v", code, orig, in.Kind)
			}
		} else {
			checkXOL(t, in, &orig, decoded, addr+uint64(int64(slotDelta)))
		}
		if in.Kind == Emulate && decoded {
			checkEmulate(t, in, &orig, flags, seed)
		}
		if in.Kind == Step {
			var ue *UnsupportedError
			if err := in.Emulate(&unix.PtraceRegs{}, nil); !errors.As(err, &ue) {
				t.Fatalf("% x: Emulate of a Step instruction: %v", code, err)
			}
		}
	})
}

// ripReach is where a decoded instruction at addr reaches through a
// rip-relative memory operand, if it has one.
func ripReach(inst *x86asm.Inst, addr uint64) (uint64, bool) {
	for _, a := range inst.Args {
		if m, ok := a.(x86asm.Mem); ok && m.Base == x86asm.RIP {
			// x86asm zero-extends disp32; the CPU sign-extends it.
			return addr + uint64(inst.Len) + uint64(int64(int32(m.Disp))), true
		}
	}
	return 0, false
}

func checkXOL(t *testing.T, in *Insn, orig *x86asm.Inst, decoded bool, slot uint64) {
	code := in.Bytes
	out, err := in.XOL(slot)
	dispOff := in.arch.ripDispOff
	if err != nil {
		var oe *OutOfRangeError
		if !errors.As(err, &oe) || dispOff < 0 {
			t.Fatalf("% x: XOL(%#x): %v", code, slot, err)
		}
		if _, fits := rel32(slot+uint64(in.Len), ripTarget(code, in.Addr, dispOff)); fits {
			t.Fatalf("% x: XOL(%#x) out of range, but the target is reachable", code, slot)
		}
		return
	}
	if len(out) != in.Len {
		t.Fatalf("% x: XOL length %d, want %d", code, len(out), in.Len)
	}
	for i := range out {
		if (dispOff < 0 || i < dispOff || i >= dispOff+4) && out[i] != code[i] {
			t.Fatalf("% x: XOL(%#x) changed byte %d: % x", code, slot, i, out)
		}
	}
	if dispOff >= 0 && ripTarget(out, slot, dispOff) != ripTarget(code, in.Addr, dispOff) {
		t.Fatalf("% x: copy % x at %#x reaches %#x, original %#x", code, out, slot, ripTarget(out, slot, dispOff), ripTarget(code, in.Addr, dispOff))
	}
	if decoded {
		cp, err := x86asm.Decode(out, 64)
		if err != nil || cp.Op != orig.Op || cp.Len != orig.Len {
			t.Fatalf("% x: copy % x decodes to %v (len %d, %v), original %v (len %d)", code, out, cp, cp.Len, err, orig, orig.Len)
		}
		want, rip := ripReach(orig, in.Addr)
		got, _ := ripReach(&cp, slot)
		if rip && got != want {
			t.Fatalf("% x: copy % x at %#x reaches %#x, original %#x", code, out, slot, got, want)
		}
	}
	if in.CanBoost() {
		b, err := in.XOLBoosted(slot)
		if err != nil {
			return // the jmp back is out of range: checked by TestBoost
		}
		if len(b) != in.Len+5 || !bytes.Equal(b[:in.Len], out) || b[in.Len] != 0xe9 ||
			slot+uint64(in.Len)+5+uint64(int64(int32(binary.LittleEndian.Uint32(b[in.Len+1:])))) != in.Addr+uint64(in.Len) {
			t.Fatalf("% x: boosted copy % x does not jump back to %#x", code, b, in.Addr+uint64(in.Len))
		}
	}
	if decoded {
		checkFixup(t, in, orig, slot)
	}
}

// checkFixup plays the CPU's single-step of the copy at slot and checks
// that Fixup leaves the state the original would have.
func checkFixup(t *testing.T, in *Insn, orig *x86asm.Inst, slot uint64) {
	m := stack()
	next := in.Addr + uint64(in.Len)
	r := unix.PtraceRegs{Rsp: stackTop - 0x100, Rip: slot + uint64(in.Len)}
	want := r
	want.Rip = next
	switch orig.Op {
	case x86asm.CALL: // indirect: the copy pushed its own return address
		r.Rsp -= 8
		m.putU64(r.Rsp, slot+uint64(in.Len))
		r.Rip = 0x1234
		want = r
	case x86asm.JMP, x86asm.RET:
		r.Rip = 0x1234
		want = r
	case x86asm.PUSHF, x86asm.PUSHFQ:
		r.Rsp -= 8
		m.putU64(r.Rsp, 0x246|flagTF)
		want.Rsp = r.Rsp
	}
	if err := in.Fixup(&r, m, slot); err != nil {
		t.Fatalf("% x: Fixup: %v", in.Bytes, err)
	}
	if r != want {
		t.Fatalf("% x: after Fixup rip %#x rsp %#x, want %#x %#x", in.Bytes, r.Rip, r.Rsp, want.Rip, want.Rsp)
	}
	switch orig.Op {
	case x86asm.CALL:
		if got := m.u64(t, r.Rsp); got != next {
			t.Fatalf("% x: return address %#x after Fixup, want %#x", in.Bytes, got, next)
		}
	case x86asm.PUSHF, x86asm.PUSHFQ:
		if got := m.u64(t, r.Rsp); got != 0x246 {
			t.Fatalf("% x: pushed flags %#x after Fixup, want 0x246", in.Bytes, got)
		}
	}
}

// gprs are the 64-bit registers in x86asm's order, to fill and look up.
var gprs = []x86asm.Reg{x86asm.RAX, x86asm.RCX, x86asm.RDX, x86asm.RBX, x86asm.RSP, x86asm.RBP, x86asm.RSI, x86asm.RDI,
	x86asm.R8, x86asm.R9, x86asm.R10, x86asm.R11, x86asm.R12, x86asm.R13, x86asm.R14, x86asm.R15}

// checkEmulate runs Emulate and a reference model of the instruction, as
// x86asm decoded it, on the same registers and stack, and compares.
func checkEmulate(t *testing.T, in *Insn, orig *x86asm.Inst, flags, seed uint64) {
	var r unix.PtraceRegs
	for i, reg := range gprs {
		*gpr(&r, reg) = seed*uint64(2*i+1) + uint64(i)
	}
	r.Rsp = stackTop - 0x800
	r.Rcx = seed % 3 // let loop and jrcxz see 0, 1 and more
	r.Rip = in.Addr
	r.Eflags = 0x202 | flags&(arithFlags)
	m := stack()
	for a := uint64(stackTop - stackSize); a < stackTop; a += 8 {
		m.putU64(a, a*0x9e3779b97f4a7c15)
	}
	want, wantMem := r, stack()
	for k, v := range m.bytes {
		wantMem.bytes[k] = v
	}
	refEmulate(t, in, orig, &want, wantMem)
	got := r
	if err := in.Emulate(&got, m); err != nil {
		t.Fatalf("% x: Emulate: %v", in.Bytes, err)
	}
	if got != want {
		t.Fatalf("% x (%v): Emulate gives\n%+v\nthe CPU would give\n%+v", in.Bytes, orig, got, want)
	}
	for k, v := range wantMem.bytes {
		if m.bytes[k] != v {
			t.Fatalf("% x (%v): stack byte %#x is %#x, want %#x", in.Bytes, orig, k, m.bytes[k], v)
		}
	}
}

// refEmulate is what the CPU does for the instructions Analyze may emulate.
func refEmulate(t *testing.T, in *Insn, inst *x86asm.Inst, r *unix.PtraceRegs, m *fakeMem) {
	next := in.Addr + uint64(in.Len)
	r.Rip = next
	reg := func(i int) *uint64 {
		x, ok := inst.Args[i].(x86asm.Reg)
		for _, g := range gprs {
			if ok && g == x {
				return gpr(r, g)
			}
		}
		t.Fatalf("% x: %v emulated with operand %v", in.Bytes, inst, inst.Args[i])
		return nil
	}
	push := func(v uint64) { r.Rsp -= 8; m.putU64(r.Rsp, v) }
	pop := func() uint64 { v := m.u64(t, r.Rsp); r.Rsp += 8; return v }
	cf, zf, sf, of, pf := r.Eflags&flagCF != 0, r.Eflags&flagZF != 0, r.Eflags&flagSF != 0, r.Eflags&flagOF != 0, r.Eflags&flagPF != 0
	cond := map[x86asm.Op]bool{
		x86asm.JO: of, x86asm.JNO: !of, x86asm.JB: cf, x86asm.JAE: !cf, x86asm.JE: zf, x86asm.JNE: !zf,
		x86asm.JBE: cf || zf, x86asm.JA: !cf && !zf, x86asm.JS: sf, x86asm.JNS: !sf, x86asm.JP: pf, x86asm.JNP: !pf,
		x86asm.JL: sf != of, x86asm.JGE: sf == of, x86asm.JLE: zf || sf != of, x86asm.JG: !zf && sf == of,
	}
	var rel uint64
	if x, ok := inst.Args[0].(x86asm.Rel); ok {
		rel = uint64(int64(x))
	}
	switch op := inst.Op; op {
	case x86asm.NOP:
	case x86asm.PUSH:
		push(*reg(0)) // push rsp pushes the value before the decrement
	case x86asm.POP:
		v := pop()
		*reg(0) = v
	case x86asm.MOV:
		*reg(0) = *reg(1)
	case x86asm.ADD, x86asm.SUB:
		a, b := r.Rsp, uint64(inst.Args[1].(x86asm.Imm))
		var res, carry uint64
		var overflow bool
		if op == x86asm.ADD {
			res, carry = bits.Add64(a, b, 0)
			overflow = int64(a) >= 0 == (int64(b) >= 0) && (int64(res) >= 0) != (int64(a) >= 0)
		} else {
			res, carry = bits.Sub64(a, b, 0)
			overflow = (int64(a) >= 0) != (int64(b) >= 0) && (int64(res) >= 0) != (int64(a) >= 0)
		}
		f := r.Eflags &^ arithFlags
		for bit, on := range map[uint64]bool{flagCF: carry != 0, flagOF: overflow, flagZF: res == 0, flagSF: int64(res) < 0,
			flagAF: (a^b^res)&0x10 != 0, flagPF: bits.OnesCount8(uint8(res))%2 == 0} {
			if on {
				f |= bit
			}
		}
		*reg(0), r.Eflags = res, f
	case x86asm.JMP:
		r.Rip = next + rel
	case x86asm.CALL:
		push(next)
		r.Rip = next + rel
	case x86asm.RET:
		r.Rip = pop()
		if len(inst.Args) > 0 && inst.Args[0] != nil {
			r.Rsp += uint64(inst.Args[0].(x86asm.Imm))
		}
	case x86asm.LOOP, x86asm.LOOPE, x86asm.LOOPNE:
		r.Rcx--
		if r.Rcx != 0 && (op == x86asm.LOOP || op == x86asm.LOOPE && zf || op == x86asm.LOOPNE && !zf) {
			r.Rip = next + rel
		}
	case x86asm.JRCXZ:
		if r.Rcx == 0 {
			r.Rip = next + rel
		}
	default:
		taken, ok := cond[op]
		if !ok {
			t.Fatalf("% x: %v is emulated; the reference model does not know it", in.Bytes, inst)
		}
		if taken {
			r.Rip = next + rel
		}
	}
}
