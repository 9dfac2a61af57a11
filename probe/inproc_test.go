package probe

import (
	"bytes"
	"sync/atomic"
	"testing"

	"github.com/probedbg/probe/codegen"
	"github.com/probedbg/probe/fetch"
)

// TestRecordedMemory: a record's memory reads as the stub copied it: a
// string copied whole to its bound reads on as NULs past it, but only
// as the string's own tail: the words at sp, above it, read as recorded,
// and memory further on is not recorded at all.
func TestRecordedMemory(t *testing.T) {
	str := snippet{addr: 0x1000, data: bytes.Repeat([]byte{'x'}, 256), got: 256, want: 256, str: true}
	field := snippet{addr: 0x5000, data: []byte{1, 2, 3, 4, 0, 0, 0, 0}, got: 2, want: 4}
	s := &stackWords{sp: 0x1100, words: []uint64{0x1122334455667788}, snips: []snippet{str, field}, nsnips: 2}
	read := func(addr uint64, n int) ([]byte, error) {
		p := make([]byte, n)
		got, err := s.ReadAt(p, int64(addr))
		return p[:got], err
	}
	if b, err := read(0x1100, 8); err != nil || !bytes.Equal(b, []byte{0x88, 0x77, 0x66, 0x55, 0x44, 0x33, 0x22, 0x11}) {
		t.Errorf("the word at sp, above a cut string: %x, %v", b, err)
	}
	if b, err := read(0x10f0, 4); err != nil || string(b) != "xxxx" {
		t.Errorf("the string's bytes: %q, %v", b, err)
	}
	if b, err := read(0x1200, 4); err != nil || !bytes.Equal(b, make([]byte, 4)) {
		t.Errorf("past the string's bound: %x, %v; want NULs", b, err)
	}
	if b, err := read(0x1000+fetch.MaxStringSize, 4); err == nil {
		t.Errorf("past the longest string: %x, no error", b)
	}
	if b, err := read(0x5000, 4); err == nil || !bytes.Equal(b, []byte{1, 2}) {
		t.Errorf("a read that faulted after 2 bytes: %x, %v", b, err)
	}
}

// TestTallySplitLook: a look at a thread's counters may come between a
// hit's count and its histogram's; the next look hands the histogram's
// part on, though no hit came since, or only hits its filter rejected.
func TestTallySplitLook(t *testing.T) {
	var got []TallyDelta
	p := &Probe{hits: new(atomic.Uint64), handler: Handler{Tally: &Tally{Add: func(d TallyDelta) { got = append(got, d) }}}}
	p.enabled.Store(true)
	tr := &Tracer{inproc: &inproc{quiet: map[int]bool{}}, comms: map[int]string{7: "w"}}
	f := &codegen.Filter{Kind: codegen.FilterCmp, Value: codegen.TallyValue{Reg: 0, Word: -1, Bits: 64, Size: 8}, Op: codegen.OpLT}
	pt := &siteTally{p: p, at: 0, filter: f, values: []codegen.TallyValue{{}}}
	words, last := make([]uint64, pt.words()), make([]uint64, pt.words())
	hist := pt.histAt(0)
	// A hit that passes, its histogram not yet added.
	words[0], words[pt.passedAt()] = 1, 1
	tr.handTally(7, pt, words, last)
	// Its histogram added; then a hit the filter rejects.
	words[hist+3] = 1
	words[hist+codegen.TallySum] = 5
	tr.handTally(7, pt, words, last)
	words[0] = 2
	tr.handTally(7, pt, words, last)
	var hits, values uint64
	var sum int64
	for _, d := range got {
		hits += d.Hits
		for _, n := range d.Hists[0].Buckets {
			values += n
		}
		sum += d.Hists[0].Sum
	}
	if hits != 1 || values != 1 || sum != 5 || p.hits.Load() != 2 {
		t.Fatalf("counted %d hits, %d values, sum %d, %d hits in all; want 1, 1, 5 and 2", hits, values, sum, p.hits.Load())
	}
}

// TestRingSizeDefault: a ring is DefaultWaitingRingSize where its thread
// waits for room, DefaultRingSize where it drops, Tuning.RingSize where
// set.
func TestRingSizeDefault(t *testing.T) {
	for _, c := range []struct {
		tuning Tuning
		want   int
	}{
		{Tuning{}, DefaultRingSize},
		{Tuning{WaitForRoom: true}, DefaultWaitingRingSize},
		{Tuning{WaitForRoom: true, RingSize: 64 << 10}, 64 << 10},
		{Tuning{RingSize: 64 << 10}, 64 << 10},
	} {
		if got := (&Tracer{tuning: c.tuning}).ringSize(); got != c.want {
			t.Errorf("%+v: ring of %d bytes, want %d", c.tuning, got, c.want)
		}
	}
	if DefaultWaitingRingSize >= DefaultRingSize {
		t.Errorf("rings of threads that wait (%d) no smaller than of those that drop (%d)", DefaultWaitingRingSize, DefaultRingSize)
	}
}
