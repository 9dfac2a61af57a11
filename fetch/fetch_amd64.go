package fetch

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// Registers are read as words of unix.PtraceRegs (struct user_regs_struct),
// which is 27 uint64 on amd64.
const fetchNumRegs = 27

func regIndex(off uintptr) uint8 { return uint8(off / 8) }

var (
	regResult  = regIndex(unsafe.Offsetof(unix.PtraceRegs{}.Rax))
	regResult2 = regIndex(unsafe.Offsetof(unix.PtraceRegs{}.Rdx))
	regSP      = regIndex(unsafe.Offsetof(unix.PtraceRegs{}.Rsp))
	regPC      = regIndex(unsafe.Offsetof(unix.PtraceRegs{}.Rip))
	regFlags   = regIndex(unsafe.Offsetof(unix.PtraceRegs{}.Eflags))
)

// fetchArgRegs are the SysV AMD64 integer argument registers, for $arg1-$arg6.
var fetchArgRegs = [6]uint8{
	regIndex(unsafe.Offsetof(unix.PtraceRegs{}.Rdi)),
	regIndex(unsafe.Offsetof(unix.PtraceRegs{}.Rsi)),
	regIndex(unsafe.Offsetof(unix.PtraceRegs{}.Rdx)),
	regIndex(unsafe.Offsetof(unix.PtraceRegs{}.Rcx)),
	regIndex(unsafe.Offsetof(unix.PtraceRegs{}.R8)),
	regIndex(unsafe.Offsetof(unix.PtraceRegs{}.R9)),
}

// firstStackArg is the stack slot of the first argument not in a
// register at a function's entry: [sp] is the return address.
const firstStackArg = 1

// syscallArgRegs hold a system call's arguments at its entry (the kernel's
// x86-64 syscall ABI: r10 instead of rcx, which syscall overwrites).
var syscallArgRegs = [6]uint8{
	regIndex(unsafe.Offsetof(unix.PtraceRegs{}.Rdi)),
	regIndex(unsafe.Offsetof(unix.PtraceRegs{}.Rsi)),
	regIndex(unsafe.Offsetof(unix.PtraceRegs{}.Rdx)),
	regIndex(unsafe.Offsetof(unix.PtraceRegs{}.R10)),
	regIndex(unsafe.Offsetof(unix.PtraceRegs{}.R8)),
	regIndex(unsafe.Offsetof(unix.PtraceRegs{}.R9)),
}

// fetchRegs maps every name %REG accepts to its register. The kernel's
// x86-64 names (arch/x86/kernel/ptrace.c regoffset_table: ax bx cx dx si
// di bp sp r8-r15 ip flags cs ss orig_ax) are the whole 64-bit registers,
// so "%ax" and "%di" are rax and rdi, not their 16-bit halves. The
// assembler names are accepted too, as perf probe accepts them: rax..r15,
// rip, the 32-bit eax..r15d, the 16-bit r8w..r15w and the 8-bit al..r15b
// (and ah, bh, ch, dh). A part of a register defaults to the type of its
// width (x32, x16, x8).
var fetchRegs = func() map[string]regDesc {
	m := map[string]regDesc{}
	word := func(off uintptr) uint8 { return regIndex(off) }
	var r unix.PtraceRegs
	legacy := []struct {
		kernel, r64, r32, r8 string
		off                  uintptr
	}{
		{"ax", "rax", "eax", "al", unsafe.Offsetof(r.Rax)},
		{"bx", "rbx", "ebx", "bl", unsafe.Offsetof(r.Rbx)},
		{"cx", "rcx", "ecx", "cl", unsafe.Offsetof(r.Rcx)},
		{"dx", "rdx", "edx", "dl", unsafe.Offsetof(r.Rdx)},
		{"si", "rsi", "esi", "sil", unsafe.Offsetof(r.Rsi)},
		{"di", "rdi", "edi", "dil", unsafe.Offsetof(r.Rdi)},
		{"bp", "rbp", "ebp", "bpl", unsafe.Offsetof(r.Rbp)},
		{"sp", "rsp", "esp", "spl", unsafe.Offsetof(r.Rsp)},
	}
	for _, l := range legacy {
		i := word(l.off)
		m[l.kernel] = regDesc{i, 0, 64}
		m[l.r64] = regDesc{i, 0, 64}
		m[l.r32] = regDesc{i, 0, 32}
		m[l.r8] = regDesc{i, 0, 8}
	}
	for _, h := range []struct {
		name string
		off  uintptr
	}{{"ah", unsafe.Offsetof(r.Rax)}, {"bh", unsafe.Offsetof(r.Rbx)}, {"ch", unsafe.Offsetof(r.Rcx)}, {"dh", unsafe.Offsetof(r.Rdx)}} {
		m[h.name] = regDesc{word(h.off), 8, 8}
	}
	numbered := []uintptr{
		unsafe.Offsetof(r.R8), unsafe.Offsetof(r.R9), unsafe.Offsetof(r.R10), unsafe.Offsetof(r.R11),
		unsafe.Offsetof(r.R12), unsafe.Offsetof(r.R13), unsafe.Offsetof(r.R14), unsafe.Offsetof(r.R15),
	}
	for n, off := range numbered {
		name := "r" + string(rune('0'+8+n))
		if n >= 2 {
			name = "r1" + string(rune('0'+n-2))
		}
		i := word(off)
		m[name] = regDesc{i, 0, 64}
		m[name+"d"] = regDesc{i, 0, 32}
		m[name+"w"] = regDesc{i, 0, 16}
		m[name+"b"] = regDesc{i, 0, 8}
		m[name+"l"] = regDesc{i, 0, 8}
	}
	full := []struct {
		names []string
		off   uintptr
	}{
		{[]string{"ip", "rip"}, unsafe.Offsetof(r.Rip)},
		{[]string{"flags", "eflags", "rflags"}, unsafe.Offsetof(r.Eflags)},
		{[]string{"orig_ax", "orig_rax"}, unsafe.Offsetof(r.Orig_rax)},
		{[]string{"cs"}, unsafe.Offsetof(r.Cs)},
		{[]string{"ss"}, unsafe.Offsetof(r.Ss)},
		{[]string{"ds"}, unsafe.Offsetof(r.Ds)},
		{[]string{"es"}, unsafe.Offsetof(r.Es)},
		{[]string{"fs"}, unsafe.Offsetof(r.Fs)},
		{[]string{"gs"}, unsafe.Offsetof(r.Gs)},
		{[]string{"fs_base"}, unsafe.Offsetof(r.Fs_base)},
		{[]string{"gs_base"}, unsafe.Offsetof(r.Gs_base)},
	}
	for _, f := range full {
		for _, n := range f.names {
			m[n] = regDesc{word(f.off), 0, 64}
		}
	}
	return m
}()
