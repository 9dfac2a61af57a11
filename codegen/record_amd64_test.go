package codegen

import (
	"encoding/binary"
	"slices"
	"testing"

	"golang.org/x/arch/x86/x86asm"

	"github.com/probedbg/probe/ring"
)

// TestRecordCodeDecodes: the routine and a stub are whole x86-64 code,
// and a thread stopped at any instruction of a stub can be taken back to
// the probed instruction (Rewind knows every one), its sp back where it
// was at the probe.
func TestRecordCodeDecodes(t *testing.T) {
	l := ring.Layout{Base: 0x7f0000000000, Slots: 256, RingSize: 4 << 20, TidOff: 0x2d0}
	const routine = 0x10000
	r := &RecordRoutine{Layout: l}
	code, err := r.Code(routine)
	if err != nil || len(code) != r.Size() {
		t.Fatalf("%v: %d bytes, Size %d", err, len(code), r.Size())
	}
	if tr := binary.LittleEndian.Uint64(code[len(code)-8:]); tr != Trampoline(routine) {
		t.Fatalf("the trampoline's address as data: %#x, want %#x", tr, Trampoline(routine))
	}
	insts := decodeAll(t, code[:len(code)-8], routine)
	for _, part := range []uint64{routine, TallyRoutine(routine), HookFrameRoutine(routine), HookRoutine(routine), Trampoline(routine), TrampolineTrap(routine)} {
		if _, ok := insts[part]; !ok {
			t.Errorf("%#x: not an instruction's start", part)
		}
	}
	if in := insts[TrampolineTrap(routine)]; in.Op != x86asm.INT {
		t.Errorf("the trampoline's trap: %v", in)
	}
	// Every branch of the routine lands on one of its instructions, and
	// every rip-relative operand reads the trampoline's address.
	for pc, in := range insts {
		if rel, ok := in.Args[0].(x86asm.Rel); ok && in.Op != x86asm.CALL {
			if _, ok := insts[pc+uint64(in.Len)+uint64(int64(rel))]; !ok {
				t.Errorf("%#x %v: lands between instructions", pc, in)
			}
		}
		for _, arg := range in.Args {
			if m, ok := arg.(x86asm.Mem); ok && m.Base == x86asm.RIP {
				if got := pc + uint64(in.Len) + uint64(m.Disp); got != routine+uint64(len(code)-8) {
					t.Errorf("%#x %v: reads %#x, not the trampoline's address", pc, in, got)
				}
			}
		}
	}
	// Another copy hooks with the first one's trampoline.
	other, _ := (&RecordRoutine{Layout: l, Trampoline: Trampoline(routine)}).Code(0x90000)
	if tr := binary.LittleEndian.Uint64(other[len(other)-8:]); tr != Trampoline(routine) {
		t.Fatalf("a second copy's trampoline: %#x, want %#x", tr, Trampoline(routine))
	}

	reads := []MemRead{{Reg: SavedRegs()[4], Off: 8, Len: 4}, {Reg: regOff[regRBX], Off: -16, Len: MemReadMax},
		{Reg: regOff[regRDI], Off: 8, Len: 8}, {Reg: -1, Via: 3, Off: 16, Len: 2}, {Reg: -1, Abs: true, Addr: 0x601000, Len: 8}}
	for _, hook := range []bool{false, true} {
		s := &RecordStub{Routine: routine, Next: 0x20000, Site: 7, Regs: SavedRegs()[:3], StackWords: 2, Hook: hook, Reads: reads, Rings: l.Base}
		if want := ring.RecordHeader + 8*(3+2+map[bool]int{false: 0, true: 1}[hook]+3+34+3+3+3+iovWords); s.Len() != want {
			t.Fatalf("hook %v: records of %d bytes, want %d", hook, s.Len(), want)
		}
		const at, sp = 0x11000, 0x7ffe0000
		code, err = s.Code(at)
		if err != nil || len(code) != s.Size() {
			t.Fatalf("hook %v: %v, %d bytes, Size %d", hook, err, len(code), s.Size())
		}
		stub := decodeAll(t, code, at)
		calls, syscalls, copies := 0, 0, 0
		for pc, in := range stub {
			switch in.Op {
			case x86asm.CALL:
				calls++
			case x86asm.SYSCALL:
				syscalls++
			case x86asm.MOVSB:
				// A copy that faults goes on at its read's system call.
				copies++
				if to, ok := s.Fixup(at, pc); !ok || stub[to].Op != x86asm.MOV {
					t.Errorf("hook %v: copy at %#x: fix-up %#x %v", hook, pc, to, ok)
				}
			}
		}
		if copies != len(reads) {
			t.Errorf("hook %v: %d copies, want one a read", hook, copies)
		}
		if _, ok := s.Fixup(at, at+5); ok {
			t.Errorf("a fix-up for an instruction that copies nothing")
		}
		if syscalls != len(reads) {
			t.Errorf("hook %v: %d system calls, want one a read", hook, syscalls)
		}
		if want := map[bool]int{false: 1, true: 2}[hook]; calls != want {
			t.Errorf("hook %v: %d calls, want %d", hook, calls, want)
		}
		// Follow sp through the straight-line code: where the thread is
		// at each instruction, Rewind must give back the sp of the probe.
		walk(t, code, sp, func(off int, rsp uint64) (StubRewind, bool) { return s.Rewind(at, at+uint64(off), rsp) })
	}
	for _, bad := range [][]MemRead{{{Reg: -1, Via: 1, Len: 8}}, {{Reg: regOff[regRDI], Len: 4}, {Reg: -1, Via: 1, Len: 8}}} {
		if _, err := (&RecordStub{Routine: routine, Next: 0x20000, Reads: bad, Rings: l.Base}).Code(0x11000); err == nil {
			t.Errorf("reads %+v: no error (a read based on itself, or on fewer than 8 bytes)", bad)
		}
	}

	// A tallying stub: one call, no system call, and the same rewinds.
	v := []TallyValue{
		{Reg: regOff[regRDI], Word: -1, Bits: 64, Size: 8},
		{Reg: regOff[regRBX], Word: -1, Shift: 8, Bits: 8, Size: 1, Signed: true},
		{Reg: -1, Word: 1, Bits: 64, Size: 4, BitField: true, Lsh: 3, Rsh: 27},
		{Reg: regOff[regRSP], Word: -1, Bits: 64, Size: 8},
	}
	s := &RecordStub{Routine: routine, Next: 0x20000, Site: 8, Rings: l.Base,
		Tallies: []Tally{{At: 0}, {At: 1, Value: &v[0]}, {At: 68, Value: &v[1]}, {At: 135, Value: &v[2]}, {At: 202, Value: &v[3]}}}
	const at, sp = 0x11000, 0x7ffe0000
	code, err = s.Code(at)
	if err != nil || len(code) != s.Size() {
		t.Fatalf("tallies: %v, %d bytes, Size %d", err, len(code), s.Size())
	}
	calls := 0
	for pc, in := range decodeAll(t, code, at) {
		switch in.Op {
		case x86asm.CALL:
			if calls++; pc+uint64(in.Len)+uint64(int64(in.Args[0].(x86asm.Rel))) != TallyRoutine(routine) {
				t.Errorf("%#x %v: not a call of the tally routine", pc, in)
			}
		case x86asm.SYSCALL:
			t.Errorf("%#x: a system call in a tallying stub", pc)
		}
	}
	if calls != 1 {
		t.Errorf("tallies: %d calls, want 1", calls)
	}
	walk(t, code, sp, func(off int, rsp uint64) (StubRewind, bool) { return s.Rewind(at, at+uint64(off), rsp) })
	// Filters: on a record stub (a hit it rejects is counted) and on a
	// tally; every branch lands on an instruction, and the rewinds hold.
	f := &Filter{Kind: FilterOr,
		L: &Filter{Kind: FilterNot, L: &Filter{Kind: FilterCmp, Value: v[1], Op: OpLT, Const: ^uint64(4)}},
		R: &Filter{Kind: FilterAnd, L: &Filter{Kind: FilterCmp, Value: v[0], Op: OpBand, Const: 0x10},
			R: &Filter{Kind: FilterCmp, Value: v[2], Op: OpGE, Const: 7}}}
	for _, fs := range []*RecordStub{
		{Routine: routine, Next: 0x20000, Site: 9, Regs: SavedRegs()[:2], Rings: l.Base, Filter: f, Rejected: 300},
		{Routine: routine, Next: 0x20000, Site: 10, Rings: l.Base, Tallies: []Tally{{At: 0}, {At: 1, Filter: f}, {At: 2, Value: &v[1], Filter: f}}},
	} {
		code, err := fs.Code(at)
		if err != nil {
			t.Fatalf("site %d: %v", fs.Site, err)
		}
		insts := decodeAll(t, code, at)
		for pc, in := range insts {
			if rel, ok := in.Args[0].(x86asm.Rel); ok && in.Op != x86asm.CALL {
				if to := pc + uint64(in.Len) + uint64(int64(rel)); to != fs.Next {
					if _, ok := insts[to]; !ok {
						t.Errorf("site %d: %#x %v: lands between instructions", fs.Site, pc, in)
					}
				}
			}
		}
		walk(t, code, sp, func(off int, rsp uint64) (StubRewind, bool) { return fs.Rewind(at, at+uint64(off), rsp) })
	}
	if _, err := (&RecordStub{Routine: routine, Next: 0x20000, Hook: true, Rings: l.Base, Filter: f}).Code(at); err == nil {
		t.Errorf("a filter on a stub that hooks the return: no error")
	}

	s.Tallies = append(s.Tallies, Tally{At: ring.TallyWords - 1, Value: &v[0]})
	if _, err := s.Code(at); err == nil {
		t.Errorf("a histogram past the counters: no error")
	}

	if rw := RoutineRewind(0x7ffe0000 - rsSP - 8); rw.SP != 0x7ffe0000 || rw.Area != 0x7ffe0000-rsSP {
		t.Fatalf("RoutineRewind: %+v", rw)
	}
	// The trampoline, entered just above the slot: Rewind gives that sp
	// back wherever the thread is in it, but at the int3.
	const slot = 0x7ffd0000
	code, _ = r.Code(routine)
	tramp := code[routineAt.trampoline:routineAt.trap]
	walk(t, tramp, slot+8, func(off int, rsp uint64) (StubRewind, bool) {
		return TrampolineRewind(routine, Trampoline(routine)+uint64(off), rsp, false)
	})
	if rw, _ := TrampolineRewind(routine, routine+5, slot-rsArea-8, true); rw.SP != slot+8 || rw.Area != slot-rsArea {
		t.Fatalf("TrampolineRewind in the record routine: %+v", rw)
	}
}

// walk follows sp through code entered at sp, which must come back to
// it, asking rewind at each instruction for the sp at the entry.
// TestRecordFrameEntry: a stub past plain -pg's prologue records sp,
// rbp and the stack words as at the entry (8(%rbp), (%rbp), 8(%rbp)
// up), and its hook takes the slot from the frame: HookFrameRoutine
// starts with lea 8(%rbp),%rcx and goes on where HookRoutine's own lea
// (from sp) does.
func TestRecordFrameEntry(t *testing.T) {
	l := ring.Layout{Base: 0x7f0000000000, Slots: 256, RingSize: 4 << 20, TidOff: 0x2d0}
	const routine, at = 0x10000, 0x11000
	code, _ := (&RecordRoutine{Layout: l}).Code(routine)
	insts := decodeAll(t, code[:len(code)-8], routine)
	lea, jmp := insts[HookFrameRoutine(routine)], insts[HookFrameRoutine(routine)+7]
	if lea.String() != "LEA RCX, [RBP+0x8]" || jmp.Op != x86asm.JMP {
		t.Fatalf("HookFrameRoutine: %v; %v", lea, jmp)
	}
	if body := HookFrameRoutine(routine) + 7 + uint64(jmp.Len) + uint64(int64(jmp.Args[0].(x86asm.Rel))); body != HookRoutine(routine)+uint64(insts[HookRoutine(routine)].Len) {
		t.Errorf("HookFrameRoutine goes on at %#x, HookRoutine's body is at %#x", body, HookRoutine(routine)+uint64(insts[HookRoutine(routine)].Len))
	}
	s := &RecordStub{Routine: routine, Next: 0x20000, Site: 7, Regs: []int{regOff[regRSP], regOff[regRBP], regOff[regRDI]}, StackWords: 2, Hook: true, FrameEntry: true, Rings: l.Base}
	code, err := s.Code(at)
	if err != nil || len(code) != s.Size() {
		t.Fatalf("%v, %d bytes, Size %d", err, len(code), s.Size())
	}
	var loads []string
	calls := map[uint64]bool{}
	for pc, in := range decodeAll(t, code, at) {
		if in.Op == x86asm.CALL {
			calls[pc+uint64(in.Len)+uint64(int64(in.Args[0].(x86asm.Rel)))] = true
		}
		if m, ok := in.Args[1].(x86asm.Mem); ok && m.Base == x86asm.RBP {
			loads = append(loads, in.String())
		}
	}
	slices.Sort(loads)
	want := []string{"LEA RAX, [RBP+0x8]", "MOV RAX, [RBP+0x10]", "MOV RAX, [RBP+0x8]", "MOV RAX, [RBP]"}
	if !slices.Equal(loads, want) {
		t.Errorf("reads through rbp: %q, want %q", loads, want)
	}
	if !calls[routine] || !calls[HookFrameRoutine(routine)] || len(calls) != 2 {
		t.Errorf("calls %v: want the routine and HookFrameRoutine", calls)
	}
}

func walk(t *testing.T, code []byte, sp uint64, rewind func(off int, rsp uint64) (StubRewind, bool)) {
	t.Helper()
	rsp := sp
	for off := 0; off < len(code); {
		in, err := x86asm.Decode(code[off:], 64)
		if err != nil {
			t.Fatalf("+%#x: %v", off, err)
		}
		if in.Op == x86asm.INT {
			break
		}
		rw, ok := rewind(off, rsp)
		if !ok || rw.SP != sp {
			t.Fatalf("+%#x %v: Rewind %+v %v, want sp %#x", off, in, rw, ok, sp)
		}
		if in.Op == x86asm.RET {
			break
		}
		switch in.Op {
		case x86asm.PUSH, x86asm.PUSHFQ:
			rsp -= 8
		case x86asm.POP, x86asm.POPFQ:
			rsp += 8
		case x86asm.LEA:
			if in.Args[0] == x86asm.RSP {
				rsp += uint64(int64(in.Args[1].(x86asm.Mem).Disp))
			}
		}
		off += in.Len
	}
}
