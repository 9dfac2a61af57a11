package tracee

import (
	"errors"
	"fmt"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// traceOptions are set on every thread we seize. Fork events are traced
// even when children are not followed: a child of a probed process starts
// with our breakpoints in its copy of the text, and must be cleaned before
// it runs an instruction. Exec is traced: the address space our probes
// were in is gone then. So is the end of a vfork, in the parent, before
// it runs again (what its thread control block got meanwhile was the
// child's). Syscall stops are marked (TRACESYSGOOD) so that they are not
// confused with a SIGTRAP.
const traceOptions = unix.PTRACE_O_TRACECLONE | unix.PTRACE_O_TRACEFORK | unix.PTRACE_O_TRACEVFORK | unix.PTRACE_O_TRACEVFORKDONE | unix.PTRACE_O_TRACEEXEC | unix.PTRACE_O_TRACESYSGOOD

// forkedOptions are set on a child that shares our memory (vfork): its own
// children need cleaning too, and its exec is where it leaves our memory.
const forkedOptions = unix.PTRACE_O_TRACEFORK | unix.PTRACE_O_TRACEVFORK | unix.PTRACE_O_TRACEVFORKDONE | unix.PTRACE_O_TRACEEXEC | unix.PTRACE_O_TRACESYSGOOD

// Child is a process forked by a traced thread with its own copy of our
// memory, held at its first stop until Release.
type Child struct {
	Pid int
	mem *os.File
	sig int // a signal it was stopped for instead of its first stop: still owed
}

// WriteAt writes the child's memory, read-only text included.
func (c *Child) WriteAt(b []byte, addr int64) (int, error) { return c.mem.WriteAt(b, addr) }

// ReadAt reads the child's memory.
func (c *Child) ReadAt(b []byte, addr int64) (int, error) { return c.mem.ReadAt(b, addr) }

// Release lets the child run, untraced.
func (c *Child) Release() error {
	c.mem.Close()
	err := ptraceDetach(c.Pid, c.sig)
	if errors.Is(err, unix.ESRCH) {
		return nil // killed before it ran
	}
	return err
}

// TakeChild waits for the first stop of process pid, which a thread of
// ours just forked (EventFork), and returns it held. The child cannot have
// run a user instruction yet: an auto-attached child stops before it
// returns to user mode.
func (p *Process) TakeChild(pid int) (*Child, error) {
	ws, err := p.firstStop(pid)
	if err != nil {
		return nil, err
	}
	c := &Child{Pid: pid}
	if ws.Stopped() && ws>>16 == 0 && ws.StopSignal() != unix.SIGSTOP {
		c.sig = int(ws.StopSignal())
	}
	f, err := os.OpenFile(fmt.Sprintf("/proc/%d/mem", pid), os.O_RDWR, 0)
	if err != nil {
		ptraceDetach(pid, c.sig)
		return nil, fmt.Errorf("open memory of child %d: %w", pid, err)
	}
	c.mem = f
	return c, nil
}

// Adopt waits for the first stop of process pid, a child forked by a
// thread of ours that shares our memory (vfork, clone with CLONE_VM), and
// traces it as one of our threads marked Forked until it execs or exits:
// the breakpoints it meets are ours, and must not be taken out from under
// the rest of the process (the kernel's uprobes keep them too).
func (p *Process) Adopt(pid int) error {
	if _, err := p.firstStop(pid); err != nil {
		return err
	}
	p.threads[pid] = &Thread{Tid: pid, Stopped: true, Forked: true}
	if err := ptrace(unix.PTRACE_SETOPTIONS, pid, 0, forkedOptions); err != nil && !errors.Is(err, unix.ESRCH) {
		return fmt.Errorf("set options of child %d: %w", pid, err)
	}
	return nil
}

// firstStop returns the first wait status of a new child: one collected
// early by Wait, or the next one.
func (p *Process) firstStop(pid int) (unix.WaitStatus, error) {
	if ws, ok := p.early[pid]; ok {
		delete(p.early, pid)
		return ws, nil
	}
	for {
		ws, ok := p.taken.take(pid)
		var err error
		if !ok {
			_, err = waitRetrying(pid, &ws, unix.WALL|unix.WNOTHREAD)
		}
		if err != nil {
			return 0, fmt.Errorf("wait for child %d: %w", pid, err)
		}
		if ws.Exited() || ws.Signaled() {
			return 0, fmt.Errorf("child %d: %w", pid, ErrNoProcess)
		}
		return ws, nil
	}
}

// sameMemory reports whether two processes share one address space
// (kcmp KCMP_VM); when the kernel cannot tell, vfork's answer is guessed.
func sameMemory(pid, child int, vfork bool) bool {
	const kcmpVM = 1
	r, _, errno := unix.Syscall6(unix.SYS_KCMP, uintptr(pid), uintptr(child), kcmpVM, 0, 0, 0)
	if errno != 0 {
		return vfork
	}
	return r == 0
}

// threadGroup returns the process a task belongs to, or 0 if it is gone.
func threadGroup(tid int) int {
	v, _ := statusField(fmt.Sprintf("/proc/%d/status", tid), "Tgid")
	n, _ := strconv.Atoi(v)
	return n
}
