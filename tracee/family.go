package tracee

import (
	"errors"
	"fmt"

	"golang.org/x/sys/unix"
)

// A family is the processes one ptrace thread traces when children are
// followed: the kernel attaches a child to the thread that traced its
// parent, so one wait4(-1) reports them all. Each status is given to the
// process that owns the thread (WaitAny), or kept for it while another
// waits for its own alone (Wait, as detach does).
type family struct {
	procs map[int]*Process // by thread group id
	kept  []keptStatus     // statuses a member took for another member
}

type keptStatus struct {
	tid int
	ws  unix.WaitStatus
}

// owner returns the member that owns thread tid, or nil.
func (f *family) owner(tid int) *Process {
	for _, q := range f.procs {
		if q.threads[tid] != nil {
			return q
		}
	}
	// A new thread reports its first stop before its creator's clone
	// event (it is not in the table yet); a dead one is nobody's.
	return f.procs[threadGroup(tid)]
}

// Follow takes process pid, which a thread of p just forked (EventFork,
// not SharedMemory), as a member of p's family: traced with the same
// options, held at its first stop. sig is a signal it stopped for instead
// of its first stop, owed to it at its first resume.
func (p *Process) Follow(pid int) (child *Process, sig int, err error) {
	ws, err := p.firstStop(pid)
	if err != nil {
		return nil, 0, err
	}
	if ws.Stopped() && ws>>16 == 0 && ws.StopSignal() != unix.SIGSTOP {
		sig = int(ws.StopSignal())
	}
	child, err = p.adoptProcess(pid)
	return child, sig, err
}

// Emancipate makes the Forked child tid (see Adopt), which has just
// exec'd and so no longer shares our memory, a member of p's family: a
// process of its own, held at its exec stop.
func (p *Process) Emancipate(tid int) (*Process, error) {
	delete(p.threads, tid)
	return p.adoptProcess(tid)
}

func (p *Process) adoptProcess(pid int) (*Process, error) {
	opts := traceOptions
	if p.Launched {
		opts |= unix.PTRACE_O_EXITKILL // as its parent: killed if we die
	}
	if err := ptrace(unix.PTRACE_SETOPTIONS, pid, 0, uintptr(opts)); err != nil && !errors.Is(err, unix.ESRCH) {
		ptraceDetach(pid, 0)
		return nil, fmt.Errorf("set options of child %d: %w", pid, err)
	}
	child := &Process{Pid: pid, Launched: p.Launched, threads: map[int]*Thread{pid: {Tid: pid, Stopped: true}},
		early: p.early, taken: p.taken, syscallStops: p.syscallStops}
	if err := child.openMem(); err != nil {
		ptraceDetach(pid, 0)
		return nil, err
	}
	if p.family == nil {
		p.family = &family{procs: map[int]*Process{p.Pid: p}}
	}
	child.family = p.family
	p.family.procs[pid] = child
	return child, nil
}

// AttachMember is Attach of pid as a member of p's family: seized by the
// thread that traces p, so that WaitAny reports its threads too, with
// p's options (Launched aside: it is not killed if we die).
func (p *Process) AttachMember(pid int) (*Process, error) {
	if p.family != nil && p.family.procs[pid] != nil || pid == p.Pid {
		return nil, fmt.Errorf("pid %d: %w", pid, ErrAlreadyTraced)
	}
	q, err := seize(&Process{Pid: pid, threads: make(map[int]*Thread), early: p.early, taken: p.taken, syscallStops: p.syscallStops})
	if err != nil {
		if q != nil {
			q.Release()
		}
		return nil, err
	}
	if p.family == nil {
		p.family = &family{procs: map[int]*Process{p.Pid: p}}
	}
	q.family = p.family
	p.family.procs[pid] = q
	return q, nil
}

// Leave takes a process that is gone (or detached) out of its family and
// releases its memory handle.
func (p *Process) Leave() {
	if p.family != nil {
		delete(p.family.procs, p.Pid)
	}
	p.Close()
}

// WaitAny is Wait for every process of p's family (just p's when it has
// none): the event is about process Event.Pid.
func (p *Process) WaitAny() (Event, error) {
	ev, _, err := p.waitAny(true)
	return ev, err
}

// WaitAnyNonBlocking is WaitAny that returns ok=false at once when no
// thread has anything to report.
func (p *Process) WaitAnyNonBlocking() (Event, bool, error) {
	return p.waitAny(false)
}

func (p *Process) waitAny(block bool) (Event, bool, error) {
	f := p.family
	if f == nil {
		return p.wait(block)
	}
	for len(f.kept) > 0 {
		k := f.kept[0]
		f.kept = f.kept[1:]
		if q := f.owner(k.tid); q != nil {
			if ev, ok := q.classify(k.tid, k.ws); ok {
				return ev, true, nil
			}
		}
	}
	for {
		tid, ws, err := p.nextStatus(block)
		if errors.Is(err, unix.ECHILD) {
			// Nothing left to wait for: every thread of every member is gone.
			for _, q := range f.procs {
				q.threads = map[int]*Thread{}
			}
			return Event{Kind: EventExit, Tid: p.Pid, Pid: p.Pid}, true, nil
		}
		if err != nil || tid == 0 {
			return Event{}, false, err
		}
		q := f.owner(tid)
		if q == nil {
			q = p // a child's early first stop, or a stray exit
		}
		if ev, ok := q.classify(tid, ws); ok {
			return ev, true, nil
		}
	}
}

// keepOthers is how Wait serves one member of a family: a status about
// another member is kept for WaitAny. It reports whether the status was
// kept.
func (p *Process) keepOthers(tid int, ws unix.WaitStatus) bool {
	f := p.family
	if f == nil || p.threads[tid] != nil {
		return false
	}
	q := f.owner(tid)
	if q == nil || q == p {
		return false
	}
	f.kept = append(f.kept, keptStatus{tid, ws})
	return true
}
