package probe

import (
	"maps"
	"sort"

	"github.com/probedbg/probe/fetch"
	"github.com/probedbg/probe/tracee"
)

// With Follow, the children of the traced process are traced too, with
// the same probes, each by a Tracer of its own that shares the ptrace
// thread, the probes' handlers and their hit counts with the root one.
// The kernel attaches a child to the thread that traced its parent, so
// the root's loop waits for every process at once and gives each event to
// its process's Tracer.
//
// A fork child's memory is a copy of its parent's, breakpoints, XOL slots
// and trampoline included, and its stack holds the forking thread's
// hijacked returns: its Tracer starts as a copy of the parent's. A vfork
// child shares its parent's memory: it runs adopted, its hits unreported,
// as without Follow; once it execs it is a new program, followed as any.

// top returns the tracer whose thread and loop serve this one.
func (t *Tracer) top() *Tracer {
	if t.root != nil {
		return t.root
	}
	return t
}

// newFollowed makes the Tracer of a followed process, empty.
func (t *Tracer) newFollowed(proc *tracee.Process) *Tracer {
	r := t.top()
	c := &Tracer{
		root: r, pid: proc.Pid, proc: proc, launched: proc.Launched,
		kick: make(chan struct{}, 1), started: r.started, done: r.done,
		probes: make(map[string]*Probe),
		place:  tracee.NewPlacer(proc.Pid, false),
		tuning: r.tuning, monoBase: r.monoBase, wallBase: r.wallBase,
		follow: true, notify: r.notify, space: t.space, pacMask: r.pacMask, ourTrap: t.ourTrap,
	}
	c.newAddressSpace()
	c.shownSpace.Store(t.space)
	proc.Delivering = c.mailboxSignal
	c.env = fetch.HitEnv{Mem: proc, Symbolize: c.symbolize, FPRegs: c.readFPRegs}
	if r.followed == nil {
		r.followed = make(map[int]*Tracer)
	}
	r.followed[proc.Pid] = c
	return c
}

// followFork traces the child of a fork with our probes; false if it
// is gone.
func (t *Tracer) followFork(ev tracee.Event) bool {
	proc, sig, err := t.proc.Follow(ev.NewTid)
	if err != nil {
		return false
	}
	if t.inproc != nil {
		// The calls it recorded come first: the child's copy of its
		// call stacks must have them.
		t.drainUntil(ev.Tid, t.inproc.clock.Stamp())
	}
	c := t.newFollowed(proc)
	for addr, s := range t.sites {
		cp := *s
		c.sites[addr] = &cp
	}
	c.copyDetours(t)
	for _, a := range t.xol {
		cp := *a
		c.xol = append(c.xol, &cp)
	}
	maps.Copy(c.restartSlots, t.restartSlots)
	if t.inproc != nil {
		c.forkRings(t, ev.Tid)
	}
	for name, p := range t.probes {
		c.probes[name] = p
	}
	c.sysProbes = copySysProbes(t.sysProbes)
	c.trampoline, c.trampTrap, c.goidOff, c.ft = t.trampoline, t.trampTrap, t.goidOff, t.ft
	c.mbox, c.mboxTried = t.mbox, true // shared with the child, as the memory
	if t.linker != nil {
		// The r_brk breakpoint is among the sites copied.
		c.linker = &linkerWatch{rDebug: t.linker.rDebug, unloading: map[int]bool{}, err: t.linker.err}
	}
	for i, cs := range t.threadStacks(ev.Tid) {
		cp := *cs
		cp.frames = append([]shadowFrame(nil), cs.frames...)
		cp.lane = int64(proc.Pid)
		if i == 0 {
			c.shadow[proc.Pid] = &cp
		} else {
			c.parked[proc.Pid] = append(c.parked[proc.Pid], &cp)
		}
	}
	proc.Cont(proc.Pid, sig)
	return true
}

// followExec traces a vfork child that has exec'd as a process of its own
// whose probes are resolved at its entry point; false if it cannot be.
func (t *Tracer) followExec(ev tracee.Event) bool {
	proc, err := t.proc.Emancipate(ev.Tid)
	if err != nil {
		return false
	}
	delete(t.forkedReturns, ev.Tid)
	c := t.newFollowed(proc)
	c.sysProbes = copySysProbes(t.sysProbes)
	for name, p := range t.probes {
		if p.onEnable != nil {
			c.probes[name] = p
		} else {
			c.execDropped = append(c.execDropped, p)
		}
	}
	c.execDropped = append(c.execDropped, t.execDropped...)
	sort.Slice(c.execDropped, func(i, j int) bool { return c.execDropped[i].Name() < c.execDropped[j].Name() })
	if err := c.armExecEntry(); err != nil {
		c.programReady(proc.Pid)
	}
	proc.Cont(proc.Pid, 0)
	return true
}

func copySysProbes(m map[sysKey][]*Probe) map[sysKey][]*Probe {
	if m == nil {
		return nil
	}
	c := make(map[sysKey][]*Probe, len(m))
	for k, ps := range m {
		c[k] = append([]*Probe(nil), ps...)
	}
	return c
}

// serveEvent gives ev to the tracer of its process, and lets go of a
// followed process that is gone.
func (t *Tracer) serveEvent(ev tracee.Event) {
	if t.followed == nil || ev.Pid == t.pid {
		t.dispatch(ev)
		if t.followed != nil && !t.proc.Alive() {
			t.moveBell()
		}
		return
	}
	c := t.followed[ev.Pid]
	if c == nil {
		t.dispatch(ev)
		return
	}
	c.dispatch(ev)
	if !c.proc.Alive() {
		c.retireRings()
		c.retireAll()
		c.proc.Leave()
		delete(t.followed, ev.Pid)
		t.moveBell()
	}
}

// alive reports whether any traced process is left.
func (t *Tracer) alive() bool { return t.proc.Alive() || len(t.followed) > 0 }

// moveBell points the doorbell at a live process: the root, or once it is
// gone, a followed one.
func (t *Tracer) moveBell() {
	bell := t.pid
	if !t.proc.Alive() {
		bell = 0
		for pid := range t.followed {
			bell = pid
			break
		}
	}
	t.bell.Store(int32(bell))
}

// bellPid is the process the doorbell rings at.
func (t *Tracer) bellPid() int {
	if b := int(t.bell.Load()); b != 0 {
		return b
	}
	return t.pid
}

// detachFamily detaches from every followed process, then from ours.
// anchor is a held thread of any of them, or 0.
func (t *Tracer) detachFamily(anchor int) {
	for pid, c := range t.followed {
		a := 0
		if c.proc.Thread(anchor) != nil {
			a = anchor
		}
		c.detachAll(a)
		c.retireRings()
		c.proc.Leave()
		delete(t.followed, pid)
		t.lostHits += c.lostHits
	}
	if t.proc.Thread(anchor) == nil {
		anchor = 0
	}
	t.detachAll(anchor)
}
