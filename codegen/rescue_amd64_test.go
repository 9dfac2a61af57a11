package codegen

import (
	"testing"

	"golang.org/x/arch/x86/x86asm"
	"golang.org/x/sys/unix"
)

// The handler decodes whole, its every branch lands on one of its own
// instructions, it reaches the page at Page only, the restorer is
// rt_sigreturn, and the guard's stub a syscall then an int3.
func TestRescueCode(t *testing.T) {
	const at, page = 0x7f0000000000, 0x7f0000100000
	code, entries, err := (&RescueCode{Page: page}).Code(at)
	restorer := entries.Restorer
	if err != nil {
		t.Fatal(err)
	}
	starts := map[uint64]x86asm.Inst{}
	var order []uint64
	for off := 0; off < len(code); {
		in, err := x86asm.Decode(code[off:], 64)
		if err != nil {
			t.Fatalf("+%#x: %v", off, err)
		}
		starts[at+uint64(off)] = in
		order = append(order, at+uint64(off))
		off += in.Len
	}
	for _, pc := range order {
		in := starts[pc]
		switch in.Op {
		case x86asm.JMP, x86asm.JE, x86asm.JNE, x86asm.JS, x86asm.JBE, x86asm.CALL:
			rel, ok := in.Args[0].(x86asm.Rel)
			if in.Op == x86asm.JMP && in.Args[0] == x86asm.RAX {
				continue // to the program's handler
			}
			if !ok {
				t.Errorf("%#x: %v: not a relative branch", pc, in)
				continue
			}
			if to := pc + uint64(in.Len) + uint64(int64(rel)); starts[to].Len == 0 {
				t.Errorf("%#x: %v lands at %#x, not an instruction of the handler", pc, in, to)
			}
		case x86asm.LEA:
			if m, ok := in.Args[1].(x86asm.Mem); ok && m.Base == x86asm.RIP {
				if to := pc + uint64(in.Len) + uint64(m.Disp); to != page {
					t.Errorf("%#x: lea reaches %#x, want the page %#x", pc, to, page)
				}
			}
		}
	}
	if in := starts[restorer]; in.Op != x86asm.MOV || in.Args[1] != x86asm.Imm(unix.SYS_RT_SIGRETURN) {
		t.Errorf("restorer at %#x: %v, want mov $SYS_rt_sigreturn,%%eax", restorer, in)
	}
	if in := starts[restorer+5]; in.Op != x86asm.SYSCALL {
		t.Errorf("restorer at %#x: %v then, want syscall", restorer, in)
	}
	if stub := code[entries.Syscall-at:]; string(stub) != "\x0f\x05\xcc" {
		t.Errorf("the guard's stub at %#x: % x, want syscall; int3, the code's end", entries.Syscall, stub)
	}
}
