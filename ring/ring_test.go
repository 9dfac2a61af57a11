package ring

import (
	"encoding/binary"
	"math/rand/v2"
	"slices"
	"testing"
)

// producer writes records as codegen.RecordRoutine and a stub do, for
// the reader's tests: reserve (with padding to the ring's end), fill,
// commit last.
type producer struct {
	mem  []byte
	l    Layout
	base uint64 // the ring's header
}

func (p *producer) word(off uint64) uint64 { return binary.LittleEndian.Uint64(p.mem[off:]) }
func (p *producer) put(off, v uint64)      { binary.LittleEndian.PutUint64(p.mem[off:], v) }

// reserve returns where the record of length n goes and its stamp, or
// false when the ring is full (counted, as the routine does).
func (p *producer) reserve(n uint64) (at, stamp uint64, ok bool) {
	size := p.l.RingSize
	h := p.word(p.base + HeadOff)
	off := h & (size - 1)
	need := n
	if off+n > size {
		need += size - off
	}
	if h+need-p.word(p.base+TailOff) > size {
		p.put(p.base+LostOff, p.word(p.base+LostOff)+1)
		return 0, 0, false
	}
	p.put(p.base+HeadOff, h+need)
	pos := h + need - n
	data := p.base + HeaderSize
	if pad := pos - h; pad >= PadHeader {
		p.put(data+off+8, pad)
		p.put(data+off, h+1)
	}
	return data + pos&(size-1), pos + 1, true
}

func (p *producer) record(site uint32, cpu int, tsc uint64, values ...uint64) (at, stamp uint64, ok bool) {
	n := uint64(RecordHeader + 8*len(values))
	at, stamp, ok = p.reserve(n)
	if !ok {
		return 0, 0, false
	}
	p.put(at+8, uint64(site)<<32|uint64(cpu)<<16|n)
	p.put(at+16, tsc)
	for i, v := range values {
		p.put(at+RecordHeader+uint64(8*i), v)
	}
	return at, stamp, true
}

func newRing(t *testing.T, ringSize uint64) (*Rings, *producer) {
	t.Helper()
	l := Layout{Slots: 2, RingSize: ringSize, TidOff: 0x2d0}
	if err := l.Check(); err != nil {
		t.Fatal(err)
	}
	mem := make([]byte, l.Size())
	p := &producer{mem: mem, l: l, base: FirstRingOff + l.Stride()} // the second ring
	p.put(p.base+OwnerOff, 4242)
	return New(mem, l), p
}

// TestDrainWraps: records of changing lengths go round a small ring many
// times, padded where one would cross the end (with a header, or in the
// last 8 bytes without one); the reader hands on each, in order, with its
// values, and frees their room: one at a time, or as chunks (in one or
// two pieces, no padding).
func TestDrainWraps(t *testing.T) {
	for _, chunks := range []bool{false, true} {
		r, p := newRing(t, 4096)
		var next, got uint64
		check := func(rec *Record) {
			if rec.Tid != 4242 || rec.TSC != got || len(rec.Values) != int(got%7) || rec.CPU != int(got%4) || rec.Site != uint32(1+got%3) {
				t.Fatalf("chunks %v: record %d: %+v", chunks, got, *rec)
			}
			for i, v := range rec.Values {
				if v != got*10+uint64(i) {
					t.Fatalf("chunks %v: record %d value %d: %d", chunks, got, i, v)
				}
			}
			got++
		}
		take := Take{Record: check}
		if chunks {
			take = Take{Chunk: func(c *Chunk) {
				var rec Record
				for c.Next(&rec) {
					check(&rec)
				}
			}}
		}
		for round := range 2000 {
			nv := round % 7
			vals := make([]uint64, nv)
			for i := range vals {
				vals[i] = next*10 + uint64(i)
			}
			at, stamp, ok := p.record(uint32(1+round%3), round%4, next, vals...)
			if !ok {
				t.Fatalf("round %d: full with the reader caught up", round)
			}
			p.put(at, stamp)
			next++
			if round%5 == 4 {
				r.Drain(0, take)
			}
		}
		if got != next {
			t.Fatalf("chunks %v: read %d records of %d", chunks, got, next)
		}
		if !r.Drained(4242) || r.Lost(nil).Total() != 0 {
			t.Fatalf("chunks %v: drained %v, lost %+v", chunks, r.Drained(4242), r.Lost(nil))
		}
	}
}

// TestDrainWaitsForCommit: a record reserved and not committed (its
// thread is in the middle of it, or a signal handler's record came after
// it) stops the reader there until it is; a full ring counts its drops.
func TestDrainWaitsForCommit(t *testing.T) {
	r, p := newRing(t, 4096)
	at1, stamp1, _ := p.record(1, 0, 100, 1)
	at2, stamp2, _ := p.record(1, 0, 101, 2) // the handler's, committed first
	p.put(at2, stamp2)
	var seen []uint64
	collect := func(rec *Record) { seen = append(seen, rec.Values[0]) }
	if n := r.Drain(0, Take{Record: collect}); n != 0 {
		t.Fatalf("drained %d past a record not committed", n)
	}
	p.put(at1, stamp1)
	if n := r.Drain(0, Take{Record: collect}); n != 2 || seen[0] != 1 || seen[1] != 2 {
		t.Fatalf("after the commit: %d records, %v", n, seen)
	}
	dropped := 0
	for {
		if _, _, ok := p.record(1, 0, 0, 7, 7, 7); !ok {
			dropped++
			if dropped == 3 {
				break
			}
		}
	}
	if l := r.Lost(nil); l.Full[4242] != 3 {
		t.Fatalf("lost %+v, want 3 for tid 4242", l)
	}
	if lost, ok := r.Free(4242); !ok || lost != 3+1 { // and the uncommitted last: its thread is gone
		t.Fatalf("Free: %d, %v", lost, ok)
	}
}

// TestDrainMerges: two threads' rings are handed on in the order of their
// records' stamps, as the kernel merges its per-CPU buffers; a thread's
// record not committed holds back its later ones, not the other
// thread's; DrainBefore stops at a stamp, with the threads' rings
// found from their ids; Drain at the moment it began, DrainAll nowhere.
func TestDrainMerges(t *testing.T) {
	r, b := newRing(t, 4096)
	a := &producer{mem: b.mem, l: b.l, base: FirstRingOff} // the first ring
	a.put(a.base+OwnerOff, 7)
	commit := func(p *producer, tsc uint64) (uint64, uint64) {
		at, stamp, ok := p.record(1, 0, tsc, tsc)
		if !ok {
			t.Fatal("full")
		}
		return at, stamp
	}
	for _, tsc := range []uint64{10, 30, 31, 60} {
		at, stamp := commit(a, tsc)
		a.put(at, stamp)
	}
	heldAt, heldStamp := commit(b, 20) // reserved, committed later
	for _, tsc := range []uint64{40, 50} {
		at, stamp := commit(b, tsc)
		b.put(at, stamp)
	}
	var seen []uint64
	collect := func(rec *Record) { seen = append(seen, rec.TSC) }
	r.setTidTable(7, 0) // as the record routine does when it claims a ring not its id's
	r.setTidTable(4242, 1)
	if n := r.DrainBefore([]int{7, 4242}, 31, 0, Take{Record: collect}); n != 2 || !slices.Equal(seen, []uint64{10, 30}) {
		t.Fatalf("before 31: %d records, %v", n, seen)
	}
	b.put(heldAt, heldStamp)
	seen = nil
	if n := r.Drain(3, Take{Record: collect}); n != 3 || !slices.Equal(seen, []uint64{20, 31, 40}) {
		t.Fatalf("3 of the rest: %d records, %v", n, seen)
	}
	// Stamped after the pass began (a record made while it looks at
	// the rings): the next pass's, or DrainAll's.
	future := rdtsc() + 1<<50
	at, stamp := commit(a, future)
	a.put(at, stamp)
	seen = nil
	if n := r.Drain(0, Take{Record: collect}); n != 2 || !slices.Equal(seen, []uint64{50, 60}) || r.Drained(7) || !r.Drained(4242) {
		t.Fatalf("the rest: %d records, %v", n, seen)
	}
	seen = nil
	if n := r.DrainAll(0, Take{Record: collect}); n != 1 || !slices.Equal(seen, []uint64{future}) || !r.Drained(7) {
		t.Fatalf("DrainAll: %d records, %v", n, seen)
	}
}

// eightRings is eight threads' rings holding n records, stamped 1 to n
// (each its stamp for value), each in a ring picked at random.
func eightRings(t *testing.T, n uint64) (*Rings, *rand.Rand) {
	t.Helper()
	l := Layout{Slots: 8, RingSize: 1 << 16, TidOff: 0x2d0}
	mem := make([]byte, l.Size())
	r := New(mem, l)
	rng := rand.New(rand.NewPCG(1, 2))
	var producers []*producer
	for slot := range l.Slots {
		p := &producer{mem: mem, l: l, base: FirstRingOff + uint64(slot)*l.Stride()}
		p.put(p.base+OwnerOff, uint64(100+slot))
		producers = append(producers, p)
	}
	for stamp := uint64(1); stamp <= n; stamp++ {
		p := producers[rng.IntN(len(producers))]
		at, commit, ok := p.record(1, 0, stamp, stamp)
		if !ok {
			t.Fatal("full")
		}
		p.put(at, commit)
	}
	return r, rng
}

// TestDrainMergesMany: eight threads' records with stamps in random
// order between the rings (increasing in each) come out sorted by stamp,
// in passes of random sizes, none lost or doubled.
func TestDrainMergesMany(t *testing.T) {
	const records = 2000
	r, rng := eightRings(t, records)
	var seen []uint64
	for len(seen) < records {
		if r.Drain(1+rng.IntN(50), Take{Record: func(rec *Record) { seen = append(seen, rec.TSC) }}) == 0 {
			t.Fatalf("nothing more after %d records", len(seen))
		}
	}
	for i, s := range seen {
		if s != uint64(i+1) {
			t.Fatalf("record %d has stamp %d", i, s)
		}
	}
}

// TestDrainChunks: as chunks, a pass of random size hands whole runs of
// rings, each a thread's records in order, none lost or doubled.
func TestDrainChunks(t *testing.T) {
	const records = 2000
	r, rng := eightRings(t, records)
	last := map[int]uint64{}
	total := 0
	for total < records {
		max := 1 + rng.IntN(50)
		n := r.Drain(max, Take{Chunk: func(c *Chunk) {
			var rec Record
			got := 0
			for c.Next(&rec) {
				if rec.TSC <= last[rec.Tid] || rec.Values[0] != rec.TSC {
					t.Fatalf("thread %d: stamp %d after %d, value %d", rec.Tid, rec.TSC, last[rec.Tid], rec.Values[0])
				}
				last[rec.Tid] = rec.TSC
				got++
			}
			if got != c.Records {
				t.Fatalf("chunk of %d records holds %d", c.Records, got)
			}
			total += got
		}})
		if n == 0 || n > max {
			t.Fatalf("a pass of at most %d: %d records, after %d", max, n, total)
		}
	}
	if total != records {
		t.Fatalf("%d records of %d", total, records)
	}
}

// TestAhead: the pages a ring's thread is about to write are given once
// each, from the ring's start, FaultWindow past its head or four times
// what it wrote since the last look, never past the ring's end; a ring
// nobody owns gets none. OwnerPages is each ring's first page.
func TestAhead(t *testing.T) {
	l := Layout{Base: 0x10000000, Slots: 2, RingSize: 1 << 20, TidOff: 0x2d0}
	mem := make([]byte, l.Size())
	r := New(mem, l)
	p := &producer{mem: mem, l: l, base: FirstRingOff + l.Stride()}
	p.put(p.base+OwnerOff, 4242)
	data := l.Base + p.base + HeaderSize
	pages := func(from, to uint64) []uint64 {
		var want []uint64
		for a := from; a < to; a += 4096 {
			want = append(want, data+a)
		}
		return want
	}
	look := func(head uint64, want []uint64) {
		t.Helper()
		p.put(p.base+HeadOff, head) // reserved, never committed: nothing to hand on
		if n := r.Drain(0, Take{Record: func(*Record) {}}); n != 0 {
			t.Fatalf("head %d: %d records handed on", head, n)
		}
		if got := r.Ahead(); !slices.Equal(got, want) {
			t.Fatalf("head %d: pages %#x, want %#x", head, got, want)
		}
		if got := r.Ahead(); got != nil {
			t.Fatalf("head %d: pages given twice: %#x", head, got)
		}
	}
	look(0, pages(0, FaultWindow))
	look(100, pages(FaultWindow, FaultWindow+4096))
	look(200, nil)
	// 100 KiB written since: four times that ahead, rounded up to a page.
	look(100<<10, pages(FaultWindow+4096, (100<<10+4*(100<<10-200)+4095)&^4095))
	look(900<<10, pages((100<<10+4*(100<<10-200)+4095)&^4095, 1<<20))
	look(5<<20, nil) // the ring's pages are all mapped: a wrapped ring faults no more
	if got, want := r.OwnerPages(), []uint64{l.Base + FirstRingOff, l.Base + FirstRingOff + l.Stride()}; !slices.Equal(got, want) {
		t.Errorf("owner pages %#x, want %#x", got, want)
	}
}

// TestShadowReturns: the in-process trampoline, come from a slot, finds a
// frame there under the frames below it (which it drops), and none where
// the next frame is above the slot or there is none.
func TestShadowReturns(t *testing.T) {
	r, _ := newRing(t, 4096)
	if r.ShadowReturns(4242, 0x1000) {
		t.Fatal("a frame found on an empty stack")
	}
	if !r.SetShadow(4242, []ShadowFrame{{Slot: 0x3000, Ret: 1}, {Slot: 0x2000, Ret: 2}, {Slot: 0x1800, Ret: 3}}) {
		t.Fatal("SetShadow")
	}
	for slot, want := range map[uint64]bool{0x2000: true, 0x3000: true, 0x1800: true, 0x2800: false, 0x1000: false, 0x4000: false} {
		if got := r.ShadowReturns(4242, slot); got != want {
			t.Errorf("ShadowReturns(%#x) = %v, want %v", slot, got, want)
		}
	}
	if r.ShadowReturns(7, 0x2000) {
		t.Error("a frame found for a thread without a ring")
	}
}
