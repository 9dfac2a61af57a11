// Package ring reads the per-thread rings that in-process probes record
// into (codegen.RecordRoutine writes them, as layout.go lays them
// out), from the tracer's own mapping of the memory it shares with the
// tracee, and turns their TSC stamps into the tracer's clock.
package ring

import (
	"container/heap"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Rings is the tracer's view of one process's rings.
type Rings struct {
	mem    []byte
	layout Layout
	values []uint64 // one record's values, reused
	tally  []uint64 // one ring's counters, reused
	// tallyUsed is how many counters of each ring Tallies has read.
	tallyUsed int
	slotOf    map[int]int // the ring a thread was last found in
	cursors   []cursor    // merge's, reused
	rec       Record      // the record handed on, reused
	// mapped is, by ring, how many bytes of its data from the start the
	// tracee has been given mapped (Ahead), and lastHead its head when
	// the drain last looked; ahead, the pages noted since Ahead was
	// last called.
	mapped, lastHead []uint64
	ahead            []uint64
	// waitedFreed is what the threads of freed rings waited for room;
	// wakes, how many times a thread waiting was woken.
	waitedFreed, wakes uint64
}

const pageSize = 4096

// FaultWindow is how far past a ring's head its pages are had mapped in
// the tracee ahead of its thread (Ahead), at the least: a thread that
// records faster gets four times what it wrote since the drain last
// looked.
const FaultWindow = 256 << 10

// New reads the rings laid out as l in mem, the tracer's mapping of them.
func New(mem []byte, l Layout) *Rings {
	return &Rings{mem: mem, layout: l, slotOf: map[int]int{}}
}

// Layout is the rings' layout.
func (r *Rings) Layout() Layout { return r.layout }

func (r *Rings) word(off uint64) *uint64 { return (*uint64)(unsafe.Pointer(&r.mem[off])) }

func (r *Rings) ring(slot int) uint64 {
	return FirstRingOff + uint64(slot)*r.layout.Stride()
}

// Record is one record, valid only during the callback that receives it.
type Record struct {
	Tid    int
	Site   uint32
	CPU    int
	TSC    uint64
	Values []uint64
}

// Drain hands fn every committed record, at most max in all (0: no
// bound), and frees their room. It returns how many it handed. The
// rings are merged by time stamp, as the kernel's trace iterator merges
// its per-CPU buffers: the next record handed is the earliest of the
// rings' next ones, so threads' events come in the order they happened
// (a thread's own stay in the order it committed them). A ring stops at
// its first record not yet committed: its thread is in the middle of it.
//
// Only records stamped before the pass began are handed on: the rings
// are looked at one after another, and a record committed in one ring
// after the look at it may come before a record another thread made
// after that commit (a lock handed over), which the look at its ring,
// later, would find. That one is stamped after the pass began, and waits
// for the next.
func (r *Rings) Drain(max int, take Take) int {
	return r.drain(rdtsc(), max, take)
}

// DrainAll is Drain of every committed record, whenever stamped: the
// last passes, once no thread records any more (a CPU whose counter runs
// a little ahead of ours must not leave one behind).
func (r *Rings) DrainAll(max int, take Take) int {
	return r.drain(0, max, take)
}

// drain hands on the records of every ring stamped before stamp (0:
// all).
func (r *Rings) drain(stamp uint64, max int, take Take) int {
	r.cursors = r.cursors[:0]
	for slot := range r.layout.Slots {
		base := r.ring(slot)
		if owner := atomic.LoadUint64(r.word(base + OwnerOff)); owner != 0 {
			r.openCursor(base, int(owner))
			r.noteAhead(slot, base)
		}
	}
	return r.merge(stamp, max, take)
}

// noteAhead notes the pages of ring slot, at base, that its thread will
// write next and the tracee has not been given mapped: up to FaultWindow
// past its head, or four times what it wrote since the last look if
// more.
func (r *Rings) noteAhead(slot int, base uint64) {
	size := r.layout.RingSize
	if r.mapped == nil {
		r.mapped = make([]uint64, r.layout.Slots)
		r.lastHead = make([]uint64, r.layout.Slots)
	}
	if r.mapped[slot] >= size {
		return
	}
	head := atomic.LoadUint64(r.word(base + HeadOff))
	wrote := head - min(head, r.lastHead[slot]) // a ring given to a new thread starts again
	r.lastHead[slot] = head
	want := min(size, (head+max(FaultWindow, 4*wrote)+pageSize-1)&^(pageSize-1))
	data := r.layout.Base + base + HeaderSize
	for ; r.mapped[slot] < want; r.mapped[slot] += pageSize {
		r.ahead = append(r.ahead, data+r.mapped[slot])
	}
}

// Ahead returns, and forgets, the pages of the rings that the drain
// found their threads about to write and never written. The first write
// of a page of shared memory faults (~5 µs here: ~50 ns on each record
// of a ring's first pass, ~90 records a page); the tracer, given them to
// map first (tracee.Process.Prefault), takes that off the threads. Each
// page is given once: a ring's pages stay mapped for the next thread to
// own it.
func (r *Rings) Ahead() []uint64 {
	a := r.ahead
	r.ahead = nil
	return a
}

// OwnerPages is the page of each ring's owner, which a thread's first
// record looks at in every ring to find its own or claim one: to be
// mapped in the tracee before that (~2.5 ms of faults for 512 rings
// here).
func (r *Rings) OwnerPages() []uint64 {
	pages := make([]uint64, r.layout.Slots)
	for slot := range pages {
		pages[slot] = (r.layout.Base + r.ring(slot) + OwnerOff) &^ (pageSize - 1)
	}
	return pages
}

// DrainBefore is Drain of the rings of threads tids, of their records
// stamped before stamp (taken before the pass began): cheap enough for
// every stop, as a thread's ring is found from its id (a look at every
// ring's owner touches a page each).
func (r *Rings) DrainBefore(tids []int, stamp uint64, max int, take Take) int {
	r.cursors = r.cursors[:0]
	for _, tid := range tids {
		if base, ok := r.knownRing(tid); ok {
			r.openCursor(base, tid)
		}
	}
	return r.merge(stamp, max, take)
}

// openCursor adds a cursor on the ring at base, of thread tid, to
// r.cursors if it holds a committed record.
func (r *Rings) openCursor(base uint64, tid int) {
	if c := r.open(base, tid); c.ok {
		r.cursors = append(r.cursors, c)
	}
}

// merge hands on the records of r.cursors by time stamp, those before
// stamp (0: all), at most max (0: no bound); or as chunks, a ring's
// after another's.
func (r *Rings) merge(stamp uint64, max int, take Take) int {
	if take.Chunk != nil {
		n := 0
		for i := range r.cursors {
			switch {
			case max == 0:
				n += r.chunk(&r.cursors[i], stamp, 0, take.Chunk)
			case n < max:
				n += r.chunk(&r.cursors[i], stamp, max-n, take.Chunk)
			}
			r.close(&r.cursors[i])
		}
		return n
	}
	fn := take.Record
	// A binary heap of the cursors by their next record's stamp: a
	// thousand threads' rings cost a record ten comparisons, not a
	// thousand.
	h := cursorHeap(r.cursors)
	heap.Init(&h)
	n := 0
	for len(h) > 0 && (max == 0 || n < max) {
		if stamp != 0 && h[0].tsc >= stamp {
			break
		}
		r.hand(&h[0], fn)
		n++
		if h[0].ok {
			if len(h) > 1 { // (one thread's ring: nothing to order)
				heap.Fix(&h, 0)
			}
		} else {
			r.close(&h[0])
			heap.Pop(&h)
		}
	}
	for i := range h {
		r.close(&h[i])
	}
	return n
}

// cursorHeap orders cursors by the stamp of their next record.
type cursorHeap []cursor

func (h cursorHeap) Len() int           { return len(h) }
func (h cursorHeap) Less(i, j int) bool { return h[i].tsc < h[j].tsc }
func (h cursorHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *cursorHeap) Push(x any)        { *h = append(*h, x.(cursor)) }
func (h *cursorHeap) Pop() any {
	old := *h
	c := old[len(old)-1]
	*h = old[:len(old)-1]
	return c
}

// DrainThread is Drain of tid's ring alone (max 0: no bound); more
// reports whether records it can hand on are left in it: not at a
// record never committed, nor at one it cannot read (a length that cannot
// be: two threads that wrote one ring at once), which would stop every
// pass there for ever.
func (r *Rings) DrainThread(tid, max int, take Take) (n int, more bool) {
	base, ok := r.ringOf(tid)
	if !ok {
		return 0, false
	}
	c := r.open(base, tid)
	if take.Chunk != nil {
		n = r.chunk(&c, 0, max, take.Chunk)
	}
	for c.ok && (max == 0 || n < max) {
		r.hand(&c, take.Record)
		n++
	}
	r.close(&c)
	return n, c.ok
}

// cursor reads one ring: tail is the next byte to read, and when ok, the
// record there is committed, stamped tsc and length bytes long.
type cursor struct {
	base, tail, head uint64
	tid              int
	ok               bool
	tsc, length      uint64
}

// open starts reading the ring at base, of thread tid, at its first
// committed record.
func (r *Rings) open(base uint64, tid int) cursor {
	c := cursor{
		base: base,
		tid:  tid,
		head: atomic.LoadUint64(r.word(base + HeadOff)),
		tail: atomic.LoadUint64(r.word(base + TailOff)),
	}
	r.next(&c)
	return c
}

// next moves c past padding to the next record and says whether it is
// committed.
func (r *Rings) next(c *cursor) {
	size := r.layout.RingSize
	data := c.base + HeaderSize
	c.ok = false
	for c.tail < c.head {
		off := c.tail & (size - 1)
		if size-off < PadHeader {
			c.tail += size - off // too short for a header: the writer skipped it
			continue
		}
		if atomic.LoadUint64(r.word(data+off)) != c.tail+1 {
			return // reserved, not committed yet
		}
		w1 := *r.word(data + off + 8)
		length := w1 & 0xffff
		if length < PadHeader || length > size-off {
			return // cannot be: stop here rather than read past it
		}
		if w1>>32 == 0 { // padding to the ring's end
			c.tail += length
			continue
		}
		if length < RecordHeader {
			return
		}
		c.ok, c.length, c.tsc = true, length, *r.word(data + off + 16)
		return
	}
}

// hand gives fn the record at c and moves c on.
func (r *Rings) hand(c *cursor, fn func(*Record)) {
	at := c.base + HeaderSize + c.tail&(r.layout.RingSize-1)
	w1 := *r.word(at + 8)
	// The values where they are: their room is the thread's again only
	// once the pass is over (close), and both CPUs are little-endian.
	r.values = unsafe.Slice((*uint64)(unsafe.Pointer(&r.mem[at+RecordHeader])), (c.length-RecordHeader)/8)
	r.rec = Record{Tid: c.tid, Site: uint32(w1 >> 32), CPU: int(w1 >> 16 & 0xfff), TSC: c.tsc, Values: r.values}
	fn(&r.rec)
	c.tail += c.length
	r.next(c)
}

// close frees the room of the records read through c, and wakes its
// thread if it waits for room.
func (r *Rings) close(c *cursor) {
	atomic.StoreUint64(r.word(c.base+TailOff), c.tail)
	r.wake(c.base)
}

// ringOf finds tid's ring: where it was last found, where the record
// routine looks first (knownRing), else among all.
func (r *Rings) ringOf(tid int) (base uint64, ok bool) {
	if slot, ok := r.slotOf[tid]; ok && r.owns(slot, tid) {
		return r.ring(slot), true
	}
	if base, ok := r.knownRing(tid); ok {
		return base, true
	}
	for slot := range r.layout.Slots {
		if r.owns(slot, tid) {
			r.slotOf[tid] = slot
			return r.ring(slot), true
		}
	}
	return 0, false
}

// knownRing finds tid's ring where the record routine looks first: the
// tid table's entry, then the ring the id picks (no map: a stop looks up
// every thread's). Only a thread between the claim of a ring elsewhere
// and its write of the table, before its first record, is missed.
func (r *Rings) knownRing(tid int) (base uint64, ok bool) {
	if slot := int(*(*uint16)(unsafe.Pointer(&r.mem[TidTableOff+2*(tid&(TidMax-1))]))) - 1; slot >= 0 && slot < r.layout.Slots && r.owns(slot, tid) {
		return r.ring(slot), true
	}
	if home := tid & (r.layout.Slots - 1); r.owns(home, tid) {
		return r.ring(home), true
	}
	return 0, false
}

// owns reports whether ring slot is tid's.
func (r *Rings) owns(slot, tid int) bool {
	return atomic.LoadUint64(r.word(r.ring(slot)+OwnerOff)) == uint64(tid)
}

// Lost is what the rings could not record.
type Lost struct {
	Full   map[int]uint64 // by thread: records dropped on a full ring
	NoRing uint64         // hits of threads that found no ring free
	NoTid  uint64         // hits where the thread id could not be read
}

// Total is every record lost.
func (l Lost) Total() uint64 {
	n := l.NoRing + l.NoTid
	for _, v := range l.Full {
		n += v
	}
	return n
}

// Lost returns the counts so far. Rings freed with Free keep theirs in
// freed.
func (r *Rings) Lost(freed map[int]uint64) Lost {
	l := Lost{Full: map[int]uint64{}}
	for tid, v := range freed {
		l.Full[tid] += v
	}
	for slot := range r.layout.Slots {
		base := r.ring(slot)
		owner := atomic.LoadUint64(r.word(base + OwnerOff))
		// (A record left reserved is not counted: its thread was taken
		// back to the function's entry at detach, and its call runs
		// again untraced.)
		if v := atomic.LoadUint64(r.word(base + LostOff)); owner != 0 && v != 0 {
			l.Full[int(owner)] += v
		}
	}
	l.NoRing = atomic.LoadUint64(r.word(NoSlotOff))
	l.NoTid = atomic.LoadUint64(r.word(NoTidOff))
	return l
}

// LostOf is how many records tid's ring has dropped, full, since it was
// given to tid (0 if tid has none).
func (r *Rings) LostOf(tid int) uint64 {
	base, ok := r.ringOf(tid)
	if !ok {
		return 0
	}
	return atomic.LoadUint64(r.word(base + LostOff))
}

// Drained reports whether tid's ring has no record left that a drain
// can hand on (or tid has no ring): one not committed, or one it cannot
// read, is not waited for.
func (r *Rings) Drained(tid int) bool {
	base, ok := r.ringOf(tid)
	if !ok {
		return true
	}
	return !r.open(base, tid).ok
}

// Free gives tid's ring back for another thread, once tid is gone and its
// records drained: what was left in it (a record its thread never
// committed) is dropped and counted in the returned lost count, with the
// records the ring could not hold.
func (r *Rings) Free(tid int) (lost uint64, ok bool) {
	base, ok := r.ringOf(tid)
	if !ok {
		return 0, false
	}
	head := atomic.LoadUint64(r.word(base + HeadOff))
	tail := atomic.LoadUint64(r.word(base + TailOff))
	lost = atomic.LoadUint64(r.word(base + LostOff))
	if head != tail {
		lost++ // at most one: a thread commits in order, but for its signal handlers
	}
	atomic.StoreUint64(r.word(base+LostOff), 0)
	r.waitedFreed += r.waitedIn(base)
	atomic.StoreUint64(r.word(base+WaitedOff), 0)
	atomic.StoreUint64(r.word(base+TailOff), head)
	// A thread gone leaves no calls for the next owner to return from.
	atomic.StoreUint64(r.word(base+ShadowTopOff), 0)
	r.clearTallies(base)
	atomic.StoreUint64(r.word(base+OwnerOff), 0)
	delete(r.slotOf, tid)
	return lost, true
}

// Release frees the rings' pages, for the tracee too (MADV_REMOVE
// punches them out of the memory file both map), and unmaps ours. The
// tracee keeps its mapping: a thread a signal handler took out of a stub
// may still finish its record there, on a fresh zeroed page.
func (r *Rings) Release() {
	unix.Madvise(r.mem, unix.MADV_REMOVE)
	unix.Munmap(r.mem)
	r.mem = nil
}
