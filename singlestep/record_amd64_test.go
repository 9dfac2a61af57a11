package singlestep

import (
	"testing"

	"golang.org/x/arch/x86/x86asm"
)

// TestRecordCodeDecodes: the routine and a stub are whole x86-64 code,
// and a thread stopped at any instruction of a stub can be taken back to
// the probed instruction (Rewind knows every one), its sp back where it
// was at the probe.
func TestRecordCodeDecodes(t *testing.T) {
	l := RecordLayout{Base: 0x7f0000000000, Slots: 256, RingSize: 4 << 20, TidOff: 0x2d0}
	r := &RecordRoutine{Layout: l}
	code, err := r.Code(0x10000)
	if err != nil {
		t.Fatal(err)
	}
	insts := decodeAll(t, code, 0x10000)
	// Every branch of the routine lands on one of its instructions.
	for pc, in := range insts {
		if rel, ok := in.Args[0].(x86asm.Rel); ok && in.Op != x86asm.CALL {
			if _, ok := insts[pc+uint64(in.Len)+uint64(int64(rel))]; !ok {
				t.Errorf("%#x %v: lands between instructions", pc, in)
			}
		}
	}
	s := &RecordStub{Routine: 0x10000, Next: 0x20000, Site: 7, Regs: SavedRegs()[:3], StackWords: 2}
	const at, sp = 0x11000, 0x7ffe0000
	code, err = s.Code(at)
	if err != nil {
		t.Fatal(err)
	}
	// Follow sp through the straight-line code: where the thread is at
	// each instruction, Rewind must give back the sp of the probe.
	rsp := uint64(sp)
	for off := 0; off < len(code); {
		in, err := x86asm.Decode(code[off:], 64)
		if err != nil {
			t.Fatalf("+%#x: %v", off, err)
		}
		rw, ok := s.Rewind(at, at+uint64(off), rsp)
		if !ok || rw.SP != sp {
			t.Fatalf("+%#x %v: Rewind %+v %v, want sp %#x", off, in, rw, ok, sp)
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
	if rsp != sp {
		t.Fatalf("the stub leaves sp at %#x, want %#x", rsp, sp)
	}
	if rw := RoutineRewind(sp - mbRedZone - 7*8 - 8); rw.SP != sp || rw.Area != sp-mbRedZone-7*8 {
		t.Fatalf("RoutineRewind: %+v", rw)
	}
}
