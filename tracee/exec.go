package tracee

import (
	"golang.org/x/sys/unix"
)

// execed updates the process after its PTRACE_EVENT_EXEC stop. By then the
// kernel has killed every other thread and given the execing thread the
// leader's tid (ptrace(2), "execve(2) under ptrace"): only the leader is
// left, stopped. The memory handle still names the old address space, and
// so does the syscall instruction found for injection: both are renewed.
// It returns the tid that called execve.
func (p *Process) execed() (formerTid int) {
	formerTid = p.Pid
	if msg, err := unix.PtraceGetEventMsg(p.Pid); err == nil {
		formerTid = int(msg)
	}
	for tid, th := range p.threads {
		if tid != p.Pid && !th.Forked {
			delete(p.threads, tid)
		}
	}
	leader := p.threads[p.Pid]
	if leader == nil {
		leader = &Thread{Tid: p.Pid}
		p.threads[p.Pid] = leader
	}
	leader.Stopped, leader.GroupStopped = true, false
	p.syscall = 0
	if p.mem != nil {
		p.mem.Close()
		p.mem = nil
	}
	p.openMem()
	return formerTid
}

// Entry returns the ELF entry point of the program the process runs now
// (AT_ENTRY): after an exec, the dynamic linker has mapped the libraries
// the program links by the time the program's code runs there.
func (p *Process) Entry() (uint64, error) { return auxvEntry(p.Pid) }
