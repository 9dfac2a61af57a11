package probe

import (
	"encoding/binary"
	"fmt"

	"golang.org/x/sys/unix"

	"github.com/probedbg/probe/fetch"
)

// The x86-64 registers of the mechanisms only amd64 has: the mailbox, jump
// optimisation and in-process recording, whose generated code is x86.

// The generated-code mechanisms x86-64 has: all of them.
const (
	mailboxCode = true // the mailbox (mailbox.go)
	trapDetours = true // detours that trap, with rip past the int3 (optimize.go)
	// readsFSBase: the code reads the thread pointer with rdfsbase,
	// which the kernel must allow.
	readsFSBase = true
	// cpuFromRseq: the records' CPU is read from the rseq area (rdtscp
	// gives it here).
	cpuFromRseq = false
)

// goRegister holds a Go thread's current g (ABIInternal: r14).
func goRegister(r *unix.PtraceRegs) uint64 { return r.R14 }

// cloneSetsTLS reports whether the clone or clone3 system call that a
// thread with registers r is stopped in (at its clone event) gives the
// new thread TLS of its own (CLONE_SETTLS); read reads a word of memory
// (clone3's flags). Another call, or flags it cannot read: true.
func cloneSetsTLS(r *unix.PtraceRegs, read func(addr uint64) (uint64, bool)) bool {
	switch r.Orig_rax {
	case unix.SYS_CLONE:
		return r.Rdi&unix.CLONE_SETTLS != 0
	case unix.SYS_CLONE3:
		flags, ok := read(r.Rdi) // struct clone_args starts with its flags
		return !ok || flags&unix.CLONE_SETTLS != 0
	}
	return true
}

// tidSearch is where findTidOffset looks for the thread id, from the
// thread pointer (%fs base): glibc's struct pthread starts there.
const tidSearch, tidSearchEnd, glibcTidOff = 0, 0x800, 0x2d0

// scratch is the register the detours and stubs use for themselves (r11,
// which the SysV ABI has callers give up at every call).
func scratch(r *unix.PtraceRegs) uint64 { return r.R11 }

func setScratch(r *unix.PtraceRegs, v uint64) { r.R11 = v }

// mailboxSlotReg holds the mailbox slot at the mailbox traps (rcx), and
// reblockSlotReg at the re-block after a trap-state change (r8).
func mailboxSlotReg(r *unix.PtraceRegs) uint64 { return r.Rcx }
func reblockSlotReg(r *unix.PtraceRegs) uint64 { return r.R8 }

// returnFromSyscall leaves a thread as a system call returning 0 at pc.
func returnFromSyscall(r *unix.PtraceRegs, pc uint64) { r.Rip, r.Rax = pc, 0 }

// clearTrapFlag clears the single-step flag (TF) and reports whether it
// was set.
func clearTrapFlag(r *unix.PtraceRegs) bool {
	const tf = 1 << 8
	set := r.Eflags&tf != 0
	r.Eflags &^= tf
	return set
}

// restartSequences: none in Go's amd64 code (gorestart.go).
const restartSequences = false

func startsRestart(insn []byte) bool { return false }
func continuesRestart(w uint32) bool { return false }

// returnNow makes a thread stopped at a function's entry return value
// to its caller as the function's `ret` would: the return address popped
// from the stack, the result in %rax.
func returnNow(r *unix.PtraceRegs, mem fetch.Memory, value uint64) error {
	var b [8]byte
	if _, err := mem.ReadAt(b[:], int64(r.Rsp)); err != nil {
		return fmt.Errorf("read the return address at %#x: %w", r.Rsp, err)
	}
	r.Rip, r.Rsp, r.Rax = binary.LittleEndian.Uint64(b[:]), r.Rsp+8, value
	return nil
}
