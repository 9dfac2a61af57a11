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

// fpsimdRecord is the first word of a signal frame's FP/SIMD record,
// the first record after the interrupted registers (struct
// fpsimd_context's head: FPSIMD_MAGIC, and its size, 528), by which
// sigContexts finds a frame: 280 bytes before it are x0, then x1-x30, sp,
// pc and pstate (struct sigcontext, as unix.PtraceRegs lays them out).
const (
	fpsimdRecord   = 0x46508001 | 528<<32
	fpsimdFromRegs = 280
)

// sigContexts returns where, in a stack's words (stackWords), the
// registers of each signal frame on it start (sigframeRegPtrs' order).
func (t *Tracer) sigContexts(buf []byte, ms *mapsSummary, code map[uint64]bool) []int {
	var at []int
	for i := fpsimdFromRegs; i+8 <= len(buf); i += 8 {
		if binary.LittleEndian.Uint64(buf[i:]) == fpsimdRecord {
			at = append(at, i-fpsimdFromRegs)
		}
	}
	return at
}

// sigframeRegPtrs are r's registers in a signal frame's order: x0-x30,
// sp, pc, pstate.
func sigframeRegPtrs(r *unix.PtraceRegs) []*uint64 {
	ptrs := make([]*uint64, 0, 34)
	for i := range r.Regs {
		ptrs = append(ptrs, &r.Regs[i])
	}
	return append(ptrs, &r.Sp, &r.Pc, &r.Pstate)
}
