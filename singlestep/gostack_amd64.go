package singlestep

import "golang.org/x/arch/x86/x86asm"

// GoStackCheckEnd returns the offset, in a Go function's code, of the
// first instruction after its stack-bound check (`cmp 0x10(%r14),%rsp;
// jbe morestack`), or 0 if it has none. A function that grows its stack
// restarts from its entry, so an entry probe placed there would fire twice
// for one call; after the check it fires once, and sp still points at the
// return address.
func GoStackCheckEnd(code []byte) int {
	off := 0
	sawCheck := false
	for i := 0; i < 4 && off < len(code); i++ {
		inst, err := x86asm.Decode(code[off:], 64)
		if err != nil {
			return 0
		}
		off += inst.Len
		switch {
		case inst.Op == x86asm.CMP && usesG(inst):
			sawCheck = true
		case inst.Op == x86asm.JBE && sawCheck:
			return off
		}
	}
	return 0
}

// usesG reports whether an instruction reads memory through R14, Go's g
// register.
func usesG(inst x86asm.Inst) bool {
	for _, a := range inst.Args {
		if m, ok := a.(x86asm.Mem); ok && m.Base == x86asm.R14 {
			return true
		}
	}
	return false
}
