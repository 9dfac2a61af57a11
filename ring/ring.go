// Package ring reads the per-thread rings that in-process probes record
// into (singlestep.RecordRoutine has the layout), from the tracer's own
// mapping of the memory it shares with the tracee, and turns their TSC
// stamps into the tracer's clock.
package ring

import (
	"encoding/binary"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/probedbg/probe/singlestep"
)

// Rings is the tracer's view of one process's rings.
type Rings struct {
	mem    []byte
	layout singlestep.RecordLayout
	values []uint64 // one record's values, reused
	tally  []uint64 // one ring's counters, reused
	// tallyUsed is how many counters of each ring Tallies has read.
	tallyUsed int
	slotOf    map[int]int // the ring a thread was last found in
}

// New reads the rings laid out as l in mem, the tracer's mapping of them.
func New(mem []byte, l singlestep.RecordLayout) *Rings {
	return &Rings{mem: mem, layout: l, slotOf: map[int]int{}}
}

// Layout is the rings' layout.
func (r *Rings) Layout() singlestep.RecordLayout { return r.layout }

func (r *Rings) word(off uint64) *uint64 { return (*uint64)(unsafe.Pointer(&r.mem[off])) }

func (r *Rings) ring(slot int) uint64 {
	return singlestep.RingsHeader + uint64(slot)*r.layout.Stride()
}

// Record is one record, valid only during the callback that receives it.
type Record struct {
	Tid    int
	Site   uint32
	CPU    int
	TSC    uint64
	Values []uint64
}

// Drain hands fn every committed record, ring by ring in order, at most
// max in all (0: no bound), and frees their room. It returns how many it
// handed. A ring stops at its first record not yet committed: its thread
// is in the middle of it.
func (r *Rings) Drain(max int, fn func(*Record)) int {
	n := 0
	for slot := range r.layout.Slots {
		base := r.ring(slot)
		owner := atomic.LoadUint64(r.word(base + singlestep.RingOwner))
		if owner == 0 {
			continue
		}
		left := 0 // no bound
		if max != 0 {
			left = max - n
		}
		n += r.drainRing(base, int(owner), left, fn)
		if max != 0 && n >= max {
			break
		}
	}
	return n
}

// drainRing drains the ring at base, of thread tid: at most max records
// (0: no bound).
func (r *Rings) drainRing(base uint64, tid, max int, fn func(*Record)) int {
	size := r.layout.RingSize
	head := atomic.LoadUint64(r.word(base + singlestep.RingHead))
	tail := atomic.LoadUint64(r.word(base + singlestep.RingTail))
	data := base + singlestep.RingHeaderSize
	n := 0
	rec := Record{Tid: tid}
	for tail < head && (max == 0 || n < max) {
		off := tail & (size - 1)
		if size-off < singlestep.PadHeader {
			tail += size - off // too short for a header: the writer skipped it
			continue
		}
		if atomic.LoadUint64(r.word(data+off)) != tail+1 {
			break // reserved, not committed yet
		}
		w1 := *r.word(data + off + 8)
		length := w1 & 0xffff
		if length < singlestep.PadHeader || length > size-off {
			break // cannot be: stop here rather than read past it
		}
		id := uint32(w1 >> 32)
		if id != 0 {
			if length < singlestep.RecordHeader {
				break
			}
			nv := int(length-singlestep.RecordHeader) / 8
			r.values = r.values[:0]
			for i := range nv {
				r.values = append(r.values, binary.LittleEndian.Uint64(r.mem[data+off+singlestep.RecordHeader+uint64(8*i):]))
			}
			rec.Site, rec.CPU, rec.TSC, rec.Values = id, int(w1>>16&0xfff), *r.word(data + off + 16), r.values
			fn(&rec)
			n++
		}
		tail += length
	}
	atomic.StoreUint64(r.word(base+singlestep.RingTail), tail)
	return n
}

// DrainThread is Drain of tid's ring alone (max 0: no bound); more
// reports whether committed records are left in it.
func (r *Rings) DrainThread(tid, max int, fn func(*Record)) (n int, more bool) {
	base, ok := r.ringOf(tid)
	if !ok {
		return 0, false
	}
	n = r.drainRing(base, tid, max, fn)
	return n, !r.Drained(tid)
}

// ringOf finds tid's ring, from where it was last found if it is still
// there.
func (r *Rings) ringOf(tid int) (base uint64, ok bool) {
	if slot, ok := r.slotOf[tid]; ok && atomic.LoadUint64(r.word(r.ring(slot)+singlestep.RingOwner)) == uint64(tid) {
		return r.ring(slot), true
	}
	for slot := range r.layout.Slots {
		if atomic.LoadUint64(r.word(r.ring(slot)+singlestep.RingOwner)) == uint64(tid) {
			r.slotOf[tid] = slot
			return r.ring(slot), true
		}
	}
	return 0, false
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
		owner := atomic.LoadUint64(r.word(base + singlestep.RingOwner))
		// (A record left reserved is not counted: its thread was taken
		// back to the function's entry at detach, and its call runs
		// again untraced.)
		if v := atomic.LoadUint64(r.word(base + singlestep.RingLost)); owner != 0 && v != 0 {
			l.Full[int(owner)] += v
		}
	}
	l.NoRing = atomic.LoadUint64(r.word(singlestep.RingsNoSlot))
	l.NoTid = atomic.LoadUint64(r.word(singlestep.RingsNoTid))
	return l
}

// Drained reports whether tid's ring has no committed record left (or
// tid has no ring).
func (r *Rings) Drained(tid int) bool {
	base, ok := r.ringOf(tid)
	if !ok {
		return true
	}
	head := atomic.LoadUint64(r.word(base + singlestep.RingHead))
	tail := atomic.LoadUint64(r.word(base + singlestep.RingTail))
	if tail == head {
		return true
	}
	off := tail & (r.layout.RingSize - 1)
	if r.layout.RingSize-off < singlestep.PadHeader {
		return false // a skip: Drain moves past it
	}
	return atomic.LoadUint64(r.word(base+singlestep.RingHeaderSize+off)) != tail+1
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
	head := atomic.LoadUint64(r.word(base + singlestep.RingHead))
	tail := atomic.LoadUint64(r.word(base + singlestep.RingTail))
	lost = atomic.LoadUint64(r.word(base + singlestep.RingLost))
	if head != tail {
		lost++ // at most one: a thread commits in order, but for its signal handlers
	}
	atomic.StoreUint64(r.word(base+singlestep.RingLost), 0)
	atomic.StoreUint64(r.word(base+singlestep.RingTail), head)
	// A thread gone leaves no calls for the next owner to return from.
	atomic.StoreUint64(r.word(base+singlestep.RingShadowTop), 0)
	r.clearTallies(base)
	atomic.StoreUint64(r.word(base+singlestep.RingOwner), 0)
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
