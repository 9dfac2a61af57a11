package ring

import (
	"sync"
	"time"
)

// The drain: how the records the threads commit to their rings reach
// their output. A goroutine drains every millisecond or so (Start), and
// the ptrace loop drains up to a stop's moment before it serves the
// stop (Before), under one lock (Do); both go no faster than the output
// takes records (Output), and wait for its room. The tracer says which
// processes' rings there are and what is done around a pass (probe's
// drain.go).

// Output is where the drained records go, as the drain sees it: its
// room and its progress. output.Stream is one.
type Output interface {
	// Room is how many records it can take now.
	Room() int
	// Written is how many records it has written so far: its progress.
	Written() uint64
	// Taken is closed when it next makes room.
	Taken() <-chan struct{}
}

// Drainer hands on the records of the rings of a process, and of the
// processes it follows, to one Output: the rings hold what the output
// has no room for, rather than have it dropped downstream.
//
//	d.SetOutput(stream); d.Start(family, onPanic) // family.Pass every 1-20 ms
//	d.Do(func() { d.Before(rings, sink, tids, tid, stamp) }) // at tid's stop
type Drainer struct {
	mu   sync.Mutex    // held while records are handed on: the goroutine's passes and the caller's (Do)
	stop chan struct{} // closed to stop the goroutine
	done chan struct{} // closed when it has stopped
	out  Output        // SetOutput
}

// Family is what a Drainer's goroutine drains: the rings of a process
// and of the processes it follows.
type Family interface {
	// Pass hands on at most limit records of each process's rings
	// (Drainer.Pass), under the Drainer's lock. woke: it woke a thread
	// that waited for room (Rings.Wakes), which has more at once.
	Pass(limit int) (n int, woke bool)
	// Prefault has the tracee map the pages of the rings the last Pass
	// found their threads about to write for the first time
	// (Rings.Ahead): outside the lock, as it takes ~1 ms a megabyte.
	Prefault()
}

// SetOutput sets where the records go: the drain hands on no more than
// it has room for, and waits for room as long as it makes progress.
// Without one it hands on everything.
func (d *Drainer) SetOutput(out Output) { d.out = out }

// Do runs fn holding the lock under which records are handed on: the
// goroutine's passes and fn never run at once.
func (d *Drainer) Do(fn func()) {
	d.mu.Lock()
	defer d.mu.Unlock()
	fn()
}

// Start starts the goroutine that drains f, unless it runs: from then
// on it and the callers of Do take turns. A panic in f (a handler's) is
// handed to panicked, on the goroutine, which then stops.
func (d *Drainer) Start(f Family, panicked func(any)) {
	if d.stop != nil {
		return
	}
	d.stop, d.done = make(chan struct{}), make(chan struct{})
	go d.run(f, panicked)
}

// Stop stops the goroutine, if it runs, and waits until it has.
func (d *Drainer) Stop() {
	if d.stop != nil {
		close(d.stop)
		<-d.done
		d.stop = nil
	}
}

// passMax bounds a pass of the draining goroutine: between two, the
// pages the threads are about to write are mapped for them (Prefault),
// and the ptrace loop, which waits for the lock, serves a stop.
const passMax = 1 << 14

// passTime is how long a pass may hold the lock: the loop serves one
// stop between two passes, and a thread stopped at a probe or by a
// signal waits for it meanwhile. A pass of 16,384 records takes ~4 ms
// here, and 50 times that under QEMU's TCG, back to back while the rings
// stay full. (Throughput is the same either way: 2M calls under
// function_graph, run and record, medians of three 0.92-0.99 s both.)
const passTime = 2 * time.Millisecond

// run is the goroutine: a pass every millisecond while the rings are
// busy, less often while idle, at once while there is more; and, while
// the output has no room, when it makes some.
func (d *Drainer) run(f Family, panicked func(any)) {
	defer close(d.done)
	defer func() {
		if r := recover(); r != nil {
			panicked(r)
		}
	}()
	wait := time.Millisecond
	var taken <-chan struct{} // the output's room, when it had none
	limit := passMax
	for {
		select {
		case <-d.stop:
			return
		case <-time.After(wait):
		case <-taken:
		}
		start := time.Now()
		n, woke := d.pass(f, limit)
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
		if taken = d.noRoom(); taken != nil {
			wait = 20 * time.Millisecond // (or when it makes room)
		}
	}
}

// pass is one of the goroutine's: f's, under the lock, then its
// prefault outside it.
func (d *Drainer) pass(f Family, limit int) (n int, woke bool) {
	d.Do(func() { n, woke = f.Pass(limit) })
	f.Prefault()
	return n, woke
}

// passLimit is the next pass's bound on records, from the last one's:
// halved after a pass that held the lock longer than passTime, doubled
// after a full one that was quick, within [64, passMax].
func passLimit(limit, n int, took time.Duration) int {
	switch {
	case took > passTime:
		limit /= 2
	case n >= limit && took < passTime/2:
		limit *= 2
	}
	return min(passMax, max(64, limit))
}

// Sink is where a process's drained records go (Take), and how a pass
// of them is bounded and ended: a raw capture's pass is one frame of
// chunks, which its reader merges whole.
type Sink struct {
	Take Take
	// PassMax bounds each pass (0: only as the caller asks).
	PassMax int
	// EndPass, if set, is called after each pass.
	EndPass func()
}

// Drain is Rings.Drain (all: DrainAll) of r into s, a pass of at most
// limit records (0: no bound).
func (s Sink) Drain(r *Rings, limit int, all bool) int {
	drain := r.Drain
	if all {
		drain = r.DrainAll
	}
	return s.pass(limit, drain)
}

// pass runs drain, a pass of at most limit records (0: no bound), into
// s, bounded and ended as s says.
func (s Sink) pass(limit int, drain func(limit int, take Take) int) int {
	if s.PassMax > 0 && (limit == 0 || limit > s.PassMax) {
		limit = s.PassMax
	}
	n := drain(limit, s.Take)
	if s.EndPass != nil {
		s.EndPass()
	}
	return n
}

// Pass runs pass, which hands on at most limit records of a process's
// rings (0: no bound), once, with limit as many as the output has room
// for and at most bound (0: no bound); not if it has no room. The
// caller holds the lock.
func (d *Drainer) Pass(bound int, pass func(limit int) int) int {
	room := d.room()
	if room == 0 {
		return 0
	}
	if bound > 0 && (room < 0 || room > bound) {
		room = bound
	}
	return pass(max(room, 0))
}

// All runs pass, as Pass's, until it hands on nothing more, waiting
// for room (untilDrained). The caller holds the lock.
func (d *Drainer) All(pass func(limit int) int) {
	d.untilDrained(func(limit int) bool { return pass(limit) > 0 })
}

// Before hands on, into s, what threads tids recorded in r before
// stamp, in the order they recorded it (Rings.DrainBefore), then the
// rest of tid's records (Rings.DrainThread): tid, one of tids, is
// stopped, or gone, at stamp, for a hit or an exit that comes after
// them. It waits for room (untilDrained). The caller holds the lock.
func (d *Drainer) Before(r *Rings, s Sink, tids []int, tid int, stamp uint64) {
	d.untilDrained(func(limit int) bool {
		more := false
		s.pass(limit, func(limit int, take Take) int {
			n := r.DrainBefore(tids, stamp, limit, take)
			more = n == limit && limit != 0
			return n
		})
		return more
	})
	d.untilDrained(func(limit int) bool {
		more := false
		s.pass(limit, func(limit int, take Take) int {
			var n int
			n, more = r.DrainThread(tid, limit, take)
			return n
		})
		return more
	})
}

// giveUp is how long the drain waits for room while the output makes
// no progress (a reader that stopped reading): then it goes on with no
// bound, and the output drops and counts what it cannot take.
const giveUp = 2 * time.Second

// untilDrained calls drain with how many records the output has room
// for (0: no bound) until it says there are no more, waiting for room
// while the output makes progress, and giving up after giveUp without
// any, once: until it makes progress again.
func (d *Drainer) untilDrained(drain func(limit int) (more bool)) {
	stuck, seen := time.Now(), d.written()
	for {
		room := d.room()
		if room == 0 {
			if w := d.written(); w != seen {
				stuck, seen = time.Now(), w
			}
			if time.Since(stuck) < giveUp {
				d.waitRoom(10 * time.Millisecond)
				continue
			}
		}
		if !drain(max(room, 0)) {
			return
		}
		// (The clock runs on: given up once, each later pass goes on
		// at once until the output makes progress. Started again at
		// each pass, a raw capture waited 2 s for every pass of 16,384
		// records.)
	}
}

// written is how many records the output has written so far.
func (d *Drainer) written() uint64 {
	if out := d.out; out != nil {
		return out.Written()
	}
	return 0
}

// room is how many records the output can take now; -1: no bound.
func (d *Drainer) room() int {
	out := d.out
	if out == nil {
		return -1
	}
	return max(out.Room(), 0)
}

// noRoom is, when the output has no room, a channel closed when it
// makes some; else nil.
func (d *Drainer) noRoom() <-chan struct{} {
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

// waitRoom waits until the output has made room, or for at most wait.
func (d *Drainer) waitRoom(wait time.Duration) {
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
