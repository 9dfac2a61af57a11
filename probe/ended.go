package probe

import (
	"fmt"
	"time"

	"golang.org/x/sys/unix"

	"github.com/probedbg/probe/tracee"
)

// EndedError is Attach's error when the process ended (was killed) while
// being attached to: not a failure of ours, nor bad input.
type EndedError struct {
	Pid    int
	Status ExitStatus
}

func (e *EndedError) Error() string {
	if e.Status.Signaled {
		return fmt.Sprintf("pid %d killed by %s", e.Pid, unix.SignalName(e.Status.Signal))
	}
	return fmt.Sprintf("pid %d exited with status %d", e.Pid, e.Status.Code)
}

// endedWhileAttaching reaps a process whose every thread is dying, as its
// tracer, and returns how it ended; ok is false if some thread lives on.
func endedWhileAttaching(p *tracee.Process) (err *EndedError, ok bool) {
	if !p.AllDying() {
		return nil, false
	}
	e := &EndedError{Pid: p.Pid}
	for p.Alive() {
		ev, err := p.Wait()
		if err != nil {
			break
		}
		if ev.Kind == tracee.EventExit && ev.Tid == p.Pid {
			e.Status = exitStatus(ev.Status)
		}
	}
	return e, e.Status.Exited
}

// endedWhileLoading is endedWhileAttaching for a process whose memory
// map could not be read: a process in exit_group loses its map before
// every thread shows it is dying (one between taking its SIGKILL and
// entering do_exit shows neither: a window TCG widens), so it is asked
// again for up to 100 ms.
func endedWhileLoading(p *tracee.Process) (*EndedError, bool) {
	for i := 0; i < 20 && !p.AllDying(); i++ {
		time.Sleep(5 * time.Millisecond)
	}
	return endedWhileAttaching(p)
}
