package probe

import "sync/atomic"

// callStack is one thread's stack of calls whose returns we wait for (or,
// in a Go program, one goroutine's): the shadow stack of return probes and
// of the function tracer.
type callStack struct {
	lane      int64 // what the stack belongs to: the thread, or the goroutine
	goroutine int64 // the goroutine's id, if known
	frames    []shadowFrame
	// Counts over frames, so that an entry decides what to do in O(1).
	depth    int // frames the function tracer reports: the next one's nesting level
	graph    int // live --graph-function calls
	notrace  int // live --notrace calls
	unhooked int // frames whose return address an unwinder has been given back
	max      stackMax
	// recent are the last frames popped: a function that returns twice
	// (setjmp-like, not known as such) comes back to the trampoline
	// after its frame is gone, and must still go home.
	recent [8]struct{ sp, ret uint64 }
	next   int
}

func (cs *callStack) remember(f *shadowFrame) {
	if f.hijacked {
		cs.recent[cs.next] = struct{ sp, ret uint64 }{f.sp, f.ret}
		cs.next = (cs.next + 1) % len(cs.recent)
	}
}

// recalled returns the return address of a recently popped frame whose
// slot was at sp, if the recent frames at sp agree on it: calls made
// one after the other from one caller share a slot (step's and
// yield_to_main's in a loop), and picking one of theirs would send the
// thread to the wrong place.
func (cs *callStack) recalled(sp uint64) (ret uint64, ok bool) {
	for _, r := range cs.recent {
		switch {
		case r.sp != sp || r.ret == 0:
		case ok && r.ret != ret:
			return 0, false
		default:
			ret, ok = r.ret, true
		}
	}
	return ret, ok
}

// frameMode says what the function tracer does with a call.
type frameMode uint8

const (
	frameRecorded frameMode = 1 << iota // its entry and return are reported
	frameGraph                          // a --graph-function call: calls below it are traced
	frameNotrace                        // a --notrace call: calls below it are not
	frameRaw                            // raw capture's: its entry and return are recorded raw (raw.go)
)

// shadowFrame is one call on a callStack.
type shadowFrame struct {
	// sp is where the call's return address lives: sp at entry. For a Go
	// goroutine it is a position that survives the stack being moved
	// (see goPosition); deeper calls have smaller positions either way.
	sp   uint64
	ret  uint64 // the original return address
	site *site  // the entry site: its return probes fire at the return
	time int64
	vals map[*Probe][]capturedValue // DWARF names read at entry, per return probe

	fn       *traceFunc // the function tracer's function, or nil
	mode     frameMode
	depth    int
	hijacked bool // the return address was replaced by the trampoline
	unhooked bool // ... and given back for an unwinder to read
	// home, under raw capture, of a frame whose ret is the in-process
	// trampoline (a tail call from a call hooked in the tracee): where
	// that call returns, as the tracee's frame at the slot said at the
	// entry. Live, the tracer's frame of that call says it.
	home uint64
	// out is where the buffer the call fills is (funcArgs.outSlot),
	// read at its return.
	out uint64
}

// returnsTo is where f's return sends the thread: its return address,
// or, under raw capture, its home once the tracee's frame at its slot is
// gone (!throughTracee: a later tail call's hook replaced it).
func (f *shadowFrame) returnsTo(throughTracee bool) uint64 {
	if !throughTracee && f.home != 0 {
		return f.home
	}
	return f.ret
}

// has reports whether a frame of cs has its slot at sp.
func (cs *callStack) has(sp uint64) bool {
	if cs == nil {
		return false
	}
	for i := len(cs.frames) - 1; i >= 0; i-- {
		if cs.frames[i].sp == sp {
			return true
		}
	}
	return false
}

// topOrNil is top for a stack that may not exist yet.
func (cs *callStack) topOrNil() *shadowFrame {
	if cs == nil {
		return nil
	}
	return cs.top()
}

func (cs *callStack) top() *shadowFrame {
	if len(cs.frames) == 0 {
		return nil
	}
	return &cs.frames[len(cs.frames)-1]
}

func (cs *callStack) push(f shadowFrame) {
	cs.count(&f, 1)
	cs.frames = append(cs.frames, f)
}

func (cs *callStack) pop() shadowFrame {
	cs.max.settle(cs)
	f := cs.frames[len(cs.frames)-1]
	cs.frames = cs.frames[:len(cs.frames)-1]
	cs.count(&f, -1)
	cs.remember(&f)
	return f
}

func (cs *callStack) count(f *shadowFrame, d int) {
	if f.mode&frameRecorded != 0 {
		cs.depth += d
	}
	if f.mode&frameGraph != 0 {
		cs.graph += d
	}
	if f.mode&frameNotrace != 0 {
		cs.notrace += d
	}
	if f.unhooked {
		cs.unhooked += d
	}
}

// dropDead removes the calls that are over although their returns were
// never seen (longjmp, an exception, a switch of stacks): every frame
// below pos, and the one at pos unless atPosLive. Each is a lost return.
func (t *Tracer) dropDead(cs *callStack, pos uint64, atPosLive bool, hit *Hit) {
	for f := cs.top(); f != nil && (f.sp < pos || f.sp == pos && !atPosLive); f = cs.top() {
		t.lose(cs, hit, true)
	}
}

// lose pops a frame whose return will never come. With restore, if its
// slot still holds the trampoline the original goes back: the frame is
// dead, or we are wrong about it (a handler on an alternate stack above
// this one), and then the program must still return to the right place.
func (t *Tracer) lose(cs *callStack, hit *Hit, restore bool) {
	f := cs.pop()
	if f.hijacked {
		t.rescueReturned(int(cs.lane), f.sp)
	}
	if f.mode != 0 || f.site == nil || len(f.site.returns) > 0 {
		// (The tracee hooks every call it records; a frame nobody
		// reports is not a return lost.) Counted in the root, for
		// every process it follows.
		if hit != nil && t.ringDropped(hit.Tid, &f) {
			atomic.AddUint64(&t.top().ret.unrecorded, 1)
		} else {
			atomic.AddUint64(&t.top().ret.lost, 1)
		}
	}
	if restore && f.hijacked && !f.unhooked {
		tid := 0
		if hit != nil {
			tid = hit.Tid
		}
		t.unhijack(tid, &f)
	}
	if f.mode&frameRecorded != 0 {
		t.ft.emit(FuncLost, &f, hit, cs, nil)
	}
}

// ringDropped reports whether frame f of thread tid was hooked in the
// tracee and its ring has dropped records, full: its return record most
// likely was one of them. (Which records were dropped is not known, only
// how many: the entry's stamp is the tracee's, the count is read when the
// drain comes to it, later. A call a longjmp skipped in such a thread is
// taken for one too.)
func (t *Tracer) ringDropped(tid int, f *shadowFrame) bool {
	if d := t.decoding; d != nil {
		return d.lost[tid]
	}
	return !f.hijacked && t.inproc != nil && t.inproc.rings.LostOf(tid) > 0
}

// stripPAC is a return address read from memory (or x30) as a pc: without
// its pointer authentication code, where paciasp signed it (arm64).
func (t *Tracer) stripPAC(w uint64) uint64 { return w &^ t.pacMask }

func (t *Tracer) readWord(addr uint64) (uint64, bool) {
	w, err := t.proc.ReadWord(addr)
	return w, err == nil
}

func (t *Tracer) writeWord(addr, v uint64) bool {
	return t.proc.WriteWord(addr, v) == nil
}

// threadStack returns tid's shadow stack, made on first use.
func (r *returnState) threadStack(tid int) *callStack {
	cs := r.shadow[tid]
	if cs == nil {
		cs = &callStack{lane: int64(tid)}
		r.shadow[tid] = cs
	}
	return cs
}
