package probe

import (
	"encoding/binary"
	"io"

	"golang.org/x/sys/unix"

	"github.com/probedbg/probe/singlestep"
	"github.com/probedbg/probe/tracee"
)

// A process forked by a traced thread is not followed, and must run as if
// we were not there. A child with its own copy of our memory (fork) gets
// the original bytes back before it runs an instruction, then goes. A
// child that shares our memory (vfork, clone with CLONE_VM) cannot: the
// text is the parent's too, and the parent's other threads keep running
// into its probes. Like the kernel's uprobes (uprobe_copy_process), we
// keep the breakpoints and serve the child's hits without reporting them
// until it execs or exits.

// onFork cleans or adopts the child of a fork, then resumes both.
func (t *Tracer) onFork(ev tracee.Event) {
	if t.follow.on && !ev.SharedMemory && t.followFork(ev) {
		t.resume(ev.Tid)
		return
	}
	if t.releaseChild(ev) {
		t.proc.Cont(ev.NewTid, 0)
	}
	t.resume(ev.Tid)
}

// releaseChild makes the new process ev.NewTid safe: cleaned and let go,
// or adopted and left stopped (adopted=true), sharing our memory.
func (t *Tracer) releaseChild(ev tracee.Event) (adopted bool) {
	if ev.SharedMemory {
		if t.proc.Adopt(ev.NewTid) != nil {
			return false
		}
		// The child runs on the parent's stack: returns hijacked there
		// lead it to the trampoline, and must go home as the parent's
		// would (the kernel copies the return instances for vfork).
		var rets []forkedReturn
		for _, cs := range t.ret.threadStacks(ev.Tid) {
			for _, f := range cs.frames {
				if f.hijacked && !f.unhooked {
					rets = append(rets, forkedReturn{sp: f.sp, ret: f.ret})
				}
			}
		}
		t.ret.forked[ev.NewTid] = rets
		t.recordVfork(ev.Tid, ev.NewTid)
		return true
	}
	child, err := t.proc.TakeChild(ev.NewTid)
	if err != nil {
		return false // gone before its first stop
	}
	sites := make([]*site, 0, len(t.sites))
	for _, s := range t.sites {
		sites = append(sites, s)
	}
	t.restoreSitesIn(child, sites)
	t.putBackRedirects(child)
	t.lowerSemaphoresIn(child)
	// Its stack is a copy of the forking thread's, hijacked returns and
	// all (and on arm64 its x30, where a hooked leaf forked).
	t.unhijackInprocIn(child, ev.Tid)
	t.unhookChildLR(ev.NewTid, ev.Tid)
	for _, cs := range t.ret.threadStacks(ev.Tid) {
		for _, f := range cs.frames {
			if f.hijacked && !f.unhooked {
				t.unhijackChild(child, ev.Tid, &f)
			}
		}
	}
	child.Release()
	return false
}

// forkedReturn is a return address hijacked on a stack a vfork child
// shares with its parent.
type forkedReturn struct{ sp, ret uint64 }

// memory is a fork child's memory: its tracee.Child, or its
// tracee.Process when it is followed.
type memory interface {
	io.ReaderAt
	io.WriterAt
}

func unhijackIn(child memory, sp, ret, trampoline uint64) bool {
	var b [8]byte
	if _, err := child.ReadAt(b[:], int64(sp)); err != nil || binary.LittleEndian.Uint64(b[:]) != trampoline {
		return false
	}
	binary.LittleEndian.PutUint64(b[:], ret)
	_, err := child.WriteAt(b[:], int64(sp))
	return err == nil
}

// onForkedTrap serves a vfork child on one of our breakpoints: the
// displaced instruction runs, and nothing is reported.
func (t *Tracer) onForkedTrap(tid int, regs *unix.PtraceRegs) {
	addr := regs.PC() - singlestep.BreakpointPCAdjust
	if addr == t.ret.trap && t.ret.trap != 0 {
		slot := tracee.SP(regs) - returnPops
		rets := t.ret.forked[tid]
		for i := len(rets) - 1; i >= 0; i-- {
			if rets[i].sp == slot {
				regs.SetPC(rets[i].ret)
				t.ret.forked[tid] = rets[:i]
				t.proc.SetRegs(tid, regs)
				t.proc.Cont(tid, 0)
				return
			}
		}
		t.proc.Cont(tid, int(unix.SIGTRAP))
		return
	}
	s := t.sites[addr]
	if s == nil {
		if o := t.jumps.detours[addr]; o != nil {
			t.passDetour(tid, regs, o) // on through the copies
			return
		}
		t.onForeignTrap(tid, regs)
		return
	}
	regs.SetPC(addr)
	t.keepPlain(s)
	if t.resumeOptimized(tid, s, regs, nil, false) {
		return
	}
	hit := Hit{Pid: t.pid, Tid: tid, regs: regs, Mem: t.proc}
	t.runDisplaced(tid, s, regs, &hit)
}

// isForked reports whether tid is an adopted vfork child, not a thread of
// the traced process.
func (t *Tracer) isForked(tid int) bool {
	th := t.proc.Thread(tid)
	return th != nil && th.Forked
}
