package probe

import "golang.org/x/sys/unix"

// sigreturnCode is the code a signal handler returns through:
// glibc's __restore_rt (mov $15,%rax; syscall) and musl's (mov $15,%eax).
var sigreturnCode = [][]byte{
	{0x48, 0xc7, 0xc0, 0x0f, 0x00, 0x00, 0x00, 0x0f, 0x05},
	{0xb8, 0x0f, 0x00, 0x00, 0x00, 0x0f, 0x05},
}

// sigframeRegsAt is where the interrupted registers start from the
// return address at the bottom of a signal frame: after ucontext's flags,
// link and stack (40 bytes); sigframePC is where rip is among them.
const (
	sigframeRegsAt = 8 + 40
	sigframePC     = sigframeRegsAt + 16*8
)

// sigContextFromCFA is where a signal frame's registers start from the
// CFA of the handler it returns from: its return address (the frame's
// bottom) is just below the CFA.
const sigContextFromCFA = sigframeRegsAt - 8

// sigframeRegPtrs are r's registers in a signal frame's order (struct
// sigcontext): r8-r15, rdi, rsi, rbp, rbx, rdx, rax, rcx, rsp, rip,
// eflags.
func sigframeRegPtrs(r *unix.PtraceRegs) []*uint64 {
	return []*uint64{&r.R8, &r.R9, &r.R10, &r.R11, &r.R12, &r.R13, &r.R14, &r.R15,
		&r.Rdi, &r.Rsi, &r.Rbp, &r.Rbx, &r.Rdx, &r.Rax, &r.Rcx, &r.Rsp, &r.Rip, &r.Eflags}
}

// goG is the g of a thread of a pure Go program with registers regs: in
// its thread-local slot (symbols.GoGOffset).
func (t *Tracer) goG(regs *unix.PtraceRegs) (uint64, bool) {
	off, ok := t.space.Main().GoGOffset()
	if !ok || regs.Fs_base == 0 {
		return 0, false
	}
	return t.readWord(regs.Fs_base + uint64(off))
}

// framePC is where, from a word on a stack that is the address of the
// rt_sigreturn code, the signal frame above it saved the interrupted pc.
func (t *Tracer) framePC() int { return sigframePC }
