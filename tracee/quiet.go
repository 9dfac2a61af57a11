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
		sa, ok := sigaction(unix.SIGCHLD)
		if !ok || sa.handler == 0 || sa.handler == 1 { // SIG_DFL, SIG_IGN: no handler to wake
			return
		}
		sa.flags |= saNoCldStop
		setSigaction(unix.SIGCHLD, &sa)
	})
	setUpRawWaits()
}

const sigsetSize = 8 // sizeof(sigset_t) in the kernel

// sigaction reads sig's disposition with the raw system call: the runtime
// keeps its own copy, which ours would not update.
func sigaction(sig unix.Signal) (kernelSigaction, bool) {
	var sa kernelSigaction
	_, _, e := unix.RawSyscall6(unix.SYS_RT_SIGACTION, uintptr(sig), 0, uintptr(unsafe.Pointer(&sa)), sigsetSize, 0, 0)
	return sa, e == 0
}

func setSigaction(sig unix.Signal, sa *kernelSigaction) {
	unix.RawSyscall6(unix.SYS_RT_SIGACTION, uintptr(sig), uintptr(unsafe.Pointer(sa)), 0, sigsetSize, 0, 0)
}
