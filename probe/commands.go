package probe

import (
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// commandQueue is how other goroutines reach the ptrace thread. Once it
// waits in wait4, a SIGSTOP to the process (the doorbell) makes some
// thread stop and report it.
type commandQueue struct {
	mu      sync.Mutex
	queue   []func(anchor int)
	started bool
	rang    bool          // a doorbell SIGSTOP is in flight
	gone    bool          // detached or exited: ring no more
	kick    chan struct{} // wakes the ptrace thread when it is not in wait4
	bell    atomic.Int32  // the pid the doorbell rings at, if not ours (see moveBell)
}

// push queues fn and rings the doorbell at pid if the loop waits in
// wait4 and none is in flight; false once the queue is closed.
func (q *commandQueue) push(fn func(anchor int), pid func() int) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.gone {
		return false
	}
	q.queue = append(q.queue, fn)
	if q.started && !q.rang {
		q.rang = true
		unix.Kill(pid(), unix.SIGSTOP)
	}
	return true
}

// wake wakes the ptrace thread if it is not in wait4.
func (q *commandQueue) wake() {
	select {
	case q.kick <- struct{}{}:
	default:
	}
}

// start notes that the loop waits in wait4 from now on: commands ring.
func (q *commandQueue) start() {
	q.mu.Lock()
	q.started = true
	q.mu.Unlock()
}

// take hands the queued commands to the ptrace thread.
func (q *commandQueue) take() []func(int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	cmds := q.queue
	q.queue = nil
	return cmds
}

// answered notes that the doorbell's SIGSTOP has been swallowed (or, for a
// process in group-stop, will never be needed): the next command rings anew.
func (q *commandQueue) answered() {
	q.mu.Lock()
	q.rang = false
	q.mu.Unlock()
}

// close stops the doorbell for good; it reports whether one is still in
// flight, to be swallowed before the threads are let go.
func (q *commandQueue) close() (ringing bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.gone = true
	return q.rang
}

// do runs fn on the ptrace thread with a thread held stopped (anchor), and
// waits for it. After Start it rings the doorbell: a SIGSTOP to the
// process, which the loop recognises by its sender and swallows.
func (t *Tracer) do(fn func(anchor int) error) error {
	errc := make(chan error, 1)
	if !t.cmds.push(func(anchor int) { errc <- fn(anchor) }, t.bellPid) {
		return ErrDetached
	}
	t.cmds.wake()
	select {
	case err := <-errc:
		return err
	case <-t.life.done:
		return ErrDetached
	}
}

// runCommands runs every queued command with tid held stopped.
func (t *Tracer) runCommands(tid int) {
	for _, fn := range t.cmds.take() {
		if t.detached {
			return
		}
		fn(tid)
	}
}

// bellPid is the process the doorbell rings at.
func (t *Tracer) bellPid() int {
	if b := int(t.cmds.bell.Load()); b != 0 {
		return b
	}
	return t.pid
}
