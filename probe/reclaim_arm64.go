package probe

import (
	"encoding/binary"

	"golang.org/x/sys/unix"
)

// sigreturnCode is the code a signal handler returns through (the vDSO's
// __kernel_rt_sigreturn, glibc's and musl's alike: mov x8, #139; svc #0).
var sigreturnCode = [][]byte{{0x68, 0x11, 0x80, 0xd2, 0x01, 0x00, 0x00, 0xd4}}

// sigframePC: on arm64 the return address is a register (x30), saved
// wherever the handler's prologue puts it: no fixed place from it to the
// frame's pc. Any handler on a stack keeps the pages.
const sigframePC = -1

// sigContextFromCFA is where a signal frame's registers start from the
// CFA of the handler it returns from, which is the sp the handler was
// entered with, the frame's start (struct rt_sigframe): siginfo (128
// bytes), then ucontext's flags, link, stack, mask and padding up to its
// sigcontext (176), whose fault address comes before x0.
const sigContextFromCFA = 128 + 176 + 8

// sigframeRegPtrs are r's registers in a signal frame's order: x0-x30,
// sp, pc, pstate.
func sigframeRegPtrs(r *unix.PtraceRegs) []*uint64 {
	ptrs := make([]*uint64, 0, 34)
	for i := range r.Regs {
		ptrs = append(ptrs, &r.Regs[i])
	}
	return append(ptrs, &r.Sp, &r.Pc, &r.Pstate)
}

// goG is the g of a thread of a pure Go program with registers regs:
// arm64's Go code keeps it in x28, the runtime's too.
func (t *Tracer) goG(regs *unix.PtraceRegs) (uint64, bool) {
	return regs.Regs[28], regs.Regs[28] != 0
}

// framePC is where, from a word on a stack that is the address of the
// rt_sigreturn code, the signal frame above it saved the interrupted pc;
// -1 where that is not known (sigframePC). In a pure Go program every
// handler is runtime.sigtramp, whose first instruction, the Go
// assembler's prologue `str x30, [sp, #-N]!`, puts that address N bytes
// below the frame's start (the sp it was entered with): the context is
// at a known place from there. (A Go program's threads are often in a
// handler at a detach, SIGURG's; any frame kept its pages.)
func (t *Tracer) framePC() int {
	main := t.space.Main()
	if !main.PureGo() {
		return -1
	}
	sym, ok := main.Lookup("runtime.sigtramp.abi0")
	if !ok {
		if sym, ok = main.Lookup("runtime.sigtramp"); !ok {
			return -1
		}
	}
	var b [4]byte
	if _, err := t.proc.ReadAt(b[:], int64(sym.Addr+main.Bias)); err != nil {
		return -1
	}
	n, ok := preIndexedLRSave(binary.LittleEndian.Uint32(b[:]))
	if !ok {
		return -1
	}
	return n + sigContextFromCFA + 32*8 // (x0-x30, sp, then pc)
}

// preIndexedLRSave is N if insn is `str x30, [sp, #-N]!`.
func preIndexedLRSave(insn uint32) (int, bool) {
	// STR (immediate, 64-bit, pre-index): size 11, 111000, opc 00, imm9, 11, Rn, Rt.
	if insn&0xffe00c00 != 0xf8000c00 || insn&0x1f != 30 || insn>>5&0x1f != 31 {
		return 0, false
	}
	imm := int(insn>>12&0x1ff) - int(insn>>20&1)<<9 // (sign-extended)
	if imm >= 0 {
		return 0, false
	}
	return -imm, true
}
