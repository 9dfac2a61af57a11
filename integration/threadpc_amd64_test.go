package integration

import "golang.org/x/sys/unix"

// threadPC is the pc of tid, a thread this OS thread has stopped with
// ptrace.
func threadPC(tid int) (uint64, error) {
	var regs unix.PtraceRegs
	err := unix.PtraceGetRegs(tid, &regs)
	return regs.Rip, err
}
