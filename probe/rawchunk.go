package probe

import (
	"bytes"
	"container/heap"
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"unsafe"

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
	last  int // the length of the last pass's frame put whole
	state chunkState
	line  ring.Line
	rec   ring.Record
}

// Chunk appends a run of a thread's records to the pass's frame; cpu is
// the CPU of its records with none (-1: none has).
func (e *RawEncoder) Chunk(line ring.Line, cpu int, c *ring.Chunk) {
	ce := &e.chunks
	if ce.b == nil {
		select {
		case spare := <-e.spare:
			ce.b = spare[:0]
		default:
			// As big as the last pass's, at the least: grown from
			// nothing, a pass's room was cleared and copied a dozen
			// times, on fresh pages.
			ce.b = make([]byte, 0, max(rawBatch, ce.last+ce.last/4))
		}
	}
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
	ce.state.reset(ce.line.TSC)
	for _, piece := range c.Bytes {
		b = ce.encode(b, piece)
	}
	binary.LittleEndian.PutUint32(b[at:], uint32(len(b)-at-4))
	ce.b = b
}

// recordRoom is the most a record of shortValues values takes encoded:
// its head, its word, its stamp and its values, a varint each.
const recordRoom = 1 + (2+shortValues)*binary.MaxVarintLen64

// shortState is chunkState's last records of shortValues values or
// fewer, as encode keeps them: in arrays, not slices (n: the last's
// count of values; more than shortValues: the last was longer, and
// chunkState has it).
type shortState struct {
	word uint64
	n    int
	vals [shortValues]uint64
}

// encode appends the records of p, back to back as a ring holds them
// (ring.Chunk), read where they lie, in one loop with no call a record
// but for the long ones, and written through a pointer into room made
// once a record: the drain does this for every record a thread makes,
// and must keep up with a thread recording flat out.
func (ce *chunkEncoder) encode(b, p []byte) []byte {
	st := &ce.state
	var short [2]shortState
	for k := range short {
		short[k].load(&st.last[k].word, st.last[k].vals)
	}
	tsc := st.tsc
	i := len(b)
	for len(p) >= ring.RecordHeader {
		rec := unsafe.Pointer(unsafe.SliceData(p))
		w1 := *(*uint64)(unsafe.Add(rec, 8))
		// ring.Rings.chunk took only whole records, but the tracee's
		// memory is the tracee's: a length it wrote over since ends
		// the run here, not the tracer.
		length := w1 & 0xffff
		if length < ring.RecordHeader || length > uint64(len(p)) {
			break
		}
		n := int(length-ring.RecordHeader) / 8
		p = p[ring.RecordHeader+8*n:]
		kind := 0
		if uint32(w1>>32) == ReturnSite {
			kind = 1
		}
		// The word as the reader rebuilds it: site, CPU, whole length.
		word := w1&^(0xf<<28|0xffff) | uint64(ring.RecordHeader+8*n)
		stamp := *(*uint64)(unsafe.Add(rec, 16))
		if n > shortValues {
			for k := range short {
				short[k].store(&st.last[k].word, &st.last[k].vals)
			}
			st.tsc = tsc
			ce.rec = ring.Record{Site: uint32(w1 >> 32), TSC: stamp, Values: unsafe.Slice((*uint64)(unsafe.Add(rec, ring.RecordHeader)), n)}
			last := &st.last[kind]
			if n > len(last.vals) { // (values past the last's are given against 0)
				last.vals = append(last.vals, make([]uint64, n-len(last.vals))...)
			}
			b = ce.encodeLong(b[:i], &ce.rec, word)
			i = len(b)
			short[kind].load(&last.word, last.vals)
			tsc = st.tsc
			continue
		}
		if cap(b)-i < recordRoom {
			b = slices.Grow(b[:i], max(recordRoom, i))
		}
		out := unsafe.Pointer(unsafe.SliceData(b))
		last := &short[kind]
		if n > last.n { // (values past the last's are given against 0)
			clear(last.vals[min(last.n, n):n])
		}
		last.n = n
		// A head of one byte, set as the fields are written.
		at := i
		i++
		head := byte(kind)
		if word != last.word {
			head |= 2
			i = putUvarint(out, i, word)
			last.word = word
		}
		i = putUvarint(out, i, zigzag(int64(stamp-tsc)))
		tsc = stamp
		for k := range n {
			v := *(*uint64)(unsafe.Add(rec, ring.RecordHeader+8*k))
			if d := v - last.vals[k]; d != 0 {
				head |= 4 << k
				i = putUvarint(out, i, zigzag(int64(d)))
				last.vals[k] = v
			}
		}
		*(*byte)(unsafe.Add(out, at)) = head
	}
	for k := range short {
		short[k].store(&st.last[k].word, &st.last[k].vals)
	}
	st.tsc = tsc
	return b[:i]
}

// load takes the last record of a kind from chunkState's word and vals.
func (s *shortState) load(word *uint64, vals []uint64) {
	s.word, s.n = *word, len(vals)
	copy(s.vals[:], vals)
}

// store gives chunkState the last record of a kind, if it was short.
func (s *shortState) store(word *uint64, vals *[]uint64) {
	*word = s.word
	if s.n <= shortValues {
		*vals = append((*vals)[:0], s.vals[:s.n]...)
	}
}

// zigzag is a signed value as encoding/binary's varints give it.
func zigzag(v int64) uint64 { return uint64(v)<<1 ^ uint64(v>>63) }

// putUvarint writes u at out+i as binary.PutUvarint does, into room the
// caller made, and returns where it ended.
func putUvarint(out unsafe.Pointer, i int, u uint64) int {
	for u >= 0x80 {
		*(*byte)(unsafe.Add(out, i)) = byte(u) | 0x80
		u >>= 7
		i++
	}
	*(*byte)(unsafe.Add(out, i)) = byte(u)
	return i + 1
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

// EndChunks puts the pass's frame: its room is put's, and the next
// pass's is what Reuse has given back, if anything (Chunk); a small
// frame is put as a copy.
func (e *RawEncoder) EndChunks() {
	ce := &e.chunks
	if len(ce.b) == 0 {
		return
	}
	if len(ce.b) < rawBatch/4 {
		// A stop's few records: a copy, and the room kept (a frame of
		// a few bytes holding 64 KiB until written, a thousand stops
		// took 64 MiB).
		e.put(RawChunksFrame, bytes.Clone(ce.b))
		ce.b = ce.b[:0]
		return
	}
	b := ce.b
	ce.b, ce.last = nil, len(b)
	e.put(RawChunksFrame, b)
}

// Reuse gives back the room of a chunks frame's payload (RawChunksFrame)
// once put's taker has written it, for a later pass's frame; it may be
// called from another goroutine. A frame's room was a copy made at each
// pass, and the fresh memory the copies took cost the drain of 2M calls
// ~10 ms of page faults (4,000,000 records: 20 MB of frames).
func (e *RawEncoder) Reuse(payload []byte) {
	select {
	case e.spare <- payload:
	default: // (enough kept)
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
