package probe

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/probedbg/probe/fetch"
	"github.com/probedbg/probe/ring"
	"github.com/probedbg/probe/symbols"
)

// rawSample is the frames of a raw capture: its tables, two sites, a
// thread, an entry and its return as the rings held them (a chunk),
// another pair made at stops, a ring's loss, the thread gone.
func rawSample() (kinds []byte, payloads [][]byte) {
	put := func(kind byte, payload []byte) {
		kinds = append(kinds, kind)
		payloads = append(payloads, append([]byte(nil), payload...))
	}
	e := NewRawEncoder(put)
	e.Begin(RawTables{Pid: 7, Trampoline: 0x1000})
	e.Probe(RawProbe{ID: 1, Group: "probe", Event: "p_work_0", Args: []string{"x=%di:s64", "y=x*2", "if", "y", ">=", "0"}})
	e.Site(RawSite{ID: 1, Addr: 0x400000, Func: "work", Regs: []int{spOff}, StackWords: 1, Hook: true, Where: "work+0x0/0x10", Probes: []int{1}})
	e.ThreadName(8, "w")
	chunk := append(ringRecord(1, 1, 1100, 0x7ff0, 0x401234, 1), ringRecord(ReturnSite, ring.UnknownCPU, 1150, 0x7ff0, 42, 0, 0)...)
	e.Chunk(ring.Line{TSC: 1000, NS: 0, PerTSC: 1}, 3, &ring.Chunk{Tid: 8, Bytes: [2][]byte{chunk[:48], chunk[48:]}, Records: 2})
	e.EndChunks()
	e.Record(RawRecord{Tid: 8, CPU: 1, Time: 300, Site: 1, Values: []uint64{0x7ff0, 0x401234, 1}})
	e.Record(RawRecord{Tid: 8, CPU: 1, Time: 350, Site: ReturnSite, Values: []uint64{0x7ff0, 43, 0, 0}})
	e.RingLost(8)
	e.ThreadGone(8, 1, 400)
	e.Flush()
	return kinds, payloads
}

// ringRecord is a record as a ring holds it (ring's layout).
func ringRecord(site uint32, cpu int, tsc uint64, values ...uint64) []byte {
	b := binary.LittleEndian.AppendUint64(nil, 1) // (its commit stamp: not read)
	b = binary.LittleEndian.AppendUint64(b, uint64(site)<<32|uint64(cpu)<<16|uint64(ring.RecordHeader+8*len(values)))
	b = binary.LittleEndian.AppendUint64(b, tsc)
	for _, v := range values {
		b = binary.LittleEndian.AppendUint64(b, v)
	}
	return b
}

// TestRawRoundTrip: an entry and its return, from the rings and from
// stops, encoded and decoded, are the function tracer's entries and
// returns of work, at their times, on their CPUs (the chunk's for a
// record with none).
func TestRawRoundTrip(t *testing.T) {
	var got []FuncEvent
	var hits []string
	rr := NewRawReader(DecodeHandlers{Func: func(ev *FuncEvent) { got = append(got, *ev) },
		Probe: func(h *Hit) {
			hits = append(hits, fmt.Sprintf("%s %s %d %d %s", h.Probe.Event, h.Where, h.Tid, h.Time, fetch.AppendFields(nil, h.Fields)))
		}})
	kinds, payloads := rawSample()
	for i, k := range kinds {
		if err := rr.Frame(k, payloads[i]); err != nil {
			t.Fatalf("frame %c: %v", k, err)
		}
	}
	type ev struct {
		kind      FuncEventKind
		time, ent int64
		cpu       int
	}
	var evs []ev
	for _, g := range got {
		if g.Func != "work" || g.Comm != "w" || g.Tid != 8 {
			t.Fatalf("event %+v", g)
		}
		e := ev{kind: g.Kind, time: g.Time, cpu: g.CPU}
		if g.Kind == FuncReturn {
			e.ent = g.EntryTime
		}
		evs = append(evs, e)
	}
	want := []ev{{FuncEntry, 100, 0, 1}, {FuncReturn, 150, 100, 3}, {FuncEntry, 300, 0, 1}, {FuncReturn, 350, 300, 1}}
	if !slices.Equal(evs, want) {
		t.Fatalf("events %+v, want %+v", evs, want)
	}
	// The probe at work's entry: its fetch-args compiled from their
	// text, at both entries (%di not recorded: 0).
	if w := []string{"p_work_0 work+0x0/0x10 8 100  x=0 y=0", "p_work_0 work+0x0/0x10 8 300  x=0 y=0"}; !slices.Equal(hits, w) {
		t.Fatalf("probe hits %q, want %q", hits, w)
	}
}

// FuzzRawFrames: whatever a raw frame holds, after the tables, the
// decoder neither panics nor loops: it decodes or says the frame is
// damaged; nor when the frame is taken for one cut short (FrameCut).
func FuzzRawFrames(f *testing.F) {
	kinds, payloads := rawSample()
	for i := range kinds {
		f.Add(kinds[i], payloads[i])
	}
	site, _ := json.Marshal(RawSite{ID: 2, Regs: []int{4096}, StackWords: -1})
	f.Add(byte(RawSiteFrame), site)
	NewRawEncoder(func(kind byte, payload []byte) { f.Add(kind, payload) }).Module(RawModule{ID: 1, Name: "m", Bias: 0x1000,
		Ranges: [][2]uint64{{0x2000, 0x3000}}, Funcs: []symbols.Symbol{{Name: "f", Addr: 0x1000, Size: 8, Func: true}}, Objects: []symbols.Symbol{{Name: "o", Addr: 0x1800, Size: 8}}})
	f.Fuzz(func(t *testing.T, kind byte, payload []byte) {
		rr := NewRawReader(DecodeHandlers{Func: func(*FuncEvent) {}, Probe: func(*Hit) {}})
		ks, ps := rawSample()
		for i := range ks[:4] { // the tables, the probe, the site, the thread
			if err := rr.Frame(ks[i], ps[i]); err != nil {
				t.Fatal(err)
			}
		}
		rr.Frame(kind, payload)
		rr.FrameCut(kind, payload)
		rr.Frame(kind, payload)
	})
}

// BenchmarkRawCapture is one drain's capture throughput, the rings
// merged and each record encoded raw (issue 36: at least 10 million
// records a second): 65,536 function_graph records, an entry (sp, the
// return address, hooked) and a return (slot, results, errno) in turn,
// as a thread's ring holds them, reported as records/s.
func BenchmarkRawCapture(b *testing.B) {
	const n = 1 << 16
	l := ring.Layout{Slots: 1, RingSize: 8 << 20}
	mem, err := unix.Mmap(-1, 0, int(l.Size()), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_ANONYMOUS)
	if err != nil {
		b.Fatal(err)
	}
	defer unix.Munmap(mem)
	word := func(off uint64) *uint64 { return (*uint64)(unsafe.Pointer(&mem[off])) }
	base := uint64(ring.FirstRingOff)
	*word(base + ring.OwnerOff) = 1000
	data := base + ring.HeaderSize
	fill := func() {
		pos := uint64(0)
		for i := range n {
			site, vals := uint32(1), []uint64{0x7ffd0000 - uint64(i%16)*64, 0x401234, 1}
			if i%2 == 1 {
				site, vals = ReturnSite, []uint64{0x7ffd0000 - uint64(i%16)*64, uint64(i), 0, 0}
			}
			length := uint64(ring.RecordHeader + 8*len(vals))
			*word(data + pos + 8) = uint64(site)<<32 | 1<<16 | length
			*word(data + pos + 16) = uint64(1000 + 50*i)
			for k, v := range vals {
				*word(data + pos + ring.RecordHeader + uint64(8*k)) = v
			}
			*word(data + pos) = pos + 1
			pos += length
		}
		*word(base + ring.HeadOff), *word(base + ring.TailOff) = pos, 0
	}
	rings := ring.New(mem, l)
	enc := NewRawEncoder(func(byte, []byte) {})
	line := ring.Line{PerTSC: 1}
	b.ResetTimer()
	for b.Loop() {
		b.StopTimer()
		fill()
		b.StartTimer()
		for rings.DrainAll(rawPassMax, ring.Take{Chunk: func(c *ring.Chunk) { enc.Chunk(line, -1, c) }}) > 0 {
			enc.EndChunks()
		}
	}
	b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "records/s")
}
