package symbols

import (
	"encoding/binary"
	"unsafe"

	"github.com/go-delve/delve/pkg/dwarf/op"
	"golang.org/x/sys/unix"

	"github.com/probedbg/probe/arch"
)

// The host CPU's DWARF register numbers (arch.Host): its frame pointer,
// stack pointer and return address column.
var (
	dwarfFP = uint64(arch.Host.Dwarf.FP)
	dwarfSP = uint64(arch.Host.Dwarf.SP)
	dwarfLR = uint64(arch.Host.Dwarf.Return)
)

// linkRegister: a call leaves the return address in a register (arm64:
// x30), not on the stack.
var linkRegister = arch.Host.LinkRegister

// entryRule is the CFI of a called function's first instruction: the
// return address in the link register; or, pushed by the call, just
// below the CFA, which is the stack pointer past it.
var entryRule = func() CallerRule {
	if linkRegister {
		return CallerRule{RetInLR: true}
	}
	return CallerRule{CFAOffset: 8, RetOffset: -8}
}()

// newDwarfRegs gives delve the registers of a stopped thread under their
// DWARF numbers (arch.Dwarf). pc replaces the thread's: after an int3
// the thread's rip is one past the probe.
//
// vregs, if not nil, is the thread's FP register set (PTRACE_GETFPREGS,
// NT_PRFPREG), whose SIMD registers are where C passes float and double
// arguments. Without them those read as unavailable.
func newDwarfRegs(r *unix.PtraceRegs, vregs []byte, pc, staticBase uint64) op.DwarfRegisters {
	d := arch.Host.Dwarf
	words := unsafe.Slice((*uint64)(unsafe.Pointer(r)), unsafe.Sizeof(*r)/8)
	n := d.Vector0 + d.Vectors
	for num := range d.Regs {
		n = max(n, num+1)
	}
	regs := make([]*op.DwarfRegister, n)
	for num, w := range d.Regs {
		regs[num] = op.DwarfRegisterFromUint64(words[w])
	}
	regs[d.PC] = op.DwarfRegisterFromUint64(pc)
	for i := 0; i < d.Vectors && len(vregs) >= d.VectorsAt+16*(i+1); i++ {
		regs[d.Vector0+i] = op.DwarfRegisterFromBytes(vregs[d.VectorsAt+16*i : d.VectorsAt+16*(i+1)])
	}
	var lr uint64 // none where a call pushes the return address
	if linkRegister {
		lr = dwarfLR
	}
	return *op.NewDwarfRegisters(staticBase, regs, binary.LittleEndian, uint64(d.PC), dwarfSP, dwarfFP, lr)
}
