package tracee

import (
	"errors"
	"fmt"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// EventKind says why Wait returned.
type EventKind int

const (
	// EventTrap: a SIGTRAP signal-delivery-stop: a breakpoint, the end of a
	// single-step, or a SIGTRAP the tracee was sent.
	EventTrap EventKind = iota
	// EventSignal: a signal-delivery-stop for any other signal (Event.Sig).
	EventSignal
	// EventStop: a PTRACE_EVENT_STOP that is not a group-stop: the answer
	// to Interrupt, or a new thread's first stop.
	EventStop
	// EventGroupStop: the thread entered a group-stop for Event.Sig; the
	// caller should Listen.
	EventGroupStop
	// EventClone: the thread created Event.NewTid, which is now traced.
	EventClone
	// EventExit: the thread is gone. For the thread-group leader this is
	// the end of the process: Event.Status has its exit status.
	EventExit
	// EventFork: the thread created process Event.NewTid (fork, vfork, or
	// clone without CLONE_THREAD), held at its first stop: the caller
	// must TakeChild it or, if Event.SharedMemory, Adopt it.
	EventFork
	// EventExec: a thread exec'd. For a Forked child: it no longer shares
	// our memory. For the process: it runs a new program, Event.Tid is
	// the leader and Event.NewTid the thread that called execve; every
	// other thread is gone.
	EventExec
	// EventSyscall: a syscall-enter or syscall-exit stop (PTRACE_SYSCALL).
	EventSyscall
	// EventVforkDone: the thread's vfork child has exec'd or exited: the
	// thread is about to return from vfork, and has not run since it
	// called it.
	EventVforkDone
	// EventOther: a ptrace event this package does not classify yet.
	EventOther
)

// Event is one stop or exit reported by Wait.
type Event struct {
	Kind   EventKind
	Pid    int // the process (thread group) Tid is in
	Tid    int
	Sig    int
	NewTid int
	Status unix.WaitStatus
	// SharedMemory: for EventFork, the child shares our address space.
	SharedMemory bool
	// Forked: the event is about a Forked child, not a thread of ours.
	Forked bool
}

// Wait blocks until a traced thread changes state, updates the thread table
// and returns what happened. Only tracees of the calling OS thread are
// waited for (__WNOTHREAD): other tracers in this process are not disturbed.
func (p *Process) Wait() (Event, error) {
	ev, _, err := p.wait(true)
	return ev, err
}

// WaitNonBlocking is Wait that returns ok=false at once when no thread has
// anything to report.
func (p *Process) WaitNonBlocking() (Event, bool, error) {
	return p.wait(false)
}

func (p *Process) wait(block bool) (Event, bool, error) {
	for {
		tid, ws, err := p.nextStatus(block)
		if errors.Is(err, unix.ECHILD) {
			// Nothing left to wait for: every thread is gone.
			p.threads = map[int]*Thread{}
			return Event{Kind: EventExit, Pid: p.Pid, Tid: p.Pid}, true, nil
		}
		if err != nil || tid == 0 {
			return Event{}, false, err
		}
		if p.keepOthers(tid, ws) {
			continue
		}
		if ev, ok := p.classify(tid, ws); ok {
			return ev, true, nil
		}
	}
}

// nextStatus takes the next wait status of any tracee of this thread; tid
// is 0 when there is none yet and block is false. An error other than
// ECHILD is wrapped.
func (p *Process) nextStatus(block bool) (tid int, ws unix.WaitStatus, err error) {
	if tid, ws, ok := p.taken.next(); ok {
		p.Slept = false
		return tid, ws, nil
	}
	defer func() {
		if tid > 0 && err == nil {
			p.collected(tid, ws)
			p.taken.drain(func() (int, unix.WaitStatus, error) { return p.takeOne(-1, false) }, p.collected)
		}
	}()
	for {
		// Most often a stop is already there (placement puts us back on
		// the CPU when the tracee traps): take it without telling the
		// runtime, as ptrace requests are made.
		tid, ws, err = p.takeOne(-1, false)
		p.Slept = err == nil && tid == 0
		if p.Slept {
			if !block {
				return 0, ws, nil
			}
			tid, ws, err = p.takeOne(-1, true)
		}
		switch {
		case errors.Is(err, unix.EINTR):
			continue
		case err != nil && !errors.Is(err, unix.ECHILD):
			err = fmt.Errorf("wait: %w", err)
		}
		return tid, ws, err
	}
}

// classify turns a wait status into an Event; ok=false for a status that is
// not about one of our threads.
func (p *Process) classify(tid int, ws unix.WaitStatus) (Event, bool) {
	t := p.threads[tid]
	if ws.Exited() || ws.Signaled() {
		if t == nil && tid != p.Pid {
			delete(p.early, tid)
			return Event{}, false
		}
		delete(p.threads, tid)
		forked := t != nil && t.Forked
		if tid == p.Pid {
			// The leader is reaped last: the whole process is gone
			// (but a vfork child may outlive it).
			for id, th := range p.threads {
				if !th.Forked {
					delete(p.threads, id)
				}
			}
		}
		return Event{Kind: EventExit, Pid: p.Pid, Tid: tid, Status: ws, Forked: forked}, true
	}
	if !ws.Stopped() {
		return Event{}, false
	}
	if t == nil {
		if tg := threadGroup(tid); tg != p.Pid {
			// A forked child's first stop, before its parent's fork
			// event: kept for TakeChild or Adopt.
			p.early[tid] = ws
			return Event{}, false
		}
		// A new thread can report its first stop before its creator
		// reports the clone event.
		t = &Thread{Tid: tid}
		p.threads[tid] = t
	}
	t.Stopped = true
	t.GroupStopped = false
	p.lastStop = tid
	sig := int(ws.StopSignal())
	ev := Event{Pid: p.Pid, Tid: tid, Sig: sig, Status: ws, Forked: t.Forked}
	// The ptrace event is in bits 16-23 (status>>16); Go's TrapCause
	// reads it only for SIGTRAP, but a group-stop reports its own signal.
	switch int(ws>>16) & 0xff {
	case 0:
		if sig == int(unix.SIGTRAP)|0x80 {
			ev.Kind = EventSyscall // TRACESYSGOOD's mark
			ev.Sig = int(unix.SIGTRAP)
		} else if sig == int(unix.SIGTRAP) {
			ev.Kind = EventTrap
		} else {
			ev.Kind = EventSignal
		}
	case unix.PTRACE_EVENT_STOP:
		switch unix.Signal(sig) {
		case unix.SIGSTOP, unix.SIGTSTP, unix.SIGTTIN, unix.SIGTTOU:
			ev.Kind = EventGroupStop
			t.GroupStopped = true
		default:
			ev.Kind = EventStop
		}
	case unix.PTRACE_EVENT_CLONE, unix.PTRACE_EVENT_FORK, unix.PTRACE_EVENT_VFORK:
		msg, err := unix.PtraceGetEventMsg(tid)
		if err != nil {
			ev.Kind = EventOther
			break
		}
		ev.NewTid = int(msg)
		// clone without CLONE_THREAD and a signal other than SIGCHLD
		// is reported as a clone, yet makes a process.
		if int(ws>>16)&0xff == unix.PTRACE_EVENT_CLONE && !t.Forked && threadGroup(ev.NewTid) == p.Pid {
			ev.Kind = EventClone
			if p.threads[ev.NewTid] == nil {
				p.threads[ev.NewTid] = &Thread{Tid: ev.NewTid}
			}
			break
		}
		ev.Kind = EventFork
		ev.SharedMemory = sameMemory(tid, ev.NewTid, int(ws>>16)&0xff == unix.PTRACE_EVENT_VFORK)
	case unix.PTRACE_EVENT_VFORK_DONE:
		ev.Kind = EventVforkDone
	case unix.PTRACE_EVENT_EXEC:
		ev.Kind = EventExec
		if !t.Forked {
			ev.NewTid = p.execed() // the tid that called execve
		}
	default:
		ev.Kind = EventOther
	}
	t.stop = ev.Kind
	// (A vfork's parent is not: it waits for the child next, and an
	// interrupt would not stop it until then.)
	t.inSyscall = ev.Kind == EventClone || ev.Kind == EventExec || ev.Kind == EventVforkDone ||
		ev.Kind == EventFork && int(ws>>16)&0xff != unix.PTRACE_EVENT_VFORK
	return ev, true
}

// Listen parks a thread that reported EventGroupStop: it stays stopped
// like the rest of its group and reports again when the group resumes.
func (p *Process) Listen(tid int) error {
	if t := p.threads[tid]; t != nil {
		t.Stopped = false
		t.GroupStopped = true
	}
	return ptraceListen(tid)
}

// WaitThread waits for one thread only (others stay queued in the kernel).
// It polls rather than blocks: in a process being killed, the leader's
// exit is not reported until every other thread has been reaped, by us,
// so a blocking wait for it would never return. A thread that is a zombie
// is reported gone (ErrNoProcess) instead.
func (p *Process) WaitThread(tid int) (Event, error) {
	for polls := 0; ; polls++ {
		if ws, ok := p.taken.take(tid); ok {
			if ev, ok := p.classify(tid, ws); ok {
				return ev, nil
			}
			continue
		}
		got, ws, err := p.takeOne(tid, false)
		if err != nil {
			if errors.Is(err, unix.EINTR) {
				continue
			}
			return Event{}, fmt.Errorf("wait for thread %d: %w", tid, err)
		}
		if got == tid {
			p.collected(tid, ws)
			if ev, ok := p.classify(tid, ws); ok {
				return ev, nil
			}
			continue
		}
		if isZombie(p.Pid, tid) {
			return Event{}, fmt.Errorf("wait for thread %d: %w", tid, ErrNoProcess)
		}
		pause(time.Duration(min(polls, 100)) * 10 * time.Microsecond)
	}
}

// pause sleeps d on this thread, or less if a signal comes. The waits
// that poll sleep with it, not time.Sleep: a time.Sleep under a
// millisecond lasts one or more when the runtime's timers are waited
// for in epoll (its timeout is in milliseconds), and a poll for a stop
// due in microseconds took 1.1 ms (3 of the 10 system calls injected at
// Lua's start, 3 ms in all).
func pause(d time.Duration) {
	if d > 0 {
		ts := unix.NsecToTimespec(int64(d))
		unix.Nanosleep(&ts, nil)
	}
}

// collected tells Held of a stop taken from the kernel: a stop we have
// taken is one the kernel no longer holds a signal for, so that if we
// die before we resume the thread it goes on with none.
func (p *Process) collected(tid int, ws unix.WaitStatus) {
	if p.Held != nil && ws.Stopped() {
		p.Held(tid, true)
	}
}

// wait4Now is wait4(-1, WNOHANG) as a raw system call: it never sleeps.
func wait4Now(ws *unix.WaitStatus) (int, error) {
	r, _, e := unix.RawSyscall6(unix.SYS_WAIT4, ^uintptr(0), uintptr(unsafe.Pointer(ws)), unix.WALL|unix.WNOTHREAD|unix.WNOHANG, 0, 0, 0)
	if e != 0 {
		return 0, e
	}
	return int(r), nil
}

// takenStatuses makes wait4(-1) fair. The kernel reports the first
// stopped tracee on its list, and the newest thread is first: a thread
// that traps again while the tracer serves it is reported again, ahead of
// every other, and under load (a guest, a busy machine) the others wait
// for good. So now and then all the statuses the kernel has are taken at
// once and served in turn before it is asked again: after every status
// while that finds others waiting, backing off to every drainMax
// statuses while it finds none (one wait4 more per that many stops).
type takenStatuses struct {
	queue      []keptStatus
	sinceDrain int
	interval   int
}

const drainMax = 8

// drain takes every status waiting in the kernel when it is time to (a
// status has just been taken).
func (q *takenStatuses) drain(take func() (int, unix.WaitStatus, error), collected func(int, unix.WaitStatus)) {
	if q.sinceDrain++; q.sinceDrain < q.interval {
		return
	}
	q.sinceDrain = 0
	before := len(q.queue)
	for {
		got, ws, err := take()
		if err != nil || got <= 0 {
			break
		}
		collected(got, ws)
		q.queue = append(q.queue, keptStatus{got, ws})
	}
	if len(q.queue) > before {
		q.interval = 1
	} else {
		q.interval = min(max(2*q.interval, 1), drainMax)
	}
}

// next returns the oldest status taken ahead of its turn.
func (q *takenStatuses) next() (int, unix.WaitStatus, bool) {
	if len(q.queue) == 0 {
		return 0, 0, false
	}
	k := q.queue[0]
	q.queue = q.queue[1:]
	return k.tid, k.ws, true
}

// take returns thread tid's status if it was taken ahead of its turn: a
// wait for that thread alone would not see it again.
func (q *takenStatuses) take(tid int) (unix.WaitStatus, bool) {
	for i, k := range q.queue {
		if k.tid == tid {
			q.queue = append(q.queue[:i], q.queue[i+1:]...)
			return k.ws, true
		}
	}
	return 0, false
}
