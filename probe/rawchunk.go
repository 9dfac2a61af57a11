package probe

import (
	"bytes"
	"container/heap"
	"encoding/binary"
	"fmt"
	"math"

	"github.com/probedbg/probe/internal/varint"
	"github.com/probedbg/probe/ring"
)

// The records the rings held, in a chunks frame (RawChunksFrame): a
// drain pass's runs of each thread's records (ring.Chunk), each record
// given by what differs from the last of its kind (an entry's or a
// return's) in the same chunk, in a loop tight enough to keep up with
// the threads: the copy as the rings hold them was 104 bytes a call,
// five times the varints', and its write cost the drain more than
// encoding it. The reader merges a pass's chunks by time stamp, as the
// live drain merges the rings.
//
// The frame: the clock's line (its TSC and time as uvarints, its slope
// as float64 bits, 8 bytes), then chunks: the thread and the CPU of its
// records with none (-1: none has), varints; the records' count, a
// uvarint; their bytes' length, 4 bytes; then each record: a head
// (uvarint: bit 0 a return, bit 1 the word of site, CPU and length
// follows, then a bit for each of the first 61 values that follows),
// that word (uvarint), the stamp less the last record's (the first's:
// less the line's; varint), and each value that follows less the last
// of its kind's at its place (varint; values past 61 always follow).

// maskedValues is how many values a record's head can say are
// unchanged; shortValues, how many fit a head of one byte (the function
// tracer's records have three or four).
const (
	maskedValues = 61
	shortValues  = 5
)

// chunkState is what a chunk's records are given against: the last
// record of each kind, an entry's (0) and a return's (1), and the last
// stamp.
type chunkState struct {
	last [2]struct {
		word uint64 // site << 32 | CPU << 16 | length, as the ring has it
		vals []uint64
	}
	tsc uint64
}

func (s *chunkState) reset(tsc uint64) {
	for k := range s.last {
		s.last[k].word, s.last[k].vals = 0, s.last[k].vals[:0]
	}
	s.tsc = tsc
}

func recordKind(site uint32) int {
	if site == ReturnSite {
		return 1
	}
	return 0
}

// chunkEncoder gathers a pass's chunks.
type chunkEncoder struct {
	b     []byte
	state chunkState
	line  ring.Line
	rec   ring.Record
}

// Chunk appends a run of a thread's records to the pass's frame; cpu is
// the CPU of its records with none (-1: none has).
func (e *RawEncoder) Chunk(line ring.Line, cpu int, c *ring.Chunk) {
	ce := &e.chunks
	b := ce.b
	if len(b) == 0 {
		e.Flush()
		b = binary.AppendUvarint(b, line.TSC)
		b = binary.AppendUvarint(b, line.NS)
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(line.PerTSC))
		ce.line = line
	}
	b = binary.AppendVarint(b, int64(c.Tid))
	b = binary.AppendVarint(b, int64(cpu))
	b = binary.AppendUvarint(b, uint64(c.Records))
	at := len(b)
	b = append(b, 0, 0, 0, 0)
	st := &ce.state
	st.reset(ce.line.TSC)
	rec := &ce.rec
	for c.Next(rec) {
		kind := recordKind(rec.Site)
		last := &st.last[kind]
		n := len(rec.Values)
		word := uint64(rec.Site)<<32 | uint64(rec.CPU)<<16 | uint64(ring.RecordHeader+8*n)
		if n > len(last.vals) { // (values past the last's are given against 0)
			last.vals = append(last.vals, make([]uint64, n-len(last.vals))...)
		}
		if n > shortValues {
			b = ce.encodeLong(b, rec, word)
			continue
		}
		// A head of one byte, set as the values are written.
		at := len(b)
		b = append(b, byte(kind))
		if word != last.word {
			b[at] |= 2
			b = binary.AppendUvarint(b, word)
			last.word = word
		}
		b = binary.AppendVarint(b, int64(rec.TSC-st.tsc))
		st.tsc = rec.TSC
		vals := last.vals[:n]
		for i, v := range rec.Values {
			if p := vals[i]; v != p {
				b[at] |= 4 << i
				b = binary.AppendVarint(b, int64(v-p))
				vals[i] = v
			}
		}
		last.vals = vals
	}
	binary.LittleEndian.PutUint32(b[at:], uint32(len(b)-at-4))
	ce.b = b
}

// encodeLong appends rec, of more values than a head of a byte can
// mask, given word.
func (ce *chunkEncoder) encodeLong(b []byte, rec *ring.Record, word uint64) []byte {
	st := &ce.state
	kind := recordKind(rec.Site)
	last := &st.last[kind]
	head := uint64(kind)
	if word != last.word {
		head |= 2
	}
	for i, v := range rec.Values[:min(len(rec.Values), maskedValues)] {
		if v != last.vals[i] {
			head |= 4 << i
		}
	}
	b = binary.AppendUvarint(b, head)
	if head&2 != 0 {
		b = binary.AppendUvarint(b, word)
		last.word = word
	}
	b = binary.AppendVarint(b, int64(rec.TSC-st.tsc))
	st.tsc = rec.TSC
	for i, v := range rec.Values {
		if i >= maskedValues || head&(4<<i) != 0 {
			b = binary.AppendVarint(b, int64(v-last.vals[i]))
		}
	}
	last.vals = append(last.vals[:0], rec.Values...)
	return b
}

// EndChunks puts the pass's frame.
func (e *RawEncoder) EndChunks() {
	if ce := &e.chunks; len(ce.b) > 0 {
		// (a copy of its size: a stop's pass is a few records, the
		// drain's up to a MiB, and the room is reused)
		e.put(RawChunksFrame, bytes.Clone(ce.b))
		ce.b = ce.b[:0]
	}
}

// chunkCursor reads a chunk's records in a frame being read.
type chunkCursor struct {
	tid, cpu int
	d        varint.Reader
	left     uint64 // records not read
	cut      bool   // the frame's cut reaches into the chunk: its end is no damage
	state    chunkState
	rec      ring.Record // the record read, next to hand on
}

// next reads the chunk's next record into c.rec; false at its end, or
// with d.Bad set where it is damaged.
func (c *chunkCursor) next() bool {
	if c.left == 0 {
		return false
	}
	c.left--
	d, st := &c.d, &c.state
	head := d.Uvarint()
	last := &st.last[head&1]
	if head&2 != 0 {
		last.word = d.Uvarint()
	}
	length := last.word & 0xffff
	site := uint32(last.word >> 32)
	if d.Bad || length < ring.RecordHeader || length%8 != 0 || recordKind(site) != int(head&1) {
		d.Bad = true
		return false
	}
	n := int(length-ring.RecordHeader) / 8
	if n > len(last.vals) {
		old := len(last.vals)
		last.vals = append(last.vals, make([]uint64, n-old)...)
		clear(last.vals[old:]) // (stale values past a shorter record)
	}
	last.vals = last.vals[:n]
	st.tsc += uint64(d.Varint())
	for i := range last.vals {
		if i >= maskedValues || head&(4<<i) != 0 {
			last.vals[i] += uint64(d.Varint())
		}
	}
	if d.Bad {
		return false
	}
	cpu := int(last.word >> 16 & 0xfff)
	if cpu == ring.UnknownCPU && c.cpu >= 0 {
		cpu = c.cpu
	}
	c.rec = ring.Record{Tid: c.tid, Site: site, CPU: cpu, TSC: st.tsc, Values: last.vals}
	return true
}

// read hands fn the records of a chunks frame, merged by time stamp
// (h's room reused); named says whether a thread has been named. cut:
// the frame is cut short (FrameCut): the chunks it holds whole, and of
// the one the cut reaches, its records before the cut.
func (h *chunkHeap) read(d *varint.Reader, cut bool, named func(tid int) bool, fn func(RawRecord)) error {
	var line ring.Line
	line.TSC, line.NS = d.Uvarint(), d.Uvarint()
	if d.Bad || len(d.B) < 8 {
		return damaged(cut)
	}
	line.PerTSC = math.Float64frombits(binary.LittleEndian.Uint64(d.B))
	d.B = d.B[8:]
	cs := (*h)[:0]
	for len(d.B) > 0 {
		tid, cpu, count := d.Varint(), d.Varint(), d.Uvarint()
		if (d.Bad || len(d.B) < 4) && cut {
			break
		}
		if d.Bad || len(d.B) < 4 {
			return errRawDamaged
		}
		n := uint64(binary.LittleEndian.Uint32(d.B))
		d.B = d.B[4:]
		if count > n {
			return errRawDamaged // (a record is 2 bytes at the least)
		}
		short := n > uint64(len(d.B))
		if short && !cut {
			return errRawDamaged
		}
		if !named(int(tid)) {
			return fmt.Errorf("records of thread %d, never named", tid)
		}
		n = min(n, uint64(len(d.B)))
		cs = append(cs, chunkCursor{tid: int(tid), cpu: int(cpu), d: varint.Reader{B: d.B[:n]}, left: count, cut: short})
		d.B = d.B[n:]
	}
	*h = cs
	// Each cursor's first record, then the earliest of the cursors'
	// next, as ring.Rings' merge does.
	live := cs[:0]
	for _, c := range cs {
		c.state.reset(line.TSC)
		if c.next() {
			live = append(live, c)
		} else if c.d.Bad && !c.cut {
			return errRawDamaged
		}
	}
	m := live
	heap.Init(&m)
	for len(m) > 0 {
		c := &m[0]
		r := &c.rec
		fn(RawRecord{Tid: r.Tid, CPU: r.CPU, Time: line.Time(r.TSC), Site: r.Site, Values: r.Values})
		if c.next() {
			heap.Fix(&m, 0)
			continue
		}
		if c.d.Bad && !c.cut {
			return errRawDamaged
		}
		heap.Pop(&m)
	}
	return nil
}

// chunkHeap orders chunks by the stamp of their next record.
type chunkHeap []chunkCursor

func (h chunkHeap) Len() int           { return len(h) }
func (h chunkHeap) Less(i, j int) bool { return h[i].rec.TSC < h[j].rec.TSC }
func (h chunkHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *chunkHeap) Push(x any)        { *h = append(*h, x.(chunkCursor)) }
func (h *chunkHeap) Pop() any {
	old := *h
	c := old[len(old)-1]
	*h = old[:len(old)-1]
	return c
}
