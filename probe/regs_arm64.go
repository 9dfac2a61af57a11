package probe

import (
	"golang.org/x/sys/unix"

	"github.com/probedbg/probe/fetch"
)

// The arm64 registers of roles the tracer knows by name.

// goRegister holds a Go thread's current g (ABIInternal: x28).
func goRegister(r *unix.PtraceRegs) uint64 { return r.Regs[28] }

// The generated-code mechanisms arm64 has: record stubs, each behind a
// `b` (codegen/record_arm64.go), which hook returns, read memory,
// count and filter. No mailbox (its stand-ins below keep the code that
// serves it compiling; none is reached), no detour that traps (a brk
// leaves pc at itself: the tracer would write pc anyway, as for a plain
// brk).
const (
	mailboxCode = false
	trapDetours = false
	readsFSBase = false // tpidr_el0 is always readable at EL0
	cpuFromRseq = true
)

// cloneSetsTLS reports whether the clone or clone3 system call that a
// thread with registers r is stopped in (at its clone event) gives the
// new thread TLS of its own (CLONE_SETTLS); read reads a word of memory
// (clone3's flags). Another call, or flags it cannot read: true.
func cloneSetsTLS(r *unix.PtraceRegs, read func(addr uint64) (uint64, bool)) bool {
	switch r.Regs[8] {
	case unix.SYS_CLONE:
		return r.Regs[0]&unix.CLONE_SETTLS != 0
	case unix.SYS_CLONE3:
		flags, ok := read(r.Regs[0]) // struct clone_args starts with its flags
		return !ok || flags&unix.CLONE_SETTLS != 0
	}
	return true
}

// tidSearch is where findTidOffset looks for the thread id, from the
// thread pointer: glibc's struct pthread lies just below tpidr_el0 on
// arm64 (TLS variant I: the thread pointer is the TCB's, after it).
// glibcTidOff is its tid (at 0xd0) from tpidr_el0, the struct 0x740
// bytes below it in Debian's glibc (pthread_self: mrs x0, tpidr_el0;
// sub x0, x0, #0x740).
const tidSearch, tidSearchEnd, glibcTidOff = -0x1000, 0, 0xd0 - 0x740

func scratch(r *unix.PtraceRegs) uint64       { return r.Regs[16] }
func setScratch(r *unix.PtraceRegs, v uint64) { r.Regs[16] = v }

func mailboxSlotReg(r *unix.PtraceRegs) uint64 { return 0 }
func reblockSlotReg(r *unix.PtraceRegs) uint64 { return 0 }

func returnFromSyscall(r *unix.PtraceRegs, pc uint64) { r.Pc, r.Regs[0] = pc, 0 }

func clearTrapFlag(r *unix.PtraceRegs) bool { return false }

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
func returnNow(r *unix.PtraceRegs, mem fetch.Memory, value uint64) error {
	const btype = 3 << 10
	r.Pc, r.Regs[0] = r.Regs[30], value
	r.Pstate &^= btype
	return nil
}
