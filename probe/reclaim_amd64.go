package probe

// sigreturnCode is the code a signal handler returns through:
// glibc's __restore_rt (mov $15,%rax; syscall) and musl's (mov $15,%eax).
var sigreturnCode = [][]byte{
	{0x48, 0xc7, 0xc0, 0x0f, 0x00, 0x00, 0x00, 0x0f, 0x05},
	{0xb8, 0x0f, 0x00, 0x00, 0x00, 0x0f, 0x05},
}

// sigframePC is where the interrupted rip is from the return address at
// the bottom of a signal frame: ucontext's flags, link and stack (40
// bytes), then sigcontext's r8-r15, rdi, rsi, rbp, rbx, rdx, rax, rcx and
// rsp before rip.
const sigframePC = 8 + 40 + 16*8
