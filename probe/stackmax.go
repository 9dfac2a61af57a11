package probe

import (
	"sort"

	"github.com/probedbg/probe/tracee"
)

// The stack tracer, as ftrace's: at each traced entry the stack in use is
// measured from the stack's top down to sp, and the deepest point of each
// thread (goroutine, in Go) is kept with the calls that reached it.

// StackUsage is the deepest stack one thread reached.
type StackUsage struct {
	Tid    int
	Comm   string
	Lane   int64
	Used   uint64       // bytes from the stack's top to sp at the deepest traced entry
	Frames []StackFrame // the calls then, deepest first
}

// StackFrame is one call of a StackUsage.
type StackFrame struct {
	Location string // where the function was: its entry, or the call it was making
	Used     uint64 // bytes of stack in use at its entry
}

// stackMax is a callStack's deepest point.
type stackMax struct {
	base    uint64 // the stack's top: bytes in use are base - sp
	used    uint64
	tid     int
	pending int           // frames on the stack at the deepest point, not yet copied
	frames  []shadowFrame // the calls at the deepest point
	retired bool
}

// noteStack measures the stack at the call just pushed. Copying the calls
// at every new deepest point would cost O(depth) per entry in a deep
// recursion, so they are copied when the deepest call returns (settle).
func (t *Tracer) noteStack(cs *callStack, tid int) {
	if t.ft == nil || !t.ft.opts.Stack {
		return
	}
	f := cs.top()
	if f.mode&frameRecorded == 0 {
		return
	}
	if cs.max.base == 0 {
		top, err := tracee.StackTop(t.pid, f.sp)
		if err != nil {
			top = f.sp + 8
		}
		cs.max.base = top
	}
	if used := cs.max.base - f.sp; used > cs.max.used {
		cs.max.used, cs.max.pending, cs.max.tid = used, len(cs.frames), tid
	}
}

// settle copies the calls of the deepest point before its last call is
// popped.
func (m *stackMax) settle(cs *callStack) {
	if m.pending > 0 && len(cs.frames) == m.pending {
		m.frames = append(m.frames[:0], cs.frames...)
		m.pending = 0
	}
}

// retireStack files a call stack's deepest point for StackUsage.
func (t *Tracer) retireStack(cs *callStack) {
	if t.ft == nil || !t.ft.opts.Stack || cs.max.used == 0 || cs.max.retired {
		return
	}
	m := &cs.max
	m.retired = true
	if m.pending > 0 && len(cs.frames) >= m.pending {
		m.frames = append(m.frames[:0], cs.frames[:m.pending]...)
	}
	u := StackUsage{Tid: m.tid, Comm: t.commOf(m.tid), Lane: cs.lane, Used: m.used}
	for i := len(m.frames) - 1; i >= 0; i-- {
		f := &m.frames[i]
		loc := f.site.where
		if f.fn != nil {
			loc = f.fn.where
		}
		if i < len(m.frames)-1 {
			loc = t.space.Describe(m.frames[i+1].ret)
		}
		u.Frames = append(u.Frames, StackFrame{Location: loc, Used: m.base - f.sp})
	}
	t.ft.stacks = append(t.ft.stacks, u)
}

// retireAll files every call stack left when tracing ends.
func (t *Tracer) retireAll() {
	for tid := range t.ret.shadow {
		for _, cs := range t.ret.threadStacks(tid) {
			t.retireStack(cs)
		}
	}
	for _, cs := range t.ret.goStacks {
		t.retireStack(cs)
	}
}

// threadGone closes the calls of a thread that exited: their returns will
// never come.
func (t *Tracer) threadGone(tid int) {
	cpu, now := getcpu(), t.now() // it has no CPU any more
	t.rawThreadGone(tid, cpu, now)
	t.place.Forget(tid)
	t.threadGoneAt(tid, cpu, now)
}

// threadGoneAt is threadGone, reported on cpu at time now.
func (t *Tracer) threadGoneAt(tid, cpu int, now int64) {
	hit := Hit{Pid: t.pid, Tid: tid, Comm: t.commOf(tid), Time: now, CPU: cpu}
	for _, cs := range append(t.ret.threadStacks(tid), t.ret.goStacks[-int64(tid)]) {
		if cs == nil {
			continue
		}
		t.retireStack(cs)
		for cs.top() != nil {
			t.lose(cs, &hit, false) // the stack is gone with the thread
		}
	}
	t.rescueThreadGone(tid)
	delete(t.ret.shadow, tid)
	delete(t.ret.parked, tid)
	delete(t.ret.goStacks, -int64(tid))
}

func (t *Tracer) commOf(tid int) string {
	if c, ok := t.comms[tid]; ok {
		return c
	}
	return "<...>"
}

// StackUsage returns the deepest stack of each thread, by thread id. Call
// it after Wait or Detach.
func (t *Tracer) StackUsage() []StackUsage {
	<-t.life.done
	out := append([]StackUsage(nil), t.pastStacks...)
	if t.ft != nil {
		out = append(out, t.ft.stacks...)
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].Tid != out[j].Tid {
			return out[i].Tid < out[j].Tid
		}
		return out[i].Used > out[j].Used
	})
	return out
}
