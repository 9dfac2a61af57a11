package symbols

import (
	"encoding/binary"

	"github.com/go-delve/delve/pkg/dwarf/op"
	"golang.org/x/sys/unix"
)

// newDwarfRegs gives delve the registers of a stopped thread under their
// DWARF numbers (System V AMD64 psABI: 0 rax, 1 rdx, 2 rcx, 3 rbx, 4 rsi,
// 5 rdi, 6 rbp, 7 rsp, 8-15 r8-r15, 16 rip, 49 rflags, 50-55 es cs ss ds fs
// gs, 58/59 fs_base/gs_base). pc replaces rip: after an int3 the thread's
// rip is one past the probe. Floating-point and vector registers are not
// in PtraceRegs: values living there read as unavailable.
//
// xmm, if not nil, is the thread's SSE registers as FXSAVE lays them out
// (PTRACE_GETFPREGS): xmm0-15 are DWARF's 17-32, where C passes float
// and double arguments. Without them those read as unavailable.
func newDwarfRegs(r *unix.PtraceRegs, xmm []byte, pc, staticBase uint64) op.DwarfRegisters {
	vals := map[int]uint64{
		0: r.Rax, 1: r.Rdx, 2: r.Rcx, 3: r.Rbx, 4: r.Rsi, 5: r.Rdi, 6: r.Rbp, 7: r.Rsp,
		8: r.R8, 9: r.R9, 10: r.R10, 11: r.R11, 12: r.R12, 13: r.R13, 14: r.R14, 15: r.R15,
		16: pc, 49: r.Eflags, 50: r.Es, 51: r.Cs, 52: r.Ss, 53: r.Ds, 54: r.Fs, 55: r.Gs,
		58: r.Fs_base, 59: r.Gs_base,
	}
	regs := make([]*op.DwarfRegister, 60)
	for n, v := range vals {
		regs[n] = op.DwarfRegisterFromUint64(v)
	}
	const fxsaveXMM, dwarfXMM0 = 160, 17
	for i := 0; i < 16 && len(xmm) >= fxsaveXMM+16*(i+1); i++ {
		regs[dwarfXMM0+i] = op.DwarfRegisterFromBytes(xmm[fxsaveXMM+16*i : fxsaveXMM+16*(i+1)])
	}
	const rip, rsp, rbp = 16, 7, 6
	return *op.NewDwarfRegisters(staticBase, regs, binary.LittleEndian, rip, rsp, rbp, 0)
}
