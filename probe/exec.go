package probe

import (
	"fmt"
	"os"
	"sort"

	"golang.org/x/sys/unix"

	"github.com/probedbg/probe/singlestep"
	"github.com/probedbg/probe/symbols"
	"github.com/probedbg/probe/tracee"
)

// After an exec the process runs a new program in a new address space:
// every address we hold (sites, XOL areas, the trampoline, hijacked
// returns on stacks that no longer exist) describes memory that is gone,
// and writing there would damage the new program. All of it is dropped
// without a write. Syscall probes name no address: they stay, as strace's
// do. The new program's symbols are read at its entry point, where the
// dynamic linker has mapped its libraries; with Follow, the dropped probes
// are resolved again there.

// SetFollow makes the tracer follow what the process becomes: the probes
// dropped at an exec are resolved again in the new program.
func (t *Tracer) SetFollow(on bool) error {
	return t.do(func(int) error {
		t.follow.on = on
		return nil
	})
}

// SetNotify sets where notes for the user go: things worth knowing that
// are no error, such as probes dropped at an exec. fn runs on the ptrace
// thread and must not call the Tracer.
func (t *Tracer) SetNotify(fn func(msg string)) error {
	return t.do(func(int) error {
		t.follow.notify = fn
		return nil
	})
}

func (t *Tracer) note(format string, a ...any) {
	if t.follow.notify != nil {
		t.follow.notify(fmt.Sprintf(format, a...))
	}
}

// programPath is the file of the program the process runs now.
func (t *Tracer) programPath() string {
	path, _ := os.Readlink(fmt.Sprintf("/proc/%d/exe", t.pid))
	return path
}

// onExec serves the exec stop of the process: the old program's state is
// dropped and the new one is run to its entry point (onExecEntry).
func (t *Tracer) onExec(ev tracee.Event) {
	if t.trapIgnored() {
		// An ignored signal stays ignored across exec: the new program
		// gets SIG_IGN back from the reset of our traps, as the kernel
		// leaves it (handler only: flags, restorer and mask cleared).
		// Only this thread is left.
		t.restoreTrapIgnored([4]uint64{1}, ev.Tid)
		t.traps.program = trapAction{act: [4]uint64{1}, known: true}
	} else {
		t.traps.program = trapAction{} // handlers are SIG_DFL in the new program
	}
	dropped := t.forgetProgram()
	t.follow.execDropped = append(t.follow.execDropped, dropped...)
	if len(dropped) > 0 && !t.follow.on {
		t.note("pid %d exec'd %s: its probes were dropped (-f re-resolves them)", t.pid, t.programPath())
	}
	if err := t.armExecEntry(); err != nil {
		// No entry point to stop at: symbols are read now, without the
		// libraries the dynamic linker has yet to map.
		t.programReady(ev.Tid)
	}
	t.resume(ev.Tid)
}

// forgetProgram drops every piece of state about the old address space,
// writing nothing to the tracee, and returns the address-bound probes.
func (t *Tracer) forgetProgram() (dropped []*Probe) {
	// First the old program's records, under its threads' names,
	// before anything of it is forgotten.
	t.retireRings()
	for tid := range t.ret.shadow {
		t.threadGone(tid)
	}
	for tid := range t.raw.named {
		t.threadGone(tid)
	}
	t.raw.on = false // (the function tracer stops here: not capturable with -f)
	for id, cs := range t.ret.goStacks {
		t.retireStack(cs)
		hit := Hit{Pid: t.pid, Comm: t.commOf(0), Time: t.now(), CPU: getcpu()}
		for cs.top() != nil {
			t.lose(cs, &hit, false)
		}
		delete(t.ret.goStacks, id)
	}
	for name, p := range t.probes {
		if p.onEnable != nil {
			continue // a syscall probe: no address
		}
		p.sites = nil
		delete(t.probes, name)
		dropped = append(dropped, p)
	}
	sort.Slice(dropped, func(i, j int) bool { return dropped[i].Name() < dropped[j].Name() })
	if t.ft != nil {
		t.pastStacks = append(t.pastStacks, t.ft.stacks...)
		if t.follow.on {
			opts := t.ft.opts
			t.follow.execTracer = &opts
		} else {
			t.note("pid %d exec'd: the function tracer stops here (-f follows it into the new program)", t.pid)
		}
		t.ft = nil
	}
	t.newAddressSpace()
	t.step.xol, t.ret.trampoline, t.ret.trap, t.ret.signer, t.ret.goidOff = nil, 0, 0, 0, 0
	t.mail.box, t.mail.tried = nil, false
	t.dropRescue() // exec reset the action and unmapped the page
	t.follow.execEntry = 0
	t.linker = nil // its breakpoint went with the old program
	return dropped
}

// armExecEntry puts a breakpoint at the new program's entry point.
func (t *Tracer) armExecEntry() error {
	entry, err := t.proc.Entry()
	if err != nil {
		return err
	}
	orig := make([]byte, len(singlestep.BreakpointInsn))
	if _, err := t.proc.ReadAt(orig, int64(entry)); err != nil {
		return err
	}
	if _, err := t.proc.WriteAt(singlestep.BreakpointInsn, int64(entry)); err != nil {
		return err
	}
	t.follow.execEntry, t.follow.execEntryOrig = entry, orig
	return nil
}

// disarmExecEntry takes the entry breakpoint out, for detach.
func (t *Tracer) disarmExecEntry() {
	if t.follow.execEntry != 0 {
		t.proc.WriteAt(t.follow.execEntryOrig, int64(t.follow.execEntry))
		t.follow.execEntry = 0
	}
}

// onExecEntry serves the new program's arrival at its entry point.
func (t *Tracer) onExecEntry(tid int, regs *unix.PtraceRegs) {
	addr := t.follow.execEntry
	t.disarmExecEntry()
	regs.SetPC(addr)
	t.proc.SetRegs(tid, regs)
	t.programReady(tid)
	t.proc.Cont(tid, 0)
}

// programReady reads the new program's symbols and, when following,
// installs the dropped probes that resolve in it and starts the function
// tracer again, its functions selected in the new program, then puts in
// the jumps, as at a launch. tid is held stopped.
func (t *Tracer) programReady(tid int) {
	if space, err := symbols.LoadProcess(t.pid); err == nil {
		t.setSpace(space)
	}
	if t.follow.on {
		t.installProgram(tid, fmt.Sprintf("pid %d exec'd %s", t.pid, t.programPath()))
		return
	}
	t.follow.execDropped, t.follow.execTracer = nil, nil
}

// installProgram installs in the program t's process runs (its symbols
// read) the probes of t.follow.execDropped and the function tracer of
// t.follow.execTracer, then puts in the jumps. A probe or a tracer that
// cannot go in is noted after who ("pid N exec'd PATH"). tid is held.
func (t *Tracer) installProgram(tid int, who string) {
	dropped := t.follow.execDropped
	t.follow.execDropped = nil
	for _, p := range dropped {
		// A copy per program: its fetch-args are compiled for this one.
		q := &Probe{Spec: p.Spec, Group: p.Group, Event: p.Event, Kind: p.Kind, handler: p.handler, hits: p.hits}
		// A library the new program loads later: pending again.
		pending, err := t.addPending(tid, q)
		if err == nil && !pending {
			err = t.installIn(tid, q)
		}
		if err != nil {
			t.note("%s: %s not installed: %v", who, p.Name(), err)
			continue
		}
		q.enabled.Store(p.enabled.Load())
		t.probes[q.Name()] = q
	}
	if opts := t.follow.execTracer; opts != nil {
		t.follow.execTracer = nil
		if _, err := t.installFuncTracer(tid, *opts); err != nil {
			t.note("%s: the function tracer stops here: %v", who, err)
		}
		t.updateSyscallStops() // (-S)
	}
	if !t.detached && len(t.step.threads) == 0 {
		t.optimizeSites(tid)
		t.top().startDrain() // if the rings are the first
	}
}
