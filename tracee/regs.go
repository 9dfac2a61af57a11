package tracee

import (
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/probedbg/probe/arch"
)

// The register set by role, from the CPU's table (arch.Host); the
// program counter is unix.PtraceRegs' own PC and SetPC.

// word is register w of r, as the table numbers it.
func word(r *unix.PtraceRegs, w uint8) *uint64 {
	return &(*[unsafe.Sizeof(unix.PtraceRegs{}) / 8]uint64)(unsafe.Pointer(r))[w]
}

// SP returns the stack pointer.
func SP(r *unix.PtraceRegs) uint64 { return *word(r, arch.Host.SP) }

// SetSP sets the stack pointer.
func SetSP(r *unix.PtraceRegs, v uint64) { *word(r, arch.Host.SP) = v }

// FP returns the frame pointer.
func FP(r *unix.PtraceRegs) uint64 { return *word(r, arch.Host.FP) }

// Result returns a function's or a system call's return value.
func Result(r *unix.PtraceRegs) uint64 { return *word(r, arch.Host.Result) }

// SetResult sets the result register (a function's or a system call's).
func SetResult(r *unix.PtraceRegs, v uint64) { *word(r, arch.Host.Result) = v }

// SetResults sets a function's two return words.
func SetResults(r *unix.PtraceRegs, a, b uint64) {
	*word(r, arch.Host.Result), *word(r, arch.Host.Result2) = a, b
}

// SyscallNr returns the number of the system call a thread is stopped in
// (x86-64: orig_rax, as the result takes rax by the exit, negative
// outside a call; arm64: x8, which the kernel leaves alone across it).
func SyscallNr(r *unix.PtraceRegs) int64 { return int64(*word(r, arch.Host.SyscallNr)) }

// SyscallArg returns argument i (0-5) of the system call at its entry (on
// arm64 x0 is the result by its exit).
func SyscallArg(r *unix.PtraceRegs, i int) uint64 {
	return *word(r, arch.Host.SyscallArgRegs[i])
}
