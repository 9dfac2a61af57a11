package probe

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// The arm64 registers of roles the tracer knows by name.

// goRegister holds a Go thread's current g (ABIInternal: x28).
func goRegister(r *unix.PtraceRegs) uint64 { return r.Regs[28] }

// On arm64 the mailbox, jump optimisation and in-process recording do not
// exist yet (their generated code is x86-64's): every probe is a brk.
// The stand-ins below keep the code that serves them compiling; none is
// reached.

const nativeCode = false

// cloneSetsTLS: only in-process recording asks, and arm64 has none yet.
func cloneSetsTLS(r *unix.PtraceRegs, read func(addr uint64) (uint64, bool)) bool { return true }

// threadPointer is 0: tpidr_el0 is not among the general registers.
func threadPointer(r *unix.PtraceRegs) uint64 { return 0 }

func scratch(r *unix.PtraceRegs) uint64       { return r.Regs[16] }
func setScratch(r *unix.PtraceRegs, v uint64) { r.Regs[16] = v }

func mailboxSlotReg(r *unix.PtraceRegs) uint64 { return 0 }
func reblockSlotReg(r *unix.PtraceRegs) uint64 { return 0 }

func returnFromSyscall(r *unix.PtraceRegs, pc uint64) { r.Pc, r.Regs[0] = pc, 0 }

func clearTrapFlag(r *unix.PtraceRegs) bool { return false }

var (
	pcOff    = int(unsafe.Offsetof(unix.PtraceRegs{}.Pc))
	flagsOff = int(unsafe.Offsetof(unix.PtraceRegs{}.Pstate))
)

// restartSequences: Go's arm64 code has them (gorestart.go).
const restartSequences = true

// startsRestart reports whether an instruction writes x27, Go's REGTMP
// (adrp, movz, movk, add... its destination in bits 0-4).
func startsRestart(insn []byte) bool {
	return len(insn) == 4 && insn[0]&0x1f == 27
}

// continuesRestart reports whether an instruction reads x27: as the base
// of a load or store, or the source of an add or a movk (bits 5-9, or its
// destination for movk).
func continuesRestart(w uint32) bool {
	return w>>5&0x1f == 27 || w&0x1f == 27 && w&0x7f800000 == 0x72800000
}

// returnNow makes a thread stopped at a function's entry return value
// to its caller as the function's `ret` would: to the link register,
// which the prologue has not yet saved (nor signed), the result in x0,
// PSTATE.BTYPE cleared as a ret leaves it.
func returnNow(r *unix.PtraceRegs, mem Memory, value uint64) error {
	const btype = 3 << 10
	r.Pc, r.Regs[0] = r.Regs[30], value
	r.Pstate &^= btype
	return nil
}
