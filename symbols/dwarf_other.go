//go:build !amd64

package symbols

import (
	"encoding/binary"

	"github.com/go-delve/delve/pkg/dwarf/op"
	"golang.org/x/sys/unix"
)

// newDwarfRegs: only amd64 is mapped so far; elsewhere variables read as
// unavailable (only the PC is known).
func newDwarfRegs(_ *unix.PtraceRegs, _ []byte, pc, staticBase uint64) op.DwarfRegisters {
	regs := make([]*op.DwarfRegister, 33)
	regs[32] = op.DwarfRegisterFromUint64(pc)
	return *op.NewDwarfRegisters(staticBase, regs, binary.LittleEndian, 32, 31, 29, 30)
}
