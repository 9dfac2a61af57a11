package symbols

import (
	"encoding/binary"

	"github.com/go-delve/delve/pkg/dwarf/op"
	"golang.org/x/sys/unix"
)

// newDwarfRegs gives delve the registers of a stopped thread under their
// DWARF numbers (DWARF for the Arm 64-bit Architecture: 0-30 x0-x30, 31
// sp, 32 pc, 64-95 v0-v31). pc is the probe's address.
//
// vregs, if not nil, is the thread's SIMD registers as NT_PRFPREG lays
// them out (struct user_fpsimd_state: v0-v31, 16 bytes each, first):
// where C passes float and double arguments. Without them those read as
// unavailable.
func newDwarfRegs(r *unix.PtraceRegs, vregs []byte, pc, staticBase uint64) op.DwarfRegisters {
	const dwarfSP, dwarfPC, dwarfV0 = 31, 32, 64
	regs := make([]*op.DwarfRegister, dwarfV0+32)
	for i, v := range r.Regs {
		regs[i] = op.DwarfRegisterFromUint64(v)
	}
	regs[dwarfSP] = op.DwarfRegisterFromUint64(r.Sp)
	regs[dwarfPC] = op.DwarfRegisterFromUint64(pc)
	for i := 0; i < 32 && len(vregs) >= 16*(i+1); i++ {
		regs[dwarfV0+i] = op.DwarfRegisterFromBytes(vregs[16*i : 16*(i+1)])
	}
	return *op.NewDwarfRegisters(staticBase, regs, binary.LittleEndian, dwarfPC, dwarfSP, 29, 30)
}
