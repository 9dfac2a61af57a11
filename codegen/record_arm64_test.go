package codegen

import (
	"cmp"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"golang.org/x/arch/arm64/arm64asm"

	"github.com/probedbg/probe/ring"
)

// TestA64Encodings: each instruction the generated code uses is the
// word aarch64-linux-gnu-as makes of it (objdump's text beside).
func TestA64Encodings(t *testing.T) {
	tests := []struct {
		gen  func(a *a64)
		want []uint32
		text string
	}{
		{func(a *a64) { a.mov(x9, 0) }, []uint32{0xd2800009}, "mov x9, #0x0"},
		{func(a *a64) { a.mov(x9, 0x7_00000018) }, []uint32{0xd2800309, 0xf2c000e9}, "mov x9, #0x18; movk x9, #0x7, lsl #32"},
		{func(a *a64) { a.mov(x14, 0xffffffff_fffff9e0) }, []uint32{0x9280c3ee}, "mov x14, #0xfffffffffffff9e0"},
		{func(a *a64) { a.mov(x15, 0x0000ffff_12340000) }, []uint32{0xd2a2468f, 0xf2dfffef}, "mov x15, #0x12340000; movk x15, #0xffff, lsl #32"},
		{func(a *a64) { a.movReg(x12, x11) }, []uint32{0xaa0b03ec}, "mov x12, x11"},
		{func(a *a64) { a.addImm(x10, x10, 0x91000) }, []uint32{0x9142454a}, "add x10, x10, #0x91, lsl #12"},
		{func(a *a64) { a.addImm(x13, xSP, 80) }, []uint32{0x910143ed}, "add x13, sp, #0x50"},
		{func(a *a64) { a.subImm(xSP, xSP, 80) }, []uint32{0xd10143ff}, "sub sp, sp, #0x50"},
		{func(a *a64) { a.add(x10, x16, x15) }, []uint32{0x8b0f020a}, "add x10, x16, x15"},
		{func(a *a64) { a.sub(x14, x16, x15) }, []uint32{0xcb0f020e}, "sub x14, x16, x15"},
		{func(a *a64) { a.eor(x13, x13, x11) }, []uint32{0xca0b01ad}, "eor x13, x13, x11"},
		{func(a *a64) { a.orrShifted(x13, x9, x13, 16) }, []uint32{0xaa0d412d}, "orr x13, x9, x13, lsl #16"},
		{func(a *a64) { a.madd(x10, x13, x16, x15) }, []uint32{0x9b103daa}, "madd x10, x13, x16, x15"},
		{func(a *a64) { a.andLow(x15, x9, 16) }, []uint32{0x92403d2f}, "and x15, x9, #0xffff"},
		{func(a *a64) { a.lsr(x10, x10, 22) }, []uint32{0xd356fd4a}, "lsr x10, x10, #22"},
		{func(a *a64) { a.ldr(x14, x12, 128) }, []uint32{0xf940418e}, "ldr x14, [x12, #128]"},
		{func(a *a64) { a.str(x13, x10, 16) }, []uint32{0xf900094d}, "str x13, [x10, #16]"},
		{func(a *a64) { a.ldrW32Reg(x11, x13, x14) }, []uint32{0xb86e69ab}, "ldr w11, [x13, x14]"},
		{func(a *a64) { a.ldrhScaled(x12, x14, x13) }, []uint32{0x786d79cc}, "ldrh w12, [x14, x13, lsl #1]"},
		{func(a *a64) { a.strhScaled(x17, x14, x13) }, []uint32{0x782d79d1}, "strh w17, [x14, x13, lsl #1]"},
		{func(a *a64) { a.stp(x17, xLR, xSP, 64) }, []uint32{0xa9047bf1}, "stp x17, x30, [sp, #64]"},
		{func(a *a64) { a.ldp(x9, x10, xSP, 0) }, []uint32{0xa9402be9}, "ldp x9, x10, [sp]"},
		{func(a *a64) { a.ldxr(x13, x17) }, []uint32{0xc85f7e2d}, "ldxr x13, [x17]"},
		{func(a *a64) { a.ldaxr(x13, x10) }, []uint32{0xc85ffd4d}, "ldaxr x13, [x10]"},
		{func(a *a64) { a.stxr(x10, x16, x17) }, []uint32{0xc80a7e30}, "stxr w10, x16, [x17]"},
		{func(a *a64) { a.stlxr(x13, x11, x10) }, []uint32{0xc80dfd4b}, "stlxr w13, x11, [x10]"},
		{func(a *a64) { a.stlr(x11, x10) }, []uint32{0xc89ffd4b}, "stlr x11, [x10]"},
		{func(a *a64) { a.addShifted(x14, x12, x14, 4) }, []uint32{0x8b0e118e}, "add x14, x12, x14, lsl #4"},
		{func(a *a64) { a.ldrswReg(x13, x13, x14) }, []uint32{0xb8ae69ad}, "ldrsw x13, [x13, x14]"},
		{func(a *a64) { a.mov64(x16, 0xffff_12345678) }, []uint32{0xd28acf10, 0xf2a24690, 0xf2dffff0, 0xf2e00010}, "mov x16, #0x5678; movk x16, #0x1234, lsl #16; movk x16, #0xffff, lsl #32; movk x16, #0x0, lsl #48"},
		{func(a *a64) { a.emit(a64Brk) }, []uint32{0xd4200000}, "brk #0x0"},
		{func(a *a64) { a.ldrW(0, x14, 16) }, []uint32{0xb94011c0}, "ldr w0, [x14, #16]"},
		{func(a *a64) { a.emit(a64Svc) }, []uint32{0xd4000001}, "svc #0x0"},
		{func(a *a64) { a.andReg(x16, x15, x14) }, []uint32{0x8a0e01f0}, "and x16, x15, x14"},
		{func(a *a64) { a.bic(x16, x14, x15) }, []uint32{0x8a2f01d0}, "bic x16, x14, x15"},
		{func(a *a64) { a.eon(x17, x15, x14) }, []uint32{0xca2e01f1}, "eon x17, x15, x14"},
		{func(a *a64) { a.lslImm(x15, x15, 48) }, []uint32{0xd3503def}, "lsl x15, x15, #48"},
		{func(a *a64) { a.lslImm(x15, x15, 1) }, []uint32{0xd37ff9ef}, "lsl x15, x15, #1"},
		{func(a *a64) { a.asrImm(x15, x15, 48) }, []uint32{0x9370fdef}, "asr x15, x15, #48"},
		{func(a *a64) { a.emit(a64Clz | x15<<5 | x17) }, []uint32{0xdac011f1}, "clz x17, x15"},
		{func(a *a64) { a.branch(brTBZ, x16, 63, 0) }, []uint32{0xb6f80010}, "tbz x16, #63, ."},
		{func(a *a64) { a.stp(18, xLR, xSP, 144) }, []uint32{0xa9097bf2}, "stp x18, x30, [sp, #144]"},
	}
	for _, tc := range tests {
		a := &a64{}
		tc.gen(a)
		if a.err != nil || !slices.Equal(a.w, tc.want) {
			t.Errorf("%s: %08x (%v), want %08x", tc.text, a.w, a.err, tc.want)
		}
	}
}

// TestRecordCodeArm64: the routine and a stub are whole arm64 code,
// every branch lands on one of their instructions, neither writes NZCV,
// and Rewind knows every instruction of the stub.
func TestRecordCodeArm64(t *testing.T) {
	for _, l := range []ring.Layout{
		{Base: 0xffff80000000, Slots: 512, RingSize: 4 << 20, TidOff: -0x620, CPUOff: -0x5e0},
		{Base: 0x7f0000000000, Slots: 1, RingSize: 4096, TidOff: 0xd0},
	} {
		const routine = 0x10000
		r := &RecordRoutine{Layout: l}
		code, err := r.Code(routine)
		if err != nil || len(code) != r.Size() {
			t.Fatalf("%v: %d bytes, Size %d", err, len(code), r.Size())
		}
		checkA64(t, "routine", code, routine)
		s := &RecordStub{Routine: routine, Next: 0x20000, Site: 7, Regs: []int{0, 8, 9 * 8, 30 * 8, 31 * 8, 19 * 8}, StackWords: 2}
		at := uint64(0x18000)
		stub, err := s.Code(at)
		if err != nil || len(stub) != s.Size() {
			t.Fatalf("stub: %v: %d bytes, Size %d", err, len(stub), s.Size())
		}
		checkA64(t, "stub", stub, at)
		for pc := at; pc < at+uint64(len(stub)); pc += 4 {
			if _, ok := s.Rewind(at, pc, 0x7000); !ok {
				t.Errorf("stub %#x: no rewind", pc)
			}
		}
		if last, _ := s.Rewind(at, at+uint64(len(stub))-4, 0x7000); last.Saved || last.SP != 0x7000 {
			t.Errorf("at the b back: %+v", last)
		}
		if mid, _ := s.Rewind(at, at+4*uint64(stubSaves), 0x7000-rsArea); !mid.Saved || mid.SP != 0x7000 || mid.Area != 0x7000-rsArea {
			t.Errorf("after the saves: %+v", mid)
		}
		reads := &RecordStub{Routine: routine, Next: 0x20000, Site: 9, Regs: []int{0, 8}, Rings: l.Base, Hook: true, Reads: []MemRead{
			{Reg: 0, Off: -8, Len: 16}, {Via: 1, Off: 8, Len: MemReadMax}, {Abs: true, Addr: 0x601040, Len: 4}, {Reg: 31 * 8, Len: 8},
		}}
		rstub, err := reads.Code(at)
		if err != nil || len(rstub) != reads.Size() {
			t.Fatalf("reading stub: %v: %d bytes, Size %d", err, len(rstub), reads.Size())
		}
		checkA64(t, "reading stub", rstub, at)
		if want := ring.RecordHeader + 8*(2+1+(2+2)+(2+32)+(2+1)+(2+1)+iovWords); reads.Len() != want {
			t.Errorf("reading stub: Len %d, want %d", reads.Len(), want)
		}
		for pc := at; pc < at+uint64(len(rstub)); pc += 4 {
			if rw, ok := reads.Rewind(at, pc, 0x7000); !ok || pc > at+4*uint64(stubSaves) && pc < at+uint64(len(rstub))-8 && !rw.Saved {
				t.Errorf("reading stub %#x: %+v %v", pc, rw, ok)
			}
		}
		val := &TallyValue{Reg: 2 * 8, Word: -1, Size: 4, Bits: 32, Signed: true}
		cond := &Filter{Kind: FilterOr, L: &Filter{Kind: FilterCmp, Op: OpGT, Const: 100, Value: *val},
			R: &Filter{Kind: FilterNot, L: &Filter{Kind: FilterCmp, Op: OpBand, Const: 1, Value: TallyValue{Word: 1, Size: 8, Bits: 64}}}}
		for _, st := range []*RecordStub{
			{Routine: routine, Next: 0x20000, Site: 10, Tallies: []Tally{{At: 0}, {At: 1, Value: val}, {At: 1 + TallyHistWords, Filter: cond}}},
			{Routine: routine, Next: 0x20000, Site: 11, Regs: []int{0}, Filter: cond, Rejected: 5},
		} {
			code, err := st.Code(at)
			if err != nil || len(code) != st.Size() {
				t.Fatalf("stub %d: %v: %d bytes, Size %d", st.Site, err, len(code), st.Size())
			}
			checkA64(t, fmt.Sprint("stub ", st.Site), code, at)
			for pc := at; pc < at+uint64(len(code)); pc += 4 {
				if _, ok := st.Rewind(at, pc, 0x7000); !ok {
					t.Errorf("stub %d %#x: no rewind", st.Site, pc)
				}
			}
		}
		hooked := &RecordStub{Routine: routine, Next: 0x20000, Site: 8, Regs: []int{31 * 8, 30 * 8}, Hook: true}
		hstub, err := hooked.Code(at)
		if err != nil || len(hstub) != hooked.Size() || hooked.Len() != ring.RecordHeader+24 {
			t.Fatalf("hooking stub: %v: %d bytes, Size %d, Len %d", err, len(hstub), hooked.Size(), hooked.Len())
		}
		checkA64(t, "hooking stub", hstub, at)
		// Past -pg's call of _mcount: the thread as at its entry through
		// its frame record (x29 + 48 the entry's sp; x29, x30 at [x29]),
		// the return hooked in the frame.
		framed := &RecordStub{Routine: routine, Next: 0x20000, Site: 12, Regs: []int{31 * 8, 30 * 8, 29 * 8, 19 * 8}, StackWords: 1, Hook: true, FrameEntry: true, FrameAbove: 48}
		fstub, err := framed.Code(at)
		if err != nil || len(fstub) != framed.Size() {
			t.Fatalf("stub past mcount: %v: %d bytes, Size %d", err, len(fstub), framed.Size())
		}
		checkA64(t, "stub past mcount", fstub, at)
		var text []string
		for off := 0; off < len(fstub); off += 4 {
			inst, _ := arm64asm.Decode(fstub[off:])
			line := arm64asm.GNUSyntax(inst)
			if rel, ok := inst.Args[0].(arm64asm.PCRel); ok && inst.Op == arm64asm.BL {
				line = fmt.Sprintf("bl %#x", at+uint64(off)+uint64(int64(rel)))
			}
			text = append(text, line)
		}
		all := strings.Join(text, "\n")
		for _, want := range []string{"add x13, x29, #0x30", "ldr x13, [x29,#8]", "ldr x13, [x29]", "ldr x13, [x29,#48]", fmt.Sprintf("bl %#x", HookFrameRoutine(routine))} {
			if !strings.Contains(all, want) {
				t.Errorf("stub past mcount: no %q in\n%s", want, all)
			}
		}
		if strings.Contains(all, "[sp,#160]") || strings.Contains(all, fmt.Sprintf("bl %#x", HookRoutine(routine))) {
			t.Errorf("stub past mcount: reads the thread's own sp or x30, or hooks x30:\n%s", all)
		}
		for _, bad := range []uint64{0, 8, 40, 8200, 1 << 24} {
			if _, err := (&RecordStub{Routine: routine, Next: 0x20000, FrameEntry: true, FrameAbove: bad}).Code(at); err == nil {
				t.Errorf("a frame record %d bytes below the entry's sp: no error", bad)
			}
		}
		for _, bad := range []*RecordStub{{FrameEntry: true, FrameAbove: 48, FrameKey: 'C'}, {FrameKey: 'A'}} {
			bad.Routine, bad.Next = routine, 0x20000
			if _, err := bad.Code(at); err == nil {
				t.Errorf("a stub with FrameEntry %v, key %q: no error", bad.FrameEntry, bad.FrameKey)
			}
		}
		// A frame over 512 bytes (gcc's subs of sp first; 70,032 bytes:
		// no ldr reaches a stack word from x29), the return address
		// signed with key B: taken stripped, and the hook told the key.
		big := &RecordStub{Routine: routine, Next: 0x20000, Site: 13, Regs: []int{31 * 8, 30 * 8}, StackWords: 1, Hook: true, FrameEntry: true, FrameAbove: 70032, FrameKey: 'B'}
		bstub, err := big.Code(at)
		if err != nil || len(bstub) != big.Size() {
			t.Fatalf("signed stub past mcount: %v: %d bytes, Size %d", err, len(bstub), big.Size())
		}
		checkA64(t, "signed stub past mcount", bstub, at)
		words := func(code []byte) []uint32 {
			var ws []uint32
			for off := 0; off+4 <= len(code); off += 4 {
				ws = append(ws, binary.LittleEndian.Uint32(code[off:]))
			}
			return ws
		}
		bw := words(bstub)
		for _, want := range []struct {
			seq  []uint32
			text string
		}{
			{[]uint32{0xf94007be, a64Xpaclri, 0xaa1e03ed}, "ldr x30, [x29, #8]; xpaclri; mov x13, x30"},
			{[]uint32{0x914047ad, 0x910641ad, 0xf94001ad}, "add x13, x29, #0x11, lsl #12; add x13, x13, #0x190; ldr x13, [x13]"},
			{[]uint32{0x914047ad, 0x910641ad, 0xd2800040, 0xf94007be, a64Xpaclri, 0xaa1e03e1}, "add x13, x29, #0x11, lsl #12; add x13, x13, #0x190; mov x0, #2; ldr x30, [x29, #8]; xpaclri; mov x1, x30"},
		} {
			found := false
			for i := range bw {
				found = found || slices.Equal(bw[i:min(len(bw), i+len(want.seq))], want.seq)
			}
			if !found {
				t.Errorf("signed stub past mcount: no %s", want.text)
			}
		}
		if fw := words(fstub); !slices.Contains(fw, 0xd2800000) || slices.Contains(fw, a64Xpaclri) { // mov x0, #0
			t.Errorf("stub past mcount: no mov x0, #0 before the hook, or an xpaclri")
		}
		// The routine signs, and keeps x30 its way back to the stub
		// (a thread taken out of it finds its stub by x30): it writes
		// x30 nowhere.
		rw := words(code)
		if !slices.Contains(rw, a64Pacia1716) || !slices.Contains(rw, a64Pacib1716) {
			t.Errorf("the routine: no pacia1716 or pacib1716")
		}
		for i, w := range rw[:routineAt.tally] {
			if inst, err := arm64asm.Decode(binary.LittleEndian.AppendUint32(nil, w)); err == nil && len(inst.Args) > 0 && inst.Args[0] == arm64asm.X30 && !slices.Contains([]arm64asm.Op{arm64asm.STP, arm64asm.STR, arm64asm.RET}, inst.Op) {
				t.Errorf("the routine's hook or trampoline, word %d: %s writes x30", i, arm64asm.GNUSyntax(inst))
			}
		}
		// The hook and the trampoline write the trampoline's address:
		// this copy's, or the process's one.
		for _, tramp := range []uint64{0, 0x7f00_1234_5678} {
			r.Trampoline = tramp
			code, _ := r.Code(routine)
			want := cmp.Or(tramp, Trampoline(routine))
			if got := mov64Value(code[HookRoutine(routine)-routine+12:]); got != want {
				t.Errorf("the hook's trampoline: %#x, want %#x", got, want)
			}
		}
		if TrampolineTrap(routine) <= Trampoline(routine) || binary.LittleEndian.Uint32(code[TrampolineTrap(routine)-routine:]) != a64Brk {
			t.Errorf("the trampoline's brk is not at %#x", TrampolineTrap(routine))
		}
		for pc := Trampoline(routine); pc <= TrampolineTrap(routine); pc += 4 {
			rw, ok := TrampolineRewind(routine, pc, 0x7000, false)
			if !ok || rw.Saved && (rw.Area != 0x7000 || rw.SP != 0x7000+rsArea) {
				t.Errorf("trampoline %#x: %+v %v", pc, rw, ok)
			}
		}
		if rw, _ := TrampolineRewind(routine, Trampoline(routine), 0x7000, false); rw != (StubRewind{SP: 0x7000}) {
			t.Errorf("at the trampoline's start: %+v", rw)
		}
		if _, ok := TrampolineRewind(routine, TrampolineTrap(routine)+4, 0x7000, false); ok {
			t.Error("the record routine taken for the trampoline")
		}
		if t.Failed() {
			t.Logf("routine: %s\nstub: %s", hex.EncodeToString(code), hex.EncodeToString(stub))
		}
	}
}

// mov64Value is the value a mov64's four words put in their register.
func mov64Value(code []byte) uint64 {
	var v uint64
	for hw := range 4 {
		v |= uint64(binary.LittleEndian.Uint32(code[4*hw:])>>5&0xffff) << (16 * hw)
	}
	return v
}

// checkA64 decodes code placed at at: every word an instruction, every
// branch inside the code (but bl and the last b, to the routine and
// back), no flag-setting instruction.
func checkA64(t *testing.T, what string, code []byte, at uint64) {
	t.Helper()
	end := at + uint64(len(code))
	for off := 0; off < len(code); off += 4 {
		pc := at + uint64(off)
		inst, err := arm64asm.Decode(code[off:])
		if err != nil {
			t.Errorf("%s %#x: %08x: %v", what, pc, binary.LittleEndian.Uint32(code[off:]), err)
			continue
		}
		text := arm64asm.GNUSyntax(inst)
		switch op := strings.Fields(text)[0]; op {
		case "adds", "subs", "ands", "bics", "adcs", "sbcs", "negs", "ngcs", "cmp", "cmn", "tst", "ccmp", "ccmn", "msr":
			t.Errorf("%s %#x: %s writes the flags", what, pc, text)
		}
		for _, arg := range inst.Args {
			if rel, ok := arg.(arm64asm.PCRel); ok && inst.Op != arm64asm.BL && off != len(code)-4 {
				if to := pc + uint64(int64(rel)); to < at || to >= end {
					t.Errorf("%s %#x: %s lands outside, at %#x", what, pc, text, to)
				}
			}
		}
	}
}

// TestDetourRelocates: a pc-relative instruction at a probe runs from
// the detour with the original's effect, and a thread at each of its
// words goes on where it would in the original code. (The words: see
// TestArm64Emulate.)
func TestDetourRelocates(t *testing.T) {
	const detour = 0x2000000
	tests := []struct {
		name string
		w    uint32
		addr uint64
		text []string // the code after the brk, as GNU syntax
		orig []uint64 // where a thread at each word goes
	}{
		{"adrp x8", 0xb0091a28, 0x400048, []string{"mov x8, #0x5000", "movk x8, #0x1274, lsl #16", "b 0x40004c"}, []uint64{0x400048, 0x400048, 0x40004c}},
		{"ldr x9, literal", 0x58003da9, 0x40004c, []string{"mov x9, #0x800", "movk x9, #0x40, lsl #16", "ldr x9, [x9]", "b 0x400050"}, []uint64{0x40004c, 0x40004c, 0x40004c, 0x400050}},
		{"ldrsw x11, literal", 0x98003d6b, 0x400054, []string{"mov x11, #0x800", "movk x11, #0x40, lsl #16", "ldrsw x11, [x11]", "b 0x400058"}, []uint64{0x400054, 0x400054, 0x400054, 0x400058}},
		{"bl", 0x97ffffb8, 0x400020, []string{"mov x30, #0x24", "movk x30, #0x40, lsl #16", "b 0x3fff00"}, []uint64{0x400020, 0x400020, 0x400020}},
		{"b", 0x14000039, 0x40001c, []string{"b 0x400100"}, []uint64{0x40001c}},
		{"cbz w3", 0x34ffff63, 0x400034, []string{"cbz w3, 0x200000c", "b 0x400038", "b 0x400020"}, []uint64{0x400034, 0x400038, 0x400020}},
		{"tbz x5, #33", 0xb60fff25, 0x40003c, []string{"tbz x5, #33, 0x200000c", "b 0x400040", "b 0x400020"}, []uint64{0x40003c, 0x400040, 0x400020}},
		{"b.eq", 0x540000e0, 0x400024, []string{"b.eq 0x200000c", "b 0x400028", "b 0x400040"}, []uint64{0x400024, 0x400028, 0x400040}},
		{"stp x29, x30, [sp, #-48]!", 0xa9bd7bfd, 0x400000, []string{"stp x29, x30, [sp,#-48]!", "b 0x400004"}, []uint64{0x400000, 0x400004}},
		{"paciasp", 0xd503233f, 0x400000, []string{"hint #0x19", "b 0x400004"}, []uint64{0x400000, 0x400004}},
	}
	for _, tc := range tests {
		fn := make([]byte, 0x100)
		binary.LittleEndian.PutUint32(fn[tc.addr&0xff:], tc.w)
		d, err := PlanDetour(fn, tc.addr&^0xff, tc.addr, nil)
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		code, err := d.Code(detour)
		if err != nil || len(code) != d.Size() {
			t.Errorf("%s: %v, %d bytes, Size %d", tc.name, err, len(code), d.Size())
			continue
		}
		var text []string
		for off := 4; off < len(code); off += 4 {
			inst, err := arm64asm.Decode(code[off:])
			if err != nil {
				t.Fatalf("%s: %v", tc.name, err)
			}
			text = append(text, gnu(inst, detour+uint64(off)))
		}
		if strings.Join(text, "; ") != strings.Join(tc.text, "; ") {
			t.Errorf("%s: %q, want %q", tc.name, text, tc.text)
		}
		if o, _, ok := d.Original(detour, detour); !ok || o != tc.addr {
			t.Errorf("%s: at the brk, goes to %#x %v", tc.name, o, ok)
		}
		for k, want := range tc.orig {
			if o, _, ok := d.Original(detour+4+uint64(4*k), detour); !ok || o != want {
				t.Errorf("%s: word %d goes to %#x %v, want %#x", tc.name, k, o, ok, want)
			}
		}
	}
	for _, w := range []uint32{0xd61f0180, 0xd63f01a0, 0xd65f03c0} { // br, blr, ret
		fn := binary.LittleEndian.AppendUint32(nil, w)
		if _, err := PlanDetour(fn, 0x400000, 0x400000, nil); err == nil {
			t.Errorf("%08x: a register branch covered", w)
		}
	}
}

// gnu is GNU syntax with branch targets as absolute addresses.
func gnu(inst arm64asm.Inst, pc uint64) string {
	text := arm64asm.GNUSyntax(inst)
	for _, arg := range inst.Args {
		if rel, ok := arg.(arm64asm.PCRel); ok {
			i := strings.LastIndex(text, " ")
			text = text[:i+1] + fmt.Sprintf("%#x", pc+uint64(int64(rel)))
		}
	}
	return text
}

// TestFilterArm64: the filter code, run by a small interpreter of the
// words it is made of, holds where Go's comparison does, for every
// operator, signed and unsigned, at the edges (0, ±1, the extremes) and
// for random values; and touches no flag (checkA64).
func TestFilterArm64(t *testing.T) {
	edges := []uint64{0, 1, 2, 1<<63 - 1, 1 << 63, ^uint64(0), ^uint64(1), 0x8000_0000, 0x7fff_ffff}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 40 {
		edges = append(edges, rng.Uint64())
	}
	ops := []FilterOp{OpEQ, OpNE, OpLT, OpLE, OpGT, OpGE, OpBand}
	for _, signed := range []bool{false, true} {
		for _, op := range ops {
			for _, c := range edges {
				f := &Filter{Kind: FilterCmp, Op: op, Const: c, Value: TallyValue{Reg: 19 * 8, Word: -1, Size: 8, Bits: 64, Signed: signed}}
				s := &RecordStub{}
				a := &a64{}
				fails := s.filter(a, f)
				a.mov(x9, 1)
				end := a.branch(brB, 0, 0, -1)
				for _, i := range fails {
					a.land(i)
				}
				a.mov(x9, 0)
				a.land(end)
				a.movReg(x10, x10) // where both go on
				checkA64(t, "filter", a.bytes(), 0)
				for _, v := range edges {
					var regs [32]uint64
					regs[19] = v
					if err := interpret(a.w, &regs); err != nil {
						t.Fatalf("%v", err)
					}
					if got, want := regs[9] == 1, holds(op, signed, v, c); got != want {
						t.Fatalf("signed %v: %#x op %d %#x: the code says %v, Go %v", signed, v, op, c, got, want)
					}
				}
			}
		}
	}
}

func holds(op FilterOp, signed bool, v, c uint64) bool {
	lt := v < c
	if signed {
		lt = int64(v) < int64(c)
	}
	switch op {
	case OpEQ:
		return v == c
	case OpNE:
		return v != c
	case OpLT:
		return lt
	case OpGE:
		return !lt
	case OpGT:
		return !lt && v != c
	case OpLE:
		return lt || v == c
	}
	return v&c != 0
}

// interpret runs the words the filter code is made of on regs (x31 reads
// as zero) until it leaves them.
func interpret(code []uint32, regs *[32]uint64) error {
	r := func(n uint32) uint64 {
		if n == 31 {
			return 0
		}
		return regs[n]
	}
	for pc := 0; pc >= 0 && pc < len(code); {
		w := code[pc]
		rd, rn, rm := w&31, w>>5&31, w>>16&31
		next := pc + 1
		switch {
		case w&0xffe0fc00 == 0xaa000000:
			regs[rd] = r(rn) | r(rm)
		case w&0xffe0fc00 == 0xca000000:
			regs[rd] = r(rn) ^ r(rm)
		case w&0xffe0fc00 == 0xca200000:
			regs[rd] = r(rn) ^ ^r(rm)
		case w&0xffe0fc00 == 0x8a000000:
			regs[rd] = r(rn) & r(rm)
		case w&0xffe0fc00 == 0x8a200000:
			regs[rd] = r(rn) &^ r(rm)
		case w&0xffe0fc00 == 0xcb000000:
			regs[rd] = r(rn) - r(rm)
		case w&0xff800000 == 0xd2800000: // movz
			regs[rd] = uint64(w>>5&0xffff) << (16 * (w >> 21 & 3))
		case w&0xff800000 == 0xf2800000: // movk
			sh := 16 * (w >> 21 & 3)
			regs[rd] = regs[rd]&^(0xffff<<sh) | uint64(w>>5&0xffff)<<sh
		case w&0xff800000 == 0x92800000: // movn
			regs[rd] = ^(uint64(w>>5&0xffff) << (16 * (w >> 21 & 3)))
		case w&0xfc000000 == 0x14000000:
			next = pc + int(int32(w<<6)>>6)
		case w&0xfe000000 == 0xb4000000: // cbz, cbnz
			if (r(rd) == 0) == (w&(1<<24) == 0) {
				next = pc + int(int32(w<<8)>>13)
			}
		case w&0x7e000000 == 0x36000000: // tbz, tbnz
			bit := w>>31<<5 | w>>19&31
			if (r(rd)>>bit&1 == 1) == (w&(1<<24) != 0) {
				next = pc + int(int32(w<<13)>>18)
			}
		default:
			return fmt.Errorf("word %d: %08x: not interpreted", pc, w)
		}
		pc = next
	}
	return nil
}
