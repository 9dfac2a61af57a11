package probe

import (
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/probedbg/probe/ring"
	"github.com/probedbg/probe/tracee"
)

// The drain: how the records the tracee's stubs commit to the rings
// reach the handlers. A goroutine drains every millisecond or so, and the
// ptrace loop drains up to a stop's moment before it serves the stop
// (drainUntil), under one lock (withHandlers); both go no faster than the
// output takes records (RecordOutput), and wait for its room.

// drainState is the draining goroutine's.
type drainState struct {
	mu         sync.Mutex    // held while handlers run: the loop's and the drain's (withHandlers)
	stop       chan struct{} // closed to stop the drain
	done       chan struct{} // closed when it has stopped
	out        RecordOutput  // SetRecordOutput
	lostPast   ring.Lost     // what the rings of programs before an exec lost
	waitedPast time.Duration // how long their threads waited for room
}

// startDrain starts the goroutine that drains the rings, if there are
// any, once Start is done with the tracer's state: from then on the
// drain and the loop take turns (withHandlers).
func (t *Tracer) startDrain() {
	if t.inproc == nil && !t.follow.on && len(t.follow.children) == 0 || t.drain.stop != nil {
		return
	}
	t.drain.stop, t.drain.done = make(chan struct{}), make(chan struct{})
	go func() {
		defer close(t.drain.done)
		defer func() {
			if r := recover(); r != nil {
				// A handler's panic (ours, or a library user's): the
				// ptrace thread takes it over and detaches, as from its
				// own (serve).
				go t.do(func(int) error { panic(r) })
			}
		}()
		wait := time.Millisecond
		var taken <-chan struct{} // the output's room, when it had none
		limit := drainPassMax
		for {
			select {
			case <-t.drain.stop:
				return
			case <-time.After(wait):
			case <-taken:
			}
			start := time.Now()
			n, woke := t.drainPass(limit)
			full := n >= limit
			limit = passLimit(limit, n, time.Since(start))
			// Busy rings are drained every millisecond; idle ones
			// less often, up to every 20.
			wait = min(20*time.Millisecond, max(time.Millisecond, wait*2))
			if n > 0 {
				wait = time.Millisecond
			}
			if full || woke {
				wait = 0 // more waiting, or a thread that waits for room
			}
			if taken = t.top().drain.noRoom(); taken != nil {
				wait = 20 * time.Millisecond // (or when it makes room)
			}
		}
	}()
}

// drainPassMax bounds a pass of the draining goroutine: between two,
// the pages the threads are about to write are mapped for them, and the
// ptrace loop, which waits for the lock, serves a stop.
const drainPassMax = 1 << 14

// drainPassTime is how long a pass may hold the lock: the loop serves
// one stop between two passes, and a thread stopped at a probe or by a
// signal waits for it meanwhile. A pass of 16,384 records takes ~4 ms
// here, and 50 times that under QEMU's TCG, back to back while the rings
// stay full. (Throughput is the same either way: 2M calls under
// function_graph, run and record, medians of three 0.92-0.99 s both.)
const drainPassTime = 2 * time.Millisecond

// passLimit is the next pass's bound on records, from the last one's:
// halved after a pass that held the lock longer than drainPassTime,
// doubled after a full one that was quick, within [64, drainPassMax].
func passLimit(limit, n int, took time.Duration) int {
	switch {
	case took > drainPassTime:
		limit /= 2
	case n >= limit && took < drainPassTime/2:
		limit *= 2
	}
	return min(drainPassMax, max(64, limit))
}

// drainPass drains at most limit records of each process of the family,
// then has the pages of their rings that their threads are about to
// write for the first time mapped in the tracee (ring.Rings.Ahead):
// outside the lock, as it takes ~1 ms a megabyte. woke: it woke a
// thread that waited for room.
func (t *Tracer) drainPass(limit int) (n int, woke bool) {
	var ahead []ringAhead
	t.withHandlers(func() {
		before := t.wakes()
		n = t.drainFamily(limit)
		t.noteRawLost()
		woke = t.wakes() != before
		ahead = t.ringsAhead()
	})
	for _, a := range ahead {
		a.proc.Prefault(a.pages) // only a first write's fault is at stake
	}
	return n, woke
}

// wakes is ring.Rings.Wakes of t and the processes it follows. The
// caller holds drain.mu.
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
	if t.drain.stop != nil {
		close(t.drain.stop)
		<-t.drain.done
		t.drain.stop = nil
	}
	t.withHandlers(t.retireRings)
}

// withHandlers runs fn holding the lock under which handlers run: the
// ptrace loop's and the drain's hits never run at once. A followed
// process's are under the root's lock.
func (t *Tracer) withHandlers(fn func()) {
	mu := &t.top().drain.mu
	mu.Lock()
	defer mu.Unlock()
	fn()
}

// RecordOutput is where the handlers of in-process probes' records send
// them, as the drain sees it.
type RecordOutput interface {
	// Room is how many records it can take now.
	Room() int
	// Written is how many records it has written so far: its progress.
	Written() uint64
	// Taken is closed when it next makes room.
	Taken() <-chan struct{}
}

// SetRecordOutput tells the tracer about its handlers' output: the drain
// hands them no more records than it has room for, leaving the rest in
// the rings, which hold them, rather than have them dropped downstream,
// and waits for room as long as the output makes progress.
func (t *Tracer) SetRecordOutput(out RecordOutput) error {
	return t.do(func(int) error {
		t.drain.out = out
		return nil
	})
}

// written is how many records the output has written so far.
func (d *drainState) written() uint64 {
	if out := d.out; out != nil {
		return out.Written()
	}
	return 0
}

// room is how many records the handlers can take now; -1: no bound.
func (d *drainState) room() int {
	out := d.out
	if out == nil {
		return -1
	}
	return max(out.Room(), 0)
}

// noRoom is, when the output has no room, a channel closed when it
// makes some; else nil.
func (d *drainState) noRoom() <-chan struct{} {
	out := d.out
	if out == nil {
		return nil
	}
	taken := out.Taken() // before the look: room made after it closes it
	if out.Room() > 0 {
		return nil
	}
	return taken
}

// waitRoom waits until the output has made room, or for at most d.
func (d *drainState) waitRoom(wait time.Duration) {
	taken := d.noRoom()
	if taken == nil {
		return // made since the caller looked
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	select {
	case <-taken:
	case <-timer.C:
	}
}

// drainRecords runs the handlers of the committed records, as many as
// the handlers have room for and at most limit (0: no bound) (all:
// whenever stamped, as drainUpTo); the caller holds drain.mu.
func (t *Tracer) drainRecords(all bool, limit int) int {
	room := t.top().drain.room()
	if t.inproc == nil || room == 0 {
		return 0
	}
	if limit > 0 && (room < 0 || room > limit) {
		room = limit
	}
	return t.drainUpTo(max(room, 0), all)
}

// drainUpTo runs the handlers of at most limit committed records (0: no
// bound), those stamped before the pass began unless all (ring.Drain,
// DrainAll), and gives back the rings of gone threads it emptied.
func (t *Tracer) drainUpTo(limit int, all bool) int {
	in := t.inproc
	in.clock.Refresh()
	t.lookAtMemory(false)
	drain := in.rings.Drain
	if all {
		drain = in.rings.DrainAll
	}
	n := t.take(limit, func(limit int, take ring.Take) int { return drain(limit, take) })
	t.collectTallies()
	if len(in.gone) > 0 {
		t.freeGone()
	}
	return n
}

// take runs drain, a pass of at most limit records (0: no bound), with
// what takes its records: the handlers (deliverRecord), or under raw
// capture the recording, a ring's records at a time (captureChunk), at
// most rawPassMax of them: a pass's chunks are one frame, which its
// reader merges whole.
func (t *Tracer) take(limit int, drain func(limit int, take ring.Take) int) int {
	if !t.raw.on {
		return drain(limit, ring.Take{Record: t.deliverRecord})
	}
	if limit == 0 || limit > rawPassMax {
		limit = rawPassMax
	}
	n := drain(limit, ring.Take{Chunk: t.captureChunk})
	t.raw.out.EndChunks()
	return n
}

// drainUntil runs the handlers of what the threads recorded before
// stamp, in the order they recorded it, then of the rest of tid's
// records: tid is stopped, or gone, at stamp, for a hit or an exit that
// comes after them. It waits for the room.
func (t *Tracer) drainUntil(tid int, stamp uint64) {
	in := t.inproc
	in.tids = t.proc.Tids(in.tids[:0])
	if !slices.Contains(in.tids, tid) {
		in.tids = append(in.tids, tid) // gone
	}
	t.untilDrained(func(limit int) bool {
		more := false
		t.take(limit, func(limit int, take ring.Take) int {
			n := in.rings.DrainBefore(in.tids, stamp, limit, take)
			more = n == limit && limit != 0
			return n
		})
		return more
	})
	t.drainThread(tid)
}

// drainThread runs the handlers of every record tid has committed: tid
// is stopped for a hit that comes after them, and waits for the room.
func (t *Tracer) drainThread(tid int) {
	t.untilDrained(func(limit int) bool {
		more := false
		t.take(limit, func(limit int, take ring.Take) int {
			var n int
			n, more = t.inproc.rings.DrainThread(tid, limit, take)
			return n
		})
		return more
	})
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
// handed on. The caller holds drain.mu.
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
// caller holds drain.mu.
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
// room. The caller holds drain.mu.
func (t *Tracer) drainAll() {
	if t.inproc != nil {
		t.untilDrained(func(limit int) bool { return t.drainUpTo(limit, true) > 0 })
	}
}

// untilDrained calls drain with how many records the handlers have room
// for (0: no bound) until it says there are no more, waiting for room
// while the output makes progress; after two seconds without any (a
// reader that stopped reading) it goes on with no bound, and the output
// drops and counts what it cannot take.
func (t *Tracer) untilDrained(drain func(limit int) (more bool)) {
	d := &t.top().drain
	stuck, seen := time.Now(), d.written()
	for {
		room := d.room()
		if room == 0 {
			if w := d.written(); w != seen {
				stuck, seen = time.Now(), w
			}
			if time.Since(stuck) < 2*time.Second {
				d.waitRoom(10 * time.Millisecond)
				continue
			}
		}
		if !drain(max(room, 0)) {
			return
		}
		stuck = time.Now()
	}
}
