package integration

import "golang.org/x/sys/unix"

// threadPC is the pc of tid, a thread this OS thread has stopped with
// ptrace.
func threadPC(tid int) (uint64, error) {
	var regs unix.PtraceRegsArm64
	err := unix.PtraceGetRegSetArm64(tid, 1 /* NT_PRSTATUS */, &regs)
	return regs.Pc, err
}
