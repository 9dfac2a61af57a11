package tracee

import (
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

// kernelSigaction is the kernel's struct sigaction on amd64 and arm64.
type kernelSigaction struct {
	handler  uintptr
	flags    uint64
	restorer uintptr
	mask     uint64
}

const saNoCldStop = 0x1 // SA_NOCLDSTOP

var quietOnce sync.Once

// quietChildStops stops the kernel from sending us a SIGCHLD at every
// ptrace-stop of a tracee. The Go runtime handles SIGCHLD, so each probe
// hit would otherwise cost a signal delivered to one of our threads, often
// waking one on another CPU; wait4 is woken either way. SIGCHLD for a
// child's exit is still sent. The runtime's handler is kept; only
// SA_NOCLDSTOP is added.
func quietChildStops() {
	quietOnce.Do(func() {
		var sa kernelSigaction
		const size = 8 // sizeof(sigset_t) in the kernel
		if _, _, e := unix.RawSyscall6(unix.SYS_RT_SIGACTION, uintptr(unix.SIGCHLD), 0, uintptr(unsafe.Pointer(&sa)), size, 0, 0); e != 0 {
			return
		}
		if sa.handler == 0 || sa.handler == 1 { // SIG_DFL, SIG_IGN: no handler to wake
			return
		}
		sa.flags |= saNoCldStop
		unix.RawSyscall6(unix.SYS_RT_SIGACTION, uintptr(unix.SIGCHLD), uintptr(unsafe.Pointer(&sa)), 0, size, 0, 0)
	})
}
