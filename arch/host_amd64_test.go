package arch

import (
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// TestHostWords checks x86-64's words against ptrace's struct.
func TestHostWords(t *testing.T) {
	var r unix.PtraceRegs
	if int(unsafe.Sizeof(r)/8) != AMD64.Words {
		t.Fatalf("PtraceRegs has %d words, the table %d", unsafe.Sizeof(r)/8, AMD64.Words)
	}
	for name, off := range map[string]uintptr{
		"rax": unsafe.Offsetof(r.Rax), "rbx": unsafe.Offsetof(r.Rbx), "rcx": unsafe.Offsetof(r.Rcx),
		"rdx": unsafe.Offsetof(r.Rdx), "rsi": unsafe.Offsetof(r.Rsi), "rdi": unsafe.Offsetof(r.Rdi),
		"rbp": unsafe.Offsetof(r.Rbp), "rsp": unsafe.Offsetof(r.Rsp), "r8": unsafe.Offsetof(r.R8),
		"r9": unsafe.Offsetof(r.R9), "r10": unsafe.Offsetof(r.R10), "r11": unsafe.Offsetof(r.R11),
		"r12": unsafe.Offsetof(r.R12), "r13": unsafe.Offsetof(r.R13), "r14": unsafe.Offsetof(r.R14),
		"r15": unsafe.Offsetof(r.R15), "rip": unsafe.Offsetof(r.Rip), "eflags": unsafe.Offsetof(r.Eflags),
		"orig_rax": unsafe.Offsetof(r.Orig_rax), "cs": unsafe.Offsetof(r.Cs), "ss": unsafe.Offsetof(r.Ss),
		"ds": unsafe.Offsetof(r.Ds), "es": unsafe.Offsetof(r.Es), "fs": unsafe.Offsetof(r.Fs),
		"gs": unsafe.Offsetof(r.Gs), "fs_base": unsafe.Offsetof(r.Fs_base), "gs_base": unsafe.Offsetof(r.Gs_base),
	} {
		if got := AMD64.Regs[name].Word; uintptr(got)*8 != off {
			t.Errorf("%%%s: word %d, PtraceRegs has it at byte %d", name, got, off)
		}
	}
}
