package probe

import (
	"encoding/binary"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/probedbg/probe/internal/varint"
	"github.com/probedbg/probe/ring"
)

// TestRawChunksRoundTrip: three threads' records of every shape (entries
// and returns; no values, the function tracer's three and four, seven,
// seventy; values repeated and not; CPUs known and not), in chunks of
// two pieces, come back from a chunks frame with their values, merged by
// time stamp, timed by the frame's line, the chunk's CPU given to those
// with none. Cut anywhere (a recorder killed as it wrote the frame), it
// gives each thread's records up to the cut, and no error.
func TestRawChunksRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	line := ring.Line{TSC: 5000, NS: 1e9, PerTSC: 0.5}
	type rec struct {
		tid, cpu int
		site     uint32
		tsc      uint64
		vals     []uint64
	}
	var want []rec
	var chunks []*ring.Chunk
	fallback := map[int]int{5: 2, 6: -1, 7: 9}
	stamps := rng.Perm(3000)
	for k, tid := range []int{5, 6, 7} {
		mine := slices.Sorted(slices.Values(stamps[k*1000 : k*1000+1000]))
		var b []byte
		var bounds []int
		prev := []uint64{1, 2, 3, 4, 5, 6, 7}
		for _, s := range mine {
			r := rec{tid: tid, cpu: rng.IntN(8), site: uint32(1 + rng.IntN(3)), tsc: 5000 + uint64(s)*7}
			if rng.IntN(2) == 0 {
				r.site = ReturnSite
			}
			if rng.IntN(10) == 0 {
				r.cpu = ring.UnknownCPU
			}
			n := []int{0, 3, 4, 4, 3, 7, 70}[rng.IntN(7)]
			for i := range n {
				v := rng.Uint64()
				if i < len(prev) && rng.IntN(2) == 0 {
					v = prev[i]
				}
				r.vals = append(r.vals, v)
			}
			prev = append(prev[:0], r.vals...)
			bounds = append(bounds, len(b))
			b = append(b, ringRecord(r.site, r.cpu, r.tsc, r.vals...)...)
			if r.cpu == ring.UnknownCPU && fallback[tid] >= 0 {
				r.cpu = fallback[tid]
			}
			want = append(want, r)
		}
		cut := bounds[rng.IntN(len(bounds))]
		chunks = append(chunks, &ring.Chunk{Tid: tid, Bytes: [2][]byte{b[:cut], b[cut:]}, Records: len(mine)})
	}
	slices.SortFunc(want, func(a, b rec) int { return int(a.tsc) - int(b.tsc) })
	var frames [][]byte
	e := NewRawEncoder(func(kind byte, payload []byte) {
		if kind != RawChunksFrame {
			t.Fatalf("a frame %c", kind)
		}
		frames = append(frames, payload)
	})
	for _, c := range chunks {
		e.Chunk(line, fallback[c.Tid], c)
	}
	e.EndChunks()
	if len(frames) != 1 {
		t.Fatalf("%d frames", len(frames))
	}
	var got []rec
	var h chunkHeap
	err := h.read(&varint.Reader{B: frames[0]}, false, func(int) bool { return true }, func(r RawRecord) {
		if r.Time != line.Time(want[len(got)].tsc) {
			t.Fatalf("record %d: time %d, want %d", len(got), r.Time, line.Time(want[len(got)].tsc))
		}
		got = append(got, rec{tid: r.Tid, cpu: r.CPU, site: r.Site, tsc: want[len(got)].tsc, vals: slices.Clone(r.Values)})
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("%d records, want %d", len(got), len(want))
	}
	for i := range want {
		w, g := want[i], got[i]
		if g.tid != w.tid || g.cpu != w.cpu || g.site != w.site || !slices.Equal(g.vals, w.vals) && len(w.vals)+len(g.vals) > 0 {
			t.Fatalf("record %d: %+v, want %+v", i, g, w)
		}
	}
	t.Logf("%d records: %d bytes, %.1f a record", len(want), len(frames[0]), float64(len(frames[0]))/float64(len(want)))

	byThread := map[int][]rec{}
	for _, w := range want {
		byThread[w.tid] = append(byThread[w.tid], w)
	}
	frame := frames[0]
	most := 0
	for cut := 0; cut <= len(frame); cut += 1 + rng.IntN(997) {
		seen := map[int]int{}
		var last uint64
		err := h.read(&varint.Reader{B: frame[:cut]}, true, func(int) bool { return true }, func(r RawRecord) {
			w := byThread[r.Tid][seen[r.Tid]]
			if r.Time < int64(last) || r.Time != line.Time(w.tsc) || r.Site != w.site || !slices.Equal(r.Values, w.vals) && len(w.vals)+len(r.Values) > 0 {
				t.Fatalf("cut at %d: thread %d's record %d: %+v, want %+v", cut, r.Tid, seen[r.Tid], r, w)
			}
			last = uint64(r.Time)
			seen[r.Tid]++
		})
		if err != nil {
			t.Fatalf("cut at %d of %d: %v", cut, len(frame), err)
		}
		n := seen[5] + seen[6] + seen[7]
		if n < most {
			t.Fatalf("cut at %d: %d records, fewer than a shorter cut's %d", cut, n, most)
		}
		most = n
	}
	// (The last thread's chunk is the frame's end: a cut there leaves the
	// first two whole.)
	seen := 0
	h.read(&varint.Reader{B: frame[:len(frame)-1]}, true, func(int) bool { return true }, func(RawRecord) { seen++ })
	if seen < 2000 || seen >= len(want) {
		t.Errorf("cut one byte short: %d records, want the first two threads' 2000 and some of the third's", seen)
	}
	if err := h.read(&varint.Reader{B: frame[:len(frame)-1]}, false, func(int) bool { return true }, func(RawRecord) {}); err == nil {
		t.Error("a frame cut short read as whole: no error")
	}
}

// TestRawChunksReuse: a chunks frame's room given back (Reuse) is the
// next pass's, a frame not given back is never written over, and a
// small frame (a stop's few records) is a copy of its size, not a
// pass's room.
func TestRawChunksReuse(t *testing.T) {
	var frames [][]byte
	e := NewRawEncoder(func(kind byte, payload []byte) { frames = append(frames, payload) })
	pass := func(tsc uint64, records int) []byte {
		var b []byte
		for i := range records {
			b = append(b, ringRecord(1, 0, tsc+uint64(i)*1000, uint64(i)<<40, 8, 9)...)
		}
		e.Chunk(ring.Line{TSC: tsc}, -1, &ring.Chunk{Tid: 5, Bytes: [2][]byte{b}, Records: records})
		e.EndChunks()
		return frames[len(frames)-1]
	}
	big := 4000 // (records of ~10 bytes: a frame past rawBatch/4)
	first := pass(100, big)
	if len(first) < rawBatch/4 {
		t.Fatalf("a frame of %d bytes: not a big one", len(first))
	}
	kept := slices.Clone(first)
	second := pass(200, big)
	if !slices.Equal(first, kept) {
		t.Fatal("a frame not given back was written over")
	}
	e.Reuse(second)
	third := pass(300, big)
	if &third[0] != &second[0] {
		t.Error("the room given back was not reused")
	}
	if !slices.Equal(first, kept) || slices.Equal(third, kept) {
		t.Error("frames not as encoded")
	}
	if small := pass(400, 2); cap(small) >= rawBatch/4 {
		t.Errorf("a frame of %d bytes holds %d bytes of room", len(small), cap(small))
	}
}

// TestRawChunksBadLength: a record whose length the tracee wrote over
// after the ring's walk took it (too long for what is left, or shorter
// than a header) ends the chunk's run; the tracer does not panic.
func TestRawChunksBadLength(t *testing.T) {
	for _, length := range []uint64{0, 8, ring.RecordHeader + 8*40, 0xffff} {
		good := ringRecord(1, 0, 100, 7)
		bad := ringRecord(1, 0, 200, 8, 9)
		binary.LittleEndian.PutUint64(bad[8:], 1<<32|length)
		var frames [][]byte
		e := NewRawEncoder(func(kind byte, payload []byte) { frames = append(frames, payload) })
		e.Chunk(ring.Line{TSC: 100}, -1, &ring.Chunk{Tid: 5, Bytes: [2][]byte{slices.Concat(good, bad)}, Records: 2})
		e.EndChunks()
		if len(frames) != 1 {
			t.Errorf("length %d: %d frames, want 1", length, len(frames))
		}
	}
}
