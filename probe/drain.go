package probe

import (
	"maps"
	"slices"
	"time"

	"github.com/probedbg/probe/ring"
	"github.com/probedbg/probe/tracee"
)

// The drain: how the records the tracee's stubs commit to the rings
// reach the handlers, is ring.Drainer's (its goroutine, its passes, the
// output's room, the order before a stop); here is what it is given:
// the processes of the family (familyRings), where their records go
// (sink), and what a pass does besides (drainUpTo).

// drainState is the root's drain.
type drainState struct {
	ring.Drainer
	lostPast   ring.Lost     // what the rings of programs before an exec lost
	waitedPast time.Duration // how long their threads waited for room
}

// startDrain starts the goroutine that drains the rings, if there are
// any, once Start is done with the tracer's state: from then on the
// drain and the loop take turns (withHandlers).
func (t *Tracer) startDrain() {
	if t.inproc == nil && !t.follow.on && len(t.follow.children) == 0 {
		return
	}
	t.drain.Start(&familyRings{t: t}, func(r any) {
		// A handler's panic (ours, or a library user's): the ptrace
		// thread takes it over and detaches, as from its own (serve).
		go t.do(func(int) error { panic(r) })
	})
}

// familyRings is the rings of t, the root, and of the processes it
// follows, as the draining goroutine sees them (ring.Family).
type familyRings struct {
	t     *Tracer
	ahead []ringAhead // the last Pass's, for Prefault
}

// Pass drains at most limit records of each process of the family,
// and notes the pages of their rings that their threads are about to
// write for the first time (ring.Rings.Ahead). woke: it woke a thread
// that waited for room.
func (f *familyRings) Pass(limit int) (n int, woke bool) {
	t := f.t
	before := t.wakes()
	n = t.drainFamily(limit)
	t.noteRawLost()
	woke = t.wakes() != before
	f.ahead = t.ringsAhead()
	return n, woke
}

// Prefault has the pages Pass noted mapped in the tracee.
func (f *familyRings) Prefault() {
	for _, a := range f.ahead {
		a.proc.Prefault(a.pages) // only a first write's fault is at stake
	}
	f.ahead = nil
}

// wakes is ring.Rings.Wakes of t and the processes it follows. The
// caller holds the handlers' lock.
func (t *Tracer) wakes() uint64 {
	var n uint64
	for _, tr := range t.family() {
		if tr.inproc != nil {
			n += tr.inproc.rings.Wakes()
		}
	}
	return n
}

// stopDrain stops the draining goroutine, drains what is left and gives
// back the rings' memory.
func (t *Tracer) stopDrain() {
	t.drain.Stop()
	t.withHandlers(t.retireRings)
}

// withHandlers runs fn holding the lock under which handlers run: the
// ptrace loop's and the drain's hits never run at once. A followed
// process's are under the root's lock.
func (t *Tracer) withHandlers(fn func()) {
	t.top().drain.Do(fn)
}

// SetRecordOutput tells the tracer about its handlers' output: the drain
// hands them no more records than it has room for, leaving the rest in
// the rings, which hold them, rather than have them dropped downstream,
// and waits for room as long as the output makes progress
// (ring.Drainer).
func (t *Tracer) SetRecordOutput(out ring.Output) error {
	return t.do(func(int) error {
		t.drain.SetOutput(out)
		return nil
	})
}

// drainRecords runs the handlers of the committed records, as many as
// the handlers have room for and at most limit (0: no bound) (all:
// whenever stamped, as drainUpTo) (ring.Drainer.Pass); the caller
// holds the handlers' lock.
func (t *Tracer) drainRecords(all bool, limit int) int {
	if t.inproc == nil {
		return 0
	}
	return t.top().drain.Pass(limit, func(limit int) int { return t.drainUpTo(limit, all) })
}

// drainUpTo runs the handlers of at most limit committed records (0: no
// bound), those stamped before the pass began unless all (ring.Drain,
// DrainAll), and gives back the rings of gone threads it emptied.
func (t *Tracer) drainUpTo(limit int, all bool) int {
	in := t.inproc
	in.clock.Refresh()
	t.lookAtMemory(false)
	n := t.sink().Drain(in.rings, limit, all)
	t.collectTallies()
	if len(in.gone) > 0 {
		t.freeGone()
	}
	return n
}

// sink is what takes t's records: the handlers (deliverRecord), or
// under raw capture the recording, a ring's records at a time
// (captureChunk), at most rawPassMax of them: a pass's chunks are one
// frame, which its reader merges whole.
func (t *Tracer) sink() ring.Sink {
	if !t.raw.on {
		return ring.Sink{Take: ring.Take{Record: t.deliverRecord}}
	}
	return ring.Sink{Take: ring.Take{Chunk: t.captureChunk}, PassMax: rawPassMax, EndPass: t.raw.out.EndChunks}
}

// drainUntil runs the handlers of what the threads recorded before
// stamp, in the order they recorded it, then of the rest of tid's
// records: tid is stopped, or gone, at stamp, for a hit or an exit that
// comes after them (ring.Drainer.Before). It waits for the room.
func (t *Tracer) drainUntil(tid int, stamp uint64) {
	in := t.inproc
	in.tids = t.proc.Tids(in.tids[:0])
	if !slices.Contains(in.tids, tid) {
		in.tids = append(in.tids, tid) // gone
	}
	t.top().drain.Before(in.rings, t.sink(), in.tids, tid, stamp)
}

// DrainRecords runs the handlers of the records the tracee has
// committed until now (in-process probes' hits are handed on a few
// milliseconds late), one pass, as many as the output takes (a hot
// probe must not keep the caller waiting): before a caller changes what
// its handlers do with them, or reads what they counted.
func (t *Tracer) DrainRecords() {
	t.withHandlers(func() { t.drainFamily(0) })
}

// drainFamily is drainRecords of t and of every process it follows, at
// most limit records each (0: no bound); it returns how many records it
// handed on. The caller holds the handlers' lock.
func (t *Tracer) drainFamily(limit int) int {
	n := 0
	for _, tr := range t.family() {
		n += tr.drainRecords(false, limit)
	}
	return n
}

// ringAhead is the pages of a process's rings its threads are about to
// write for the first time (ring.Rings.Ahead).
type ringAhead struct {
	proc  *tracee.Process
	pages []uint64
}

// ringsAhead is ring.Rings.Ahead of t and the processes it follows. The
// caller holds the handlers' lock.
func (t *Tracer) ringsAhead() []ringAhead {
	var all []ringAhead
	for _, tr := range t.family() {
		if tr.inproc == nil {
			continue
		}
		if pages := tr.inproc.rings.Ahead(); len(pages) > 0 {
			all = append(all, ringAhead{tr.proc, pages})
		}
	}
	return all
}

// family is t, the root, and the processes it follows.
func (t *Tracer) family() []*Tracer {
	return append([]*Tracer{t}, slices.Collect(maps.Values(t.follow.children))...)
}

// drainAll runs the handlers of every committed record, waiting for
// room (ring.Drainer.All). The caller holds the handlers' lock.
func (t *Tracer) drainAll() {
	if t.inproc != nil {
		t.top().drain.All(func(limit int) int { return t.drainUpTo(limit, true) })
	}
}
