package ring

import (
	"sync/atomic"
	"unsafe"
)

// Chunks: a drain's records as the rings hold them, for raw capture
// (probe record). Handing a record on one at a time, merged across rings
// by time stamp, costs the drain ~70 ns a record, more than the thread
// took to write it; a chunk is a run of one ring's records, read in a
// tight loop, and the merge is done when the trace is read.

// Take is what a drain hands its records to: each record, merged across
// rings by time stamp (Record), or, when Chunk is set, each ring's run of
// records as it lies there (Chunk), unmerged.
type Take struct {
	Record func(*Record)
	Chunk  func(*Chunk)
}

// Chunk is a run of one thread's records, back to back as the ring
// holds them (RecordHeader and values each; no padding): Bytes[1], if
// any, follows Bytes[0] after the ring wrapped. It is valid only during
// the callback that receives it: the room is the thread's again after.
type Chunk struct {
	Tid     int
	Bytes   [2][]byte
	Records int
	// NoCPU says some record's CPU is UnknownCPU (no rseq area).
	NoCPU bool
}

// chunk hands on, as one Chunk, c's records stamped before stamp (0:
// all), at most max (0: no bound); it returns how many.
func (r *Rings) chunk(c *cursor, stamp uint64, max int, fn func(*Chunk)) int {
	size := r.layout.RingSize
	data := c.base + HeaderSize
	var ch Chunk
	piece, start, end := 0, uint64(0), uint64(0) // the piece being gathered: ring offsets
	n := 0
	for c.ok && (stamp == 0 || c.tsc < stamp) && (max == 0 || n < max) {
		off := c.tail & (size - 1)
		if off != end { // the ring wrapped: a second piece
			if end > start {
				ch.Bytes[piece] = r.mem[data+start : data+end]
				piece++
			}
			start = off
		}
		if *r.word(data + off + 8)>>16&0xfff == UnknownCPU {
			ch.NoCPU = true
		}
		end = off + c.length
		c.tail += c.length
		n++
		// The next record, where most are: where this one ended, and
		// committed (next, a loop, is not inlined; this runs for each
		// record a thread makes). Else next looks: padding, the ring's
		// end, a record not committed or a length that cannot be.
		if c.tail < c.head && end+RecordHeader <= size && atomic.LoadUint64(r.word(data+end)) == c.tail+1 {
			w1 := *r.word(data + end + 8)
			if length := w1 & 0xffff; w1>>32 != 0 && length >= RecordHeader && length <= size-end {
				c.length, c.tsc = length, *r.word(data + end + 16)
				continue
			}
		}
		r.next(c)
	}
	if n == 0 {
		return 0
	}
	ch.Bytes[piece] = r.mem[data+start : data+end]
	ch.Tid, ch.Records = c.tid, n
	fn(&ch)
	return n
}

// Line is the clock's line when a drain converted its records' stamps:
// a TSC value, its time, and nanoseconds per tick (Clock.Time).
type Line struct {
	TSC, NS uint64
	PerTSC  float64
}

// Time is the time of a record stamped tsc, as the clock gave it.
func (l Line) Time(tsc uint64) int64 {
	return int64(l.NS) + int64(float64(int64(tsc-l.TSC))*l.PerTSC)
}

// Next puts the chunk's next record in rec (its values where the ring
// holds them) and moves past it; false at the end.
func (c *Chunk) Next(rec *Record) bool {
	if len(c.Bytes[0]) == 0 {
		c.Bytes[0], c.Bytes[1] = c.Bytes[1], nil
		if len(c.Bytes[0]) == 0 {
			return false
		}
	}
	b := c.Bytes[0]
	w1 := *(*uint64)(unsafe.Pointer(&b[8]))
	n := w1 & 0xffff
	// (chunk took only whole records: n is in b, and 8-aligned)
	rec.Tid, rec.Site, rec.CPU, rec.TSC = c.Tid, uint32(w1>>32), int(w1>>16&0xfff), *(*uint64)(unsafe.Pointer(&b[16]))
	rec.Values = unsafe.Slice((*uint64)(unsafe.Pointer(unsafe.SliceData(b[RecordHeader:]))), (n-RecordHeader)/8)
	c.Bytes[0] = b[n:]
	return true
}
