package probe

import (
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/probedbg/probe/tracee"
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

// waiting reports whether commands are queued.
func (q *commandQueue) waiting() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.queue) > 0
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
// process, which the loop recognises by its sender and swallows. The
// Tracer of a followed or adopted process has a queue and a doorbell of
// its own: its commands run with one of its own threads held.
func (t *Tracer) do(fn func(anchor int) error) error {
	errc := make(chan error, 1)
	if !t.cmds.push(func(anchor int) { errc <- fn(anchor) }, t.bellPid) {
		return t.goneErr()
	}
	t.cmds.wake()
	var unheard <-chan time.Time // (never, for the root)
	if t.follow.root != nil {
		tick := time.NewTicker(unheardAfter)
		defer tick.Stop()
		unheard = tick.C
	}
	for {
		select {
		case err := <-errc:
			return err
		case <-t.life.done:
			return ErrDetached
		case <-t.follow.left: // (never, for the root)
			select {
			case err := <-errc: // it ran just before
				return err
			default:
				return t.goneErr()
			}
		case <-unheard:
			t.top().do(func(anchor int) error {
				t.serveUnheard(anchor)
				return nil
			})
		}
	}
}

// unheardAfter is how long a followed process's command waits for its
// doorbell's stop before the root's loop looks at why (serveUnheard).
const unheardAfter = 200 * time.Millisecond

// serveUnheard runs the commands of followed process t whose doorbell
// goes unheard; it runs as a command of the root's, with anchor held. A
// process stopped by a signal (every thread in a group-stop) takes no
// SIGSTOP until a SIGCONT, which discards it: its commands run with a
// thread held, as the root's do (pollWhileStopped), or with anchor where
// that is one of its own (the root's doorbell has moved to t, stopped).
// Otherwise the SIGCONT may have come already: the doorbell rings again
// unless it is still pending (an extra ring is swallowed, harmless).
func (t *Tracer) serveUnheard(anchor int) {
	if t.detached || !t.cmds.waiting() {
		return
	}
	if t.proc.Thread(anchor) != nil {
		t.cmds.answered()
		t.runCommands(anchor)
		return
	}
	if t.proc.AllGroupStopped() {
		tid, err := t.proc.Hold()
		if err != nil {
			return
		}
		t.cmds.answered()
		t.runCommands(tid)
		if !t.detached {
			t.proc.Listen(tid)
		}
		return
	}
	if !tracee.SignalPending(t.pid, 0, unix.SIGSTOP) {
		unix.Kill(t.pid, unix.SIGSTOP)
	}
}

// goneErr is what a command gets once the queue is closed: the root's
// are after the detach, a followed process's once it has exited or been
// let go.
func (t *Tracer) goneErr() error {
	select {
	case <-t.follow.left:
		return t.follow.leftErr
	default:
		return ErrDetached
	}
}

// runRung runs the commands a doorbell's stop of thread tid, of t's
// process, is for: t's own, and the root's when tid is one of the root's
// threads or the root's process is gone (its doorbell moved: moveBell).
// A thread of another process is never the anchor of the root's
// commands: what they inject would go to the wrong memory.
func (t *Tracer) runRung(tid int) {
	r := t.top()
	if r.proc.Thread(tid) != nil || !r.proc.Alive() {
		r.cmds.answered()
		r.runCommands(tid)
	}
	if t != r && !r.detached {
		t.cmds.answered()
		t.runCommands(tid)
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
