package probe

import (
	"maps"
	"slices"
	"sort"

	"golang.org/x/sys/unix"

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

// followState is what following forks and execs needs.
type followState struct {
	on          bool         // SetFollow: re-resolve probes after an exec
	notify      func(string) // SetNotify
	execDropped []*Probe     // probes of the old program, until the new one is ready
	// execTracer is the function tracer of the old program, to start
	// again in the new one once it is ready.
	execTracer    *FuncTraceOptions
	execEntry     uint64          // the new program's entry point, while a breakpoint is there
	execEntryOrig []byte          // the bytes it replaced
	root          *Tracer         // for a followed process: the tracer whose loop serves it
	children      map[int]*Tracer // on the root: followed processes by pid
	// left is closed when a followed process leaves the family (it has
	// exited, or been let go): its commands fail with leftErr.
	left    chan struct{}
	leftErr error
	// onExit is told of each process of the family that ends
	// (SetExitNotify), on the root.
	onExit   func(pid int, status ExitStatus)
	exitSaid bool // onExit was told of the root's end
}

// top returns the tracer whose thread and loop serve this one.
func (t *Tracer) top() *Tracer {
	if t.follow.root != nil {
		return t.follow.root
	}
	return t
}

// newFollowed makes the Tracer of a followed process, empty.
func (t *Tracer) newFollowed(proc *tracee.Process) *Tracer {
	r := t.top()
	c := &Tracer{
		pid: proc.Pid, proc: proc, launched: proc.Launched,
		cmds: commandQueue{kick: make(chan struct{}, 1)},
		// Started and ready with the root: probes added to it later
		// are placed as the root's are (optimizeLate).
		life:   lifecycle{started: r.life.started, ready: r.life.ready, done: r.life.done},
		probes: make(map[string]*Probe),
		place:  tracee.NewPlacer(proc.Pid, false),
		tuning: r.tuning, monoBase: r.monoBase, wallBase: r.wallBase,
		follow: followState{on: true, notify: r.follow.notify, root: r, left: make(chan struct{})},
		space:  t.space, pacMask: r.pacMask,
	}
	c.cmds.start() // its doorbell rings from the first command: it runs
	c.traps.ours = t.traps.ours
	c.newAddressSpace()
	c.shownSpace.Store(t.space)
	proc.Delivering = c.mailboxSignal
	c.scratch.env = fetch.HitEnv{Mem: proc, Symbolize: c.symbolize, FPRegs: c.readFPRegs}
	if r.follow.children == nil {
		r.follow.children = make(map[int]*Tracer)
	}
	r.follow.children[proc.Pid] = c
	return c
}

// Processes returns the Tracers of the processes t traces now: t's own
// while it runs, then those adopted (Adopt) and followed (SetFollow), by
// pid. The Tracer of each adds, removes and lists the probes of its
// process and runs its function tracer; what concerns them all (Start,
// Detach, Wait, Done, Stats, DrainRecords) is the first's, whichever
// Tracer of the family it is called on. A process that has exited is
// left out; calls on its Tracer fail with ErrExited.
//
//	for _, pt := range t.Processes() { pt.AddSpec(spec, h) }
func (t *Tracer) Processes() []*Tracer {
	r := t.top()
	var ps []*Tracer
	r.do(func(int) error {
		if r.proc.Alive() {
			ps = append(ps, r)
		}
		for _, pid := range slices.Sorted(maps.Keys(r.follow.children)) {
			if c := r.follow.children[pid]; c.proc.Alive() {
				ps = append(ps, c)
			}
		}
		return nil
	})
	return ps
}

// SetExitNotify sets fn, told of each process of the family that ends:
// t's own, one adopted, one followed; the last before Done. It runs on
// the ptrace thread and must not call the Tracer.
func (t *Tracer) SetExitNotify(fn func(pid int, status ExitStatus)) error {
	return t.do(func(int) error {
		t.follow.onExit = fn
		return nil
	})
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
		c.sites[addr] = s.forkCopy()
	}
	c.copyDetours(t)
	for _, a := range t.step.xol {
		cp := *a
		c.step.xol = append(c.step.xol, &cp)
	}
	maps.Copy(c.step.restartSlots, t.step.restartSlots)
	if t.inproc != nil {
		c.forkRings(t, ev.Tid)
	}
	for name, p := range t.probes {
		c.probes[name] = p
	}
	c.sysProbes = copySysProbes(t.sysProbes)
	c.semaphores = maps.Clone(t.semaphores) // (its memory's copy has them raised)
	c.ret.trampoline, c.ret.trap, c.ret.goidOff, c.ft = t.ret.trampoline, t.ret.trap, t.ret.goidOff, t.ft
	c.mail.box, c.mail.tried = t.mail.box, true // shared with the child, as the memory
	if t.linker != nil {
		// The r_brk breakpoint is among the sites copied.
		c.linker = &linkerWatch{rDebug: t.linker.rDebug, unloading: map[int]bool{}, err: t.linker.err}
	}
	for i, cs := range t.ret.threadStacks(ev.Tid) {
		cp := *cs
		cp.frames = append([]shadowFrame(nil), cs.frames...)
		cp.lane = int64(proc.Pid)
		if i == 0 {
			c.ret.shadow[proc.Pid] = &cp
		} else {
			c.ret.parked[proc.Pid] = append(c.ret.parked[proc.Pid], &cp)
		}
	}
	c.updateSyscallStops() // (its syscall probes', -S's)
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
	delete(t.ret.forked, ev.Tid)
	c := t.newFollowed(proc)
	c.sysProbes = copySysProbes(t.sysProbes)
	for name, p := range t.probes {
		if p.onEnable != nil {
			c.probes[name] = p
		} else {
			c.follow.execDropped = append(c.follow.execDropped, p)
		}
	}
	c.follow.execDropped = append(c.follow.execDropped, t.follow.execDropped...)
	if t.ft != nil {
		opts := t.ft.opts
		c.follow.execTracer = &opts
	}
	sort.Slice(c.follow.execDropped, func(i, j int) bool { return c.follow.execDropped[i].Name() < c.follow.execDropped[j].Name() })
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
	if t.follow.children == nil || ev.Pid == t.pid {
		t.dispatch(ev)
		if t.follow.children != nil && !t.proc.Alive() {
			t.moveBell()
		}
		if !t.proc.Alive() && !t.follow.exitSaid {
			t.follow.exitSaid = true
			t.exited(t) // (after the move: the told may ring)
		}
		return
	}
	c := t.follow.children[ev.Pid]
	if c == nil {
		t.dispatch(ev)
		return
	}
	c.dispatch(ev)
	if !c.proc.Alive() {
		exited := t.follow.children[ev.Pid] == c // (not let go by a command it ran: detachFamily)
		c.retireRings()
		c.retireAll()
		c.proc.Leave()
		delete(t.follow.children, ev.Pid)
		t.moveBell()
		if exited {
			c.leave(ErrExited)
			t.exited(c)
		}
	}
}

// leave closes the command queue of followed process c, which has left
// the family: commands still waiting get err.
func (c *Tracer) leave(err error) {
	c.cmds.close()
	c.follow.leftErr = err
	close(c.follow.left)
}

// exited tells SetExitNotify's function that the process of tr, the root
// or a followed one, has ended.
func (t *Tracer) exited(tr *Tracer) {
	if t.follow.onExit != nil {
		t.follow.onExit(tr.pid, tr.life.exit)
	}
}

// alive reports whether any traced process is left.
func (t *Tracer) alive() bool { return t.proc.Alive() || len(t.follow.children) > 0 }

// moveBell points the doorbell at a live process: the root, or once it is
// gone, a followed one. A ring that went to the process gone is rung
// again there: commands queued meanwhile would wait for ever.
func (t *Tracer) moveBell() {
	bell := t.pid
	if !t.proc.Alive() {
		bell = 0
		for pid := range t.follow.children {
			bell = pid
			break
		}
	}
	if int(t.cmds.bell.Swap(int32(bell))) != bell && bell != 0 && t.cmds.waiting() {
		unix.Kill(bell, unix.SIGSTOP)
	}
}

// detachFamily detaches from every followed process, then from ours.
// anchor is a held thread of any of them, or 0.
func (t *Tracer) detachFamily(anchor int) {
	for pid, c := range t.follow.children {
		a := 0
		if c.proc.Thread(anchor) != nil {
			a = anchor
		}
		c.detachAll(a)
		c.retireRings()
		c.proc.Leave()
		delete(t.follow.children, pid)
		c.leave(ErrDetached)
		t.lostHits += c.lostHits
	}
	if t.proc.Thread(anchor) == nil {
		anchor = 0
	}
	t.detachAll(anchor)
}
