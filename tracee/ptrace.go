package tracee

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// x/sys/unix wraps only the ptrace requests with no data argument; SEIZE
// needs options, and SINGLESTEP/DETACH/LISTEN need the signal to deliver.
//
// Every ptrace request returns without sleeping, so it is made as a raw
// system call: the Go runtime is not told (entersyscall/exitsyscall), and
// our P is never handed to another thread while the kernel switches to the
// tracee (which, with placement, happens inside PTRACE_CONT): a hand-off
// costs a futex wake-up of another thread per hit.
func ptrace(req, tid int, addr, data uintptr) error {
	_, _, errno := unix.RawSyscall6(unix.SYS_PTRACE, uintptr(req), uintptr(tid), addr, data, 0, 0)
	if errno != 0 {
		return errno
	}
	return nil
}

// ptracePtr is ptrace with a pointer for data. The pointer becomes a
// uintptr only in the system call's own argument list, where the compiler
// keeps what it points to in place until the call returns: anywhere
// else a goroutine's stack may be moved meanwhile (grown, or shrunk by
// the GC), and the kernel would read or write the old one (PTRACE_SETREGS
// then failed with EIO, or wrote a stale copy's garbage, under load; a
// GETREGS read zeros).
func ptracePtr(req, tid int, addr uintptr, data unsafe.Pointer) error {
	_, _, errno := unix.RawSyscall6(unix.SYS_PTRACE, uintptr(req), uintptr(tid), addr, uintptr(data), 0, 0)
	if errno != 0 {
		return errno
	}
	return nil
}

func ptraceSeize(tid, options int) error {
	return ptrace(unix.PTRACE_SEIZE, tid, 0, uintptr(options))
}

func ptraceCont(tid, sig int) error   { return ptrace(unix.PTRACE_CONT, tid, 0, uintptr(sig)) }
func ptraceStep(tid, sig int) error   { return ptrace(unix.PTRACE_SINGLESTEP, tid, 0, uintptr(sig)) }
func ptraceDetach(tid, sig int) error { return ptrace(unix.PTRACE_DETACH, tid, 0, uintptr(sig)) }
func ptraceListen(tid int) error      { return ptrace(unix.PTRACE_LISTEN, tid, 0, 0) }
func ptraceInterrupt(tid int) error   { return ptrace(unix.PTRACE_INTERRUPT, tid, 0, 0) }

func ptraceGetSiginfo(tid int, info *unix.Siginfo) error {
	return ptracePtr(unix.PTRACE_GETSIGINFO, tid, 0, unsafe.Pointer(info))
}

func ptraceSetSiginfo(tid int, info *unix.Siginfo) error {
	return ptracePtr(unix.PTRACE_SETSIGINFO, tid, 0, unsafe.Pointer(info))
}

// The signal mask is the kernel's sigset_t, 8 bytes (one bit per signal,
// bit n-1 for signal n).
func ptraceGetSigmask(tid int, mask *uint64) error {
	return ptracePtr(unix.PTRACE_GETSIGMASK, tid, 8, unsafe.Pointer(mask))
}

func ptraceSetSigmask(tid int, mask *uint64) error {
	return ptracePtr(unix.PTRACE_SETSIGMASK, tid, 8, unsafe.Pointer(mask))
}
