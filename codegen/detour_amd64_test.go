package codegen

import (
	"bytes"
	"encoding/binary"
	"slices"
	"strings"
	"testing"

	"golang.org/x/arch/x86/x86asm"

	"github.com/probedbg/probe/singlestep"
)

func TestPlanDetour(t *testing.T) {
	const fn = 0x401000
	tests := []struct {
		name    string
		code    string
		probe   uint64 // offset into code
		covered int
		refused string // part of the error; "" when optimisable
	}{
		{name: "frame prologue", code: "55 48 89 e5 48 83 ec 10 c9 c3", covered: 8},
		{name: "endbr64", code: "f3 0f 1e fa 55 48 89 e5 c9 c3", covered: 5},
		{name: "rip-relative load", code: "48 8b 05 10 20 00 00 c3", covered: 7},
		{name: "branch back to the probe", code: "55 48 89 e5 48 83 c7 01 48 83 c7 01 75 f6 5d c3", probe: 4, covered: 8},
		{name: "loop into the range", code: "55 48 89 e5 48 ff c7 75 f9 5d c3", refused: "lands inside"},
		{name: "loop into the range, rel32", code: "55 48 89 e5 48 ff c7 0f 85 f7 ff ff ff 5d c3", covered: 7},
		{name: "loop into the middle of a covered instruction", code: "55 48 89 e5 48 ff c7 0f 85 f5 ff ff ff 5d c3", refused: "lands inside"},
		{name: "call into the range", code: "55 48 89 e5 90 e8 f8 ff ff ff c3", refused: "lands inside"},
		{name: "indirect jump", code: "55 48 89 e5 5d ff e0", refused: "indirect jump"},
		{name: "ret covered", code: "55 c3 90 90 90 90", refused: "branch"},
		{name: "call covered, last", code: "55 e8 00 00 00 00 c3", covered: 6},
		{name: "call through memory covered (-mfentry)", code: "ff 15 0a 2c 00 00 48 89 f8 c3", covered: 6},
		{name: "call through memory, not last", code: "90 ff 15 0a 2c 00 00 c3", covered: 7},
		{name: "call through a register", code: "ff d0 90 90 90 c3", refused: "branch"},
		{name: "jcc covered", code: "48 85 f6 74 04 48 89 f0 c3 31 c0 c3", covered: 5},
		{name: "jmp covered", code: "eb 02 90 90 90 c3", refused: "lands inside"},
		{name: "jmp covered, out", code: "eb 04 90 90 90 90 c3", covered: 5},
		{name: "int3 covered", code: "55 cc 90 90 90 c3", refused: "software interrupt"},
		{name: "past the end", code: "55 48 89 e5", refused: "past the end"},
		{name: "syscall covered", code: "90 0f 05 90 90 c3", refused: "system call"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code := hx(t, tc.code)
			d, err := PlanDetour(code, fn, fn+tc.probe, nil)
			if tc.refused != "" {
				if err == nil || !strings.Contains(err.Error(), tc.refused) {
					t.Fatalf("PlanDetour: %v, want an error with %q", err, tc.refused)
				}
				return
			}
			if err != nil {
				t.Fatalf("PlanDetour: %v", err)
			}
			if d.Covered != tc.covered {
				t.Fatalf("covered %d, want %d", d.Covered, tc.covered)
			}
		})
	}
}

// TestDetourCallMem: -mfentry's first instruction, `call
// *__fentry__@GOTPCREL(%rip)`, is copied as `push RET(%rip)` (the original
// return address, kept after the jmp back) and `jmp *SLOT(%rip)` through
// the same pointer; a thread between the two is at the entry of the
// function the pointer names (CallSlot), not at an original instruction.
func TestDetourCallMem(t *testing.T) {
	var fn, detour uint64 = 0x401000, 0x7f0000
	code := hx(t, "ff 15 0a 2c 00 00 48 89 f8 c3") // call *0x2c0a(%rip); mov %rdi,%rax; ret
	slot := fn + 6 + 0x2c0a
	d, err := PlanDetour(code, fn, fn, nil)
	if err != nil {
		t.Fatal(err)
	}
	out, err := d.Code(detour)
	if err != nil {
		t.Fatal(err)
	}
	if len(out) != d.Size() {
		t.Fatalf("code of %d bytes, Size says %d", len(out), d.Size())
	}
	at := d.Copies(detour)
	c := out[at-detour:]
	rets := detour + uint64(d.Size()-8)
	want := []byte{0xff, 0x35}
	want = binary.LittleEndian.AppendUint32(want, uint32(rets-(at+6)))
	want = append(want, 0xff, 0x25)
	want = binary.LittleEndian.AppendUint32(want, uint32(slot-(at+12)))
	want = append(want, 0xe9)
	want = binary.LittleEndian.AppendUint32(want, uint32(fn+6-(at+17)))
	if !bytes.Equal(c[:17], want) {
		t.Fatalf("copies % x, want % x", c[:17], want)
	}
	if ret := binary.LittleEndian.Uint64(out[rets-detour:]); ret != fn+6 {
		t.Errorf("the return address kept is %#x, want %#x", ret, fn+6)
	}
	if s, ok := d.CallSlot(at+6, detour); !ok || s != slot {
		t.Errorf("CallSlot(at the jmp) = %#x, %v; want %#x, true", s, ok, slot)
	}
	if _, _, ok := d.Original(at+6, detour); ok {
		t.Error("Original(at the jmp) is ok: the callee's entry is in memory")
	}
	if orig, _, ok := d.Original(at, detour); !ok || orig != fn {
		t.Errorf("Original(at the push) = %#x, %v; want %#x", orig, ok, fn)
	}
	if orig, _, ok := d.Original(at+12, detour); !ok || orig != fn+6 {
		t.Errorf("Original(at the jmp back) = %#x, %v; want %#x", orig, ok, fn+6)
	}
	if _, ok := d.CallSlot(at, detour); ok {
		t.Error("CallSlot(at the push) is ok")
	}
}

// TestDetourJmpMem: a PLT entry's `jmp *GOT(%rip)` (lazily bound, its
// slot pointing at the push after it; with IBT, after an endbr64 and
// with a bnd prefix) is copied as the same jump through the same slot,
// without the prefix; the indirect jump is the detour's own, not a
// jump table's that might land inside it, and the last covered.
func TestDetourJmpMem(t *testing.T) {
	var fn, detour uint64 = 0x401030, 0x7f0000
	for _, c := range []struct {
		code   string
		jmpAt  int
		covers int
	}{
		{"ff 25 ca 2f 00 00 68 00 00 00 00 e9 e0 ff ff ff", 0, 6},  // .plt: jmp *; push $0; jmp .plt
		{"f3 0f 1e fa f2 ff 25 c5 2f 00 00 0f 1f 44 00 00", 4, 11}, // .plt.sec: endbr64; bnd jmp *; nopl
	} {
		code := hx(t, c.code)
		n := len(code[c.jmpAt:]) - len(code[c.covers:]) // the jmp's length
		slot := fn + uint64(c.covers) + uint64(binary.LittleEndian.Uint32(code[c.covers-4:]))
		d, err := PlanDetour(code, fn, fn, nil)
		if err != nil {
			t.Fatalf("%s: %v", c.code, err)
		}
		if d.Covered != c.covers {
			t.Errorf("%s: covers %d bytes, want %d", c.code, d.Covered, c.covers)
		}
		out, err := d.Code(detour)
		if err != nil {
			t.Fatal(err)
		}
		at := d.Copies(detour) + uint64(c.jmpAt)
		cp := out[at-detour : at-detour+6]
		want := binary.LittleEndian.AppendUint32([]byte{0xff, 0x25}, uint32(slot-(at+6)))
		if !bytes.Equal(cp, want) {
			t.Errorf("%s: the jump's copy (of %d bytes) is % x, want % x", c.code, n, cp, want)
		}
	}
}

// TestDetourRedirect: a jnz rel32 back to the third covered instruction
// is re-aimed at that instruction's copy, past the int3 and the first two
// copies; its other bytes stay.
func TestDetourRedirect(t *testing.T) {
	var fn, detour uint64 = 0x401000, 0x7f0000
	// push %rbp; mov %rsp,%rbp; 1: inc %rdi; jnz 1b (rel32); pop %rbp; ret
	code := hx(t, "55 48 89 e5 48 ff c7 0f 85 f7 ff ff ff 5d c3")
	d, err := PlanDetour(code, fn, fn, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []Redirect{{From: fn + 7, Insn: 2, Orig: code[7:13]}}
	if !slices.EqualFunc(d.Redirects, want, func(a, b Redirect) bool {
		return a.From == b.From && a.Insn == b.Insn && bytes.Equal(a.Orig, b.Orig)
	}) {
		t.Fatalf("redirects %+v, want %+v", d.Redirects, want)
	}
	copy2 := detour + 1 + 1 + 3 // the int3, push's copy, mov's copy
	if at := d.CopyOf(2, detour); at != copy2 {
		t.Fatalf("CopyOf(2) %#x, want %#x", at, copy2)
	}
	b, err := d.Redirected(d.Redirects[0], detour)
	if err != nil {
		t.Fatal(err)
	}
	in, err := x86asm.Decode(b, 64)
	if err != nil || in.Op != x86asm.JNE || target(fn+7, in) != copy2 || !bytes.Equal(b[:2], code[7:9]) {
		t.Fatalf("redirected % x (%v), want jne %#x", b, in, copy2)
	}
	detourCode, err := d.Code(detour)
	if err != nil {
		t.Fatal(err)
	}
	if got := decodeAll(t, detourCode, detour)[copy2]; got.Op != x86asm.INC {
		t.Fatalf("at the copy: %v, want inc", got)
	}
	if _, err := d.Redirected(d.Redirects[0], 0x7fff_0000_0000); err == nil {
		t.Fatal("a detour out of the jnz's reach: no error")
	}
}

// TestDetourBranches: covered branches are re-aimed from the detour: a jcc
// as jcc rel32 to its target, a call as a push of its original return
// address (kept after the jmp back) and a jmp to the callee; Original maps
// a thread between the two to the callee's entry.
func TestDetourBranches(t *testing.T) {
	var fn, detour uint64 = 0x401000, 0x7f0000
	// test %rsi,%rsi; je +4; mov %rsi,%rax; ret; xor %eax,%eax; ret
	d, err := PlanDetour(hx(t, "48 85 f6 74 04 48 89 f0 c3 31 c0 c3"), fn, fn, nil)
	if err != nil {
		t.Fatal(err)
	}
	code, err := d.Code(detour)
	if err != nil || len(code) != d.Size() {
		t.Fatalf("%v: % x (%d bytes, Size %d)", err, code, len(code), d.Size())
	}
	insts := decodeAll(t, code, detour)
	jcc := insts[detour+1+3]
	if jcc.Op != x86asm.JE || target(detour+4, jcc) != fn+9 {
		t.Fatalf("jcc copy %v at %#x, want je %#x", jcc, detour+4, fn+9)
	}
	if back := insts[detour+4+6]; back.Op != x86asm.JMP || target(detour+10, back) != fn+5 {
		t.Fatalf("jmp back %v, want to %#x", back, fn+5)
	}
	// push %rbp; call fn+0x20
	d, err = PlanDetour(hx(t, "55 e8 1a 00 00 00 c3 90 90 90 90 90 90 90 90 90 90 90 90 90 90 90 90 90 90 90 90 90 90 90 90 90 c3"), fn, fn, nil)
	if err != nil {
		t.Fatal(err)
	}
	code, err = d.Code(detour)
	if err != nil || len(code) != d.Size() {
		t.Fatalf("%v: % x (%d bytes, Size %d)", err, code, len(code), d.Size())
	}
	ret := binary.LittleEndian.Uint64(code[len(code)-8:])
	insts = decodeAll(t, code[:len(code)-8], detour)
	push, jmp := insts[detour+2], insts[detour+8]
	m, ok := push.Args[0].(x86asm.Mem)
	if push.Op != x86asm.PUSH || !ok || m.Base != x86asm.RIP || detour+8+uint64(m.Disp) != detour+uint64(len(code)-8) || ret != fn+6 {
		t.Fatalf("call copy: %v (return address %#x), want a push of %#x kept at the end", push, ret, fn+6)
	}
	if jmp.Op != x86asm.JMP || target(detour+8, jmp) != fn+0x20 {
		t.Fatalf("call copy: %v, want jmp %#x", jmp, fn+0x20)
	}
	for rip, want := range map[uint64]uint64{detour + 1: fn, detour + 2: fn + 1, detour + 8: fn + 0x20, detour + 13: fn + 6} {
		if orig, _, ok := d.Original(rip, detour); !ok || orig != want {
			t.Errorf("Original(%#x) = %#x %v, want %#x", rip, orig, ok, want)
		}
	}
}

func TestDetourCode(t *testing.T) {
	var fn, detour uint64 = 0x401000, 0x7f0000
	// push %rbp; mov 0x2010(%rip),%rax: the load must reach the same
	// absolute address from the detour.
	code := hx(t, "55 48 8b 05 10 20 00 00 c3")
	d, err := PlanDetour(code, fn, fn, nil)
	if err != nil {
		t.Fatal(err)
	}
	got, err := d.Code(detour)
	if err != nil {
		t.Fatal(err)
	}
	want := []byte{0xcc, 0x55, 0x48, 0x8b, 0x05}
	want = binary.LittleEndian.AppendUint32(want, uint32(int32(fn+8+0x2010-(detour+9))))
	want = append(want, 0xe9)
	want = binary.LittleEndian.AppendUint32(want, uint32(int32(fn+8-(detour+14))))
	if !bytes.Equal(got, want) || len(got) != d.Size() {
		t.Fatalf("code % x, want % x", got, want)
	}
	jmp, err := d.Jump(detour)
	if err != nil {
		t.Fatal(err)
	}
	if wantJmp := binary.LittleEndian.AppendUint32([]byte{0xe9}, uint32(int32(detour-(fn+5)))); !bytes.Equal(jmp, wantJmp) {
		t.Fatalf("jump % x, want % x", jmp, wantJmp)
	}
	wantOriginal(t, d, detour, []originalCase{
		{detour, fn, false, true}, {detour + 1, fn, false, true}, {detour + 2, fn + 1, false, true},
		{detour + 9, fn + 8, false, true}, {detour + 3, 0, false, false}, {detour + 14, 0, false, false},
	})
	if _, err := d.Jump(fn + 3<<30); err == nil {
		t.Fatal("Jump beyond ±2 GiB: no error")
	}
}

func TestDetourReturnHook(t *testing.T) {
	var fn, detour, tramp uint64 = 0x401000, 0x7f0000, 0x7f8000
	code := hx(t, "55 48 89 e5 48 83 ec 10 c9 c3") // push; mov; sub: 8 bytes
	d, err := PlanDetour(code, fn, fn, nil)
	if err != nil {
		t.Fatal(err)
	}
	d.ReturnHook = tramp
	got, err := d.Code(detour)
	if err != nil {
		t.Fatal(err)
	}
	// mov %r11,-8(%rsp); mov (%rsp),%r11; int3; lea tramp(%rip),%r11;
	// mov %r11,(%rsp); mov -8(%rsp),%r11; the copies; jmp back.
	want := hx(t, "4c 89 5c 24 f8 4c 8b 1c 24 cc 4c 8d 1d")
	want = binary.LittleEndian.AppendUint32(want, uint32(int32(tramp-(detour+17))))
	want = append(want, hx(t, "4c 89 1c 24 4c 8b 5c 24 f8 55 48 89 e5 48 83 ec 10 e9")...)
	want = binary.LittleEndian.AppendUint32(want, uint32(int32(fn+8-(detour+39))))
	if !bytes.Equal(got, want) || len(got) != d.Size() {
		t.Fatalf("code % x, want % x", got, want)
	}
	if d.Trap(detour) != detour+9 || d.Skip(detour) != detour+21 || d.Copies(detour) != detour+26 {
		t.Fatalf("trap %#x, skip %#x, copies %#x", d.Trap(detour), d.Skip(detour), d.Copies(detour))
	}
	wantOriginal(t, d, detour, []originalCase{
		{detour, fn, false, true}, {detour + 5, fn, true, true}, {detour + 9, fn, true, true},
		{detour + 10, fn, true, true}, {detour + 17, fn, true, true}, {detour + 21, fn, true, true},
		{detour + 26, fn, false, true}, {detour + 27, fn + 1, false, true}, {detour + 34, fn + 8, false, true},
		{detour + 6, 0, false, false}, {detour + 18, 0, false, false},
	})
	d.ReturnHook = 0
	d.LoadReturn = true
	got, err = d.Code(detour)
	if err != nil {
		t.Fatal(err)
	}
	// LoadReturn alone: mov %r11,-8(%rsp); mov (%rsp),%r11; int3;
	// mov -8(%rsp),%r11; the copies; jmp back.
	want = hx(t, "4c 89 5c 24 f8 4c 8b 1c 24 cc 4c 8b 5c 24 f8 55 48 89 e5 48 83 ec 10 e9")
	want = binary.LittleEndian.AppendUint32(want, uint32(int32(fn+8-(detour+28))))
	if !bytes.Equal(got, want) || len(got) != d.Size() {
		t.Fatalf("load-only code % x, want % x", got, want)
	}
	if d.Trap(detour) != detour+9 || d.Skip(detour) != detour+10 || d.Copies(detour) != detour+15 {
		t.Fatalf("load-only trap %#x, skip %#x, copies %#x", d.Trap(detour), d.Skip(detour), d.Copies(detour))
	}
	wantOriginal(t, d, detour, []originalCase{
		{detour, fn, false, true}, {detour + 5, fn, true, true}, {detour + 9, fn, true, true},
		{detour + 10, fn, true, true}, {detour + 15, fn, false, true}, {detour + 16, fn + 1, false, true},
		{detour + 11, 0, false, false},
	})
	d.LoadReturn = false
	d.ReturnHook = detour + 3<<30
	if _, err := d.Code(detour); err == nil {
		t.Fatal("trampoline beyond ±2 GiB: no error")
	}
}

// FuzzDetour plans a detour for any function code and checks what it
// promises: no panic; when accepted, the covered instructions are not
// branches, the detour decodes to an int3, instructions of the same
// lengths and opcodes, and a jmp landing on Addr+Covered; no direct
// branch of the function lands strictly inside the covered range.
func FuzzDetour(f *testing.F) {
	for _, s := range []string{"55 48 89 e5 48 83 ec 10 c9 c3", "f3 0f 1e fa 55 48 89 e5 c3", "48 8b 05 10 20 00 00 c3",
		"55 48 89 e5 48 ff c7 75 f9 5d c3", "55 48 89 e5 5d ff e0", "41 57 41 56 41 55 41 54 55 53 c3"} {
		f.Add(hx(f, s), uint8(0), int32(0x100000))
	}
	f.Fuzz(func(t *testing.T, code []byte, probeOff uint8, detourDelta int32) {
		const fn = 0x555555554000
		addr := fn + uint64(probeOff)
		d, err := PlanDetour(code, fn, addr, nil)
		if err != nil {
			return
		}
		if d.Covered < JumpSize || addr+uint64(d.Covered) > fn+uint64(len(code)) {
			t.Fatalf("% x: covered %d", code, d.Covered)
		}
		detour := uint64(int64(addr) + int64(detourDelta))
		out, err := d.Code(detour)
		if err != nil {
			return // out of range
		}
		if out[0] != 0xcc || len(out) != d.Size() {
			t.Fatalf("% x: detour % x", code, out)
		}
		at := 1
		for _, in := range d.Insns {
			c, err := singlestep.Analyze(out[at:], detour+uint64(at))
			if err != nil || c.Len != in.Len || c.Mnemonic != in.Mnemonic {
				t.Fatalf("% x: copy of %v decodes as %v (%v)", code, in, c, err)
			}
			inst, _ := x86asm.Decode(out[at:], 64)
			if _, ok := inst.Args[0].(x86asm.Rel); ok || inst.Op == x86asm.RET || inst.Op == x86asm.JMP || inst.Op == x86asm.CALL {
				t.Fatalf("% x: branch %v covered", code, inst)
			}
			at += in.Len
		}
		disp := int32(binary.LittleEndian.Uint32(out[at+1:]))
		if out[at] != 0xe9 || detour+uint64(at)+5+uint64(int64(disp)) != addr+uint64(d.Covered) {
			t.Fatalf("% x: jmp back % x", code, out[at:])
		}
		starts, _ := singlestep.Boundaries(code, fn)
		for _, s := range starts {
			inst, _ := x86asm.Decode(code[s-fn:], 64)
			if rel, ok := inst.Args[0].(x86asm.Rel); ok {
				target := s + uint64(inst.Len) + uint64(int64(rel))
				if addr < target && target < addr+uint64(d.Covered) {
					t.Fatalf("% x: branch at %#x lands at %#x inside the jump", code, s, target)
				}
			}
		}
	})
}

// originalCase is an address in a detour and what Original must say of it.
type originalCase struct {
	rip, orig    uint64
	savedR11, ok bool
}

func wantOriginal(t *testing.T, d *Detour, detour uint64, cases []originalCase) {
	t.Helper()
	for _, c := range cases {
		orig, savedR11, ok := d.Original(c.rip, detour)
		if orig != c.orig || savedR11 != c.savedR11 || ok != c.ok {
			t.Errorf("Original(%#x) = %#x, %v, %v; want %#x, %v, %v", c.rip, orig, savedR11, ok, c.orig, c.savedR11, c.ok)
		}
	}
}

// TestPlanDetourJumpTable: a function whose switch dispatches through a
// jump table is optimisable when the table is read and none of its
// entries lands inside the jump; unread, or with an entry inside, it is
// refused.
func TestPlanDetourJumpTable(t *testing.T) {
	const fn = 0x401000
	code := hx(t, "0f b6 46 08 83 e8 04 3c 02 77 17 48 8d 15 ee 00 00 00 0f b6 c0 48 63 04 82 48 01 d0 ff e0 c3 c3 c3 c3 c3")
	table := func(entries ...uint64) singlestep.TableReader {
		return func(addr, n uint64) ([]byte, error) {
			if addr != fn+0x100 || n != 3*4 {
				t.Fatalf("read %d bytes at %#x, want the 3 entries at %#x", n, addr, fn+0x100)
			}
			var b []byte
			for _, e := range entries {
				b = binary.LittleEndian.AppendUint32(b, uint32(int32(e-(fn+0x100))))
			}
			return b, nil
		}
	}
	d, err := PlanDetour(code, fn, fn, table(fn+0x1e, fn+0x1f, fn+0x20))
	if err != nil || d.Covered != 7 {
		t.Fatalf("PlanDetour: %v, %+v; want 7 bytes covered", err, d)
	}
	if _, err := PlanDetour(code, fn, fn, table(fn+0x1e, fn+4, fn+0x20)); err == nil || !strings.Contains(err.Error(), "lands inside") {
		t.Fatalf("an entry inside the jump: %v, want refused", err)
	}
	if _, err := PlanDetour(code, fn, fn, nil); err == nil || !strings.Contains(err.Error(), "indirect jump") {
		t.Fatalf("no table reader: %v, want refused", err)
	}
	// Without its bound check (the cmp made a nop), the table's length
	// is not known.
	unbound := slices.Clone(code)
	copy(unbound[7:9], []byte{0x66, 0x90})
	if _, err := PlanDetour(unbound, fn, fn, table(fn+0x1e, fn+0x1f, fn+0x20)); err == nil || !strings.Contains(err.Error(), "indirect jump") {
		t.Fatalf("no bound: %v, want refused", err)
	}
}

// TestPlanDetourJumpTableBase: the table's base set once at the start in
// a callee-saved register (`push %rbp; lea TABLE(%rip),%rbp`), popped on
// the way out, is the table; written again on a path that leaves, it
// still is; written on a path back to the dispatch, it is not known.
func TestPlanDetourJumpTableBase(t *testing.T) {
	const fn = 0x401000
	code := hx(t, "55 48 8d 2d f8 00 00 00 3c 02 77 11 0f b6 c0 48 63 44 85 00 48 01 e8 ff e0 5d c3 5d c3 5d c3")
	read := func(addr, n uint64) ([]byte, error) {
		var b []byte
		for _, e := range []uint64{fn + 0x19, fn + 0x1b, fn + 0x1d} {
			b = binary.LittleEndian.AppendUint32(b, uint32(int32(e-(fn+0x100))))
		}
		if addr != fn+0x100 || n != uint64(len(b)) {
			t.Fatalf("read %d bytes at %#x, want the 3 entries at %#x", n, addr, fn+0x100)
		}
		return b, nil
	}
	if d, err := PlanDetour(code, fn, fn, read); err != nil || d.Covered != 8 {
		t.Fatalf("PlanDetour: %v, %+v; want 8 bytes covered", err, d)
	}
	leaving := slices.Clone(code)
	copy(leaving[0x19:], []byte{0x89, 0xfd}) // mov %edi,%ebp, then the next case's pop; ret
	if d, err := PlanDetour(leaving, fn, fn, read); err != nil || d.Covered != 8 {
		t.Fatalf("the base written on the way out: %v, %+v; want 8 bytes covered", err, d)
	}
	back := slices.Clone(code)
	copy(back[0x19:], []byte{0x89, 0xfd, 0xeb, 0xeb}) // mov %edi,%ebp; jmp to the cmp
	if _, err := PlanDetour(back, fn, fn, read); err == nil || !strings.Contains(err.Error(), "indirect jump") {
		t.Fatalf("the base written on a path back to the dispatch: %v, want refused", err)
	}
}

// TestPlanDetourJumpTableIndex: the index may be a 32-bit copy of the
// register the bound was checked on (`mov %esi,%eax`), or loaded after
// the check from the memory the cmp read, a store elsewhere between
// (`cmpb $2,0x65(%rdi); movb $1,0x67(%rdi); ja; movzbl 0x65(%rdi),%eax`);
// a store to that memory, or a write of its address's register, between
// check and load makes the table's length unknown.
func TestPlanDetourJumpTableIndex(t *testing.T) {
	const fn = 0x401000
	read := func(table uint64, entries ...uint64) singlestep.TableReader {
		return func(addr, n uint64) ([]byte, error) {
			var b []byte
			for _, e := range entries {
				b = binary.LittleEndian.AppendUint32(b, uint32(int32(e-table)))
			}
			if addr != table || n != uint64(len(b)) {
				t.Fatalf("read %d bytes at %#x, want the %d entries at %#x", n, addr, len(entries), table)
			}
			return b, nil
		}
	}
	copied := hx(t, "83 fe 02 77 12 48 8d 15 f0 00 00 00 89 f0 48 63 04 82 48 01 d0 ff e0 c3 c3 c3 c3")
	if d, err := PlanDetour(copied, fn, fn, read(fn+0xfc, fn+0x17, fn+0x18, fn+0x19)); err != nil || d.Covered != 5 {
		t.Errorf("the index copied: %v, %+v; want 5 bytes covered", err, d)
	}
	if _, err := PlanDetour(copied, fn, fn, read(fn+0xfc, fn+0x17, fn+0x2, fn+0x19)); err == nil || !strings.Contains(err.Error(), "lands inside") {
		t.Errorf("the index copied, an entry inside the jump: %v, want refused", err)
	}
	loaded := hx(t, "80 7f 65 02 c6 47 67 01 77 14 0f b6 47 65 48 8d 15 f0 00 00 00 48 63 04 82 48 01 d0 ff e0 c3 c3 c3 c3")
	table := read(fn+0x105, fn+0x1e, fn+0x1f, fn+0x20)
	if d, err := PlanDetour(loaded, fn, fn, table); err != nil || d.Covered != 8 {
		t.Errorf("the index loaded: %v, %+v; want 8 bytes covered", err, d)
	}
	for _, tc := range []struct {
		name  string
		at    int
		bytes string
	}{
		{"a store to the index's memory", 4, "c6 47 65 01"},
		{"its address's register written", 4, "48 89 f7 90"},
		{"a check of another width", 0, "66 83 7f 65"}, // cmpw: 16 bits checked, 8 loaded
	} {
		code := slices.Clone(loaded)
		b := hx(t, tc.bytes)
		copy(code[tc.at:], b)
		if tc.at == 0 {
			// cmpw $2,0x65(%rdi) is 5 bytes: the store after it
			// shrinks to keep the rest in place.
			code = slices.Concat(b, []byte{0x02, 0x88, 0x47, 0x67}, loaded[8:])
		}
		if _, err := PlanDetour(code, fn, fn, table); err == nil || !strings.Contains(err.Error(), "indirect jump") {
			t.Errorf("%s: %v, want refused", tc.name, err)
		}
	}
}
