package fetch

import (
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/probedbg/probe/arch"
)

// Registers are read as the words of unix.PtraceRegs, as the host's
// table (arch.Host) names them.
const fetchNumRegs = int(unsafe.Sizeof(unix.PtraceRegs{}) / 8)

var (
	regResult  = arch.Host.Result  // a function's return value
	regResult2 = arch.Host.Result2 // its second word
	regSP      = arch.Host.SP
	regPC      = arch.Host.PC
	regFlags   = arch.Host.Flags

	// fetchArgRegs are the integer argument registers, for $arg1..;
	// syscallArgRegs a system call's at its entry.
	fetchArgRegs   = arch.Host.ArgRegs
	syscallArgRegs = arch.Host.SyscallArgRegs
	// firstStackArg is the stack word of the first argument not in a
	// register at a function's entry (x86-64: [sp] is the return
	// address).
	firstStackArg = arch.Host.FirstStackArg

	// fetchRegs maps every name %REG accepts to its register.
	fetchRegs = func() map[string]regDesc {
		m := make(map[string]regDesc, len(arch.Host.Regs))
		for name, r := range arch.Host.Regs {
			m[name] = regDesc{r.Word, r.Shift, r.Bits}
		}
		return m
	}()
)

func fetchRegWord(r *unix.PtraceRegs, i uint8) uint64 {
	return (*[fetchNumRegs]uint64)(unsafe.Pointer(r))[int(i)%fetchNumRegs]
}
