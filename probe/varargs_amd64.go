package probe

import "golang.org/x/sys/unix"

// SysV x86-64: integers in %rdi, %rsi, %rdx, %rcx, %r8, %r9; doubles in
// %xmm0-7 (FXSAVE's layout puts xmm0 at 160); the rest on the stack
// from the word above the return address.
var intArgRegs = [...]func(r *unix.PtraceRegs) uint64{
	func(r *unix.PtraceRegs) uint64 { return r.Rdi },
	func(r *unix.PtraceRegs) uint64 { return r.Rsi },
	func(r *unix.PtraceRegs) uint64 { return r.Rdx },
	func(r *unix.PtraceRegs) uint64 { return r.Rcx },
	func(r *unix.PtraceRegs) uint64 { return r.R8 },
	func(r *unix.PtraceRegs) uint64 { return r.R9 },
}

func intArgReg(r *unix.PtraceRegs, i int) uint64 { return intArgRegs[i](r) }

const (
	vecArgRegs   = 8
	vecRegOffset = 160
)

func stackArgBase(r *unix.PtraceRegs) uint64 { return r.Rsp + 8 }
