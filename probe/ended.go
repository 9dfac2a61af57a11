package probe

import (
	"fmt"

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
