package probe

import (
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/probedbg/probe/symbols"
	"github.com/probedbg/probe/tracee"
)

// Adopt attaches to process pid as well: its threads are seized by the
// ptrace thread that traces ours, so one loop serves both, and it gets
// the probes and the function tracer given so far, resolved in the
// program it runs, as a followed process that has exec'd does; it runs
// on with them at once, before Start too. Its hits go to the same
// handlers and count with ours; Detach lets it go too.
// A probe that does not resolve in its program is noted (SetNotify) and
// left out there. A pid that is not a process, or one we may not trace,
// is bad input.
func (t *Tracer) Adopt(pid int) error {
	return t.do(func(int) error { return t.adopt(pid) })
}

func (t *Tracer) adopt(pid int) error {
	r := t.top()
	proc, err := r.proc.AttachMember(pid)
	if err != nil {
		if errors.Is(err, tracee.ErrNoProcess) || errors.Is(err, tracee.ErrAlreadyTraced) || errors.Is(err, tracee.ErrPermission) {
			err = badInput(err)
		}
		return err
	}
	anchor, err := proc.Hold()
	if err != nil {
		proc.Release()
		proc.Leave()
		return err
	}
	space, err := symbols.LoadProcess(pid)
	if err != nil {
		proc.Release()
		proc.Leave()
		return fmt.Errorf("load symbols of pid %d: %w", pid, err)
	}
	c := r.newFollowed(proc)
	c.launched = false
	c.follow.on = r.follow.on
	c.setSpace(space)
	c.anchor = anchor // as at an attach: every thread held from the first write
	c.restoreLeftovers()
	c.setupRescue()
	c.sysProbes = copySysProbes(r.sysProbes)
	for _, name := range slices.Sorted(maps.Keys(r.probes)) {
		if p := r.probes[name]; p.onEnable != nil {
			c.probes[name] = p // a syscall probe: no address
		} else {
			c.follow.execDropped = append(c.follow.execDropped, p)
		}
	}
	if r.ft != nil {
		opts := r.ft.opts
		c.follow.execTracer = &opts
	}
	c.installProgram(anchor, fmt.Sprintf("pid %d (%s)", pid, c.programPath()))
	c.anchor = 0
	c.updateSyscallStops()
	proc.Cont(anchor, 0)
	return nil
}
