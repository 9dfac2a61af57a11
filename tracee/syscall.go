package tracee

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// SetSyscallStops makes every resume of a thread (not of a Forked child)
// stop it again at its next syscall entry and exit (PTRACE_SYSCALL), or
// no more. Threads running now are interrupted, so that the change
// reaches them at once rather than at their next stop.
func (p *Process) SetSyscallStops(on bool) {
	if p.syscallStops == on {
		return
	}
	p.syscallStops = on
	for tid, t := range p.threads {
		if !t.Stopped && !t.GroupStopped && !t.Forked {
			ptraceInterrupt(tid)
		}
	}
}

// SetThreadSyscallStops makes the resumes of one stopped thread stop it
// at its syscalls, or no more, whatever SetSyscallStops says for all:
// for watching one thread through a short stretch of work (the dynamic
// linker unmapping a library).
func (p *Process) SetThreadSyscallStops(tid int, on bool) {
	if t := p.threads[tid]; t != nil {
		t.syscallStops = on
	}
}

// resumeRequest is how Cont resumes thread t.
func (p *Process) resumeRequest(t *Thread) int {
	if (p.syscallStops || t.syscallStops) && !t.Forked {
		return unix.PTRACE_SYSCALL
	}
	return unix.PTRACE_CONT
}

// syscallInfo is the head of struct ptrace_syscall_info (linux/ptrace.h).
type syscallInfo struct {
	op   uint8
	_    [3]uint8
	arch uint32
	ip   uint64
	sp   uint64
	// The entry/exit/seccomp union.
	data [7]uint64
}

// SyscallEntry reports whether a thread in an EventSyscall stop is at the
// syscall's entry (false: at its exit), as PTRACE_GET_SYSCALL_INFO tells:
// counting stops cannot be trusted once a stop can be missed (a thread
// switched to PTRACE_SYSCALL in the middle of a syscall).
func (p *Process) SyscallEntry(tid int) (bool, error) {
	var info syscallInfo
	if err := ptracePtr(unix.PTRACE_GET_SYSCALL_INFO, tid, unsafe.Sizeof(info), unsafe.Pointer(&info)); err != nil {
		return false, err
	}
	return info.op == unix.PTRACE_SYSCALL_INFO_ENTRY, nil
}
