package probe

import (
	"encoding/json"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/probedbg/probe/ring"
)

// rawSample is the frames of a raw capture: its tables, two sites, a
// thread, an entry and its return, a ring's loss, the thread gone.
func rawSample() (kinds []byte, payloads [][]byte) {
	put := func(kind byte, payload []byte) {
		kinds = append(kinds, kind)
		payloads = append(payloads, append([]byte(nil), payload...))
	}
	e := NewRawEncoder(put)
	e.Begin(RawTables{Pid: 7, Trampoline: 0x1000})
	e.Site(RawSite{ID: 1, Addr: 0x400000, Func: "work", Regs: []int{spOff}, StackWords: 1, Hook: true})
	e.ThreadName(8, "w")
	e.Record(RawRecord{Tid: 8, CPU: 1, Time: 100, Site: 1, Values: []uint64{0x7ff0, 0x401234, 1}})
	e.Record(RawRecord{Tid: 8, CPU: 1, Time: 150, Site: ReturnSite, Values: []uint64{0x7ff0, 42, 0, 0}})
	e.RingLost(8)
	e.ThreadGone(8, 1, 200)
	e.Flush()
	return kinds, payloads
}

// TestRawRoundTrip: an entry and its return, encoded and decoded, are
// the function tracer's entry and return of work, at their times.
func TestRawRoundTrip(t *testing.T) {
	var got []FuncEvent
	rr := NewRawReader(func(ev *FuncEvent) { got = append(got, *ev) })
	kinds, payloads := rawSample()
	for i, k := range kinds {
		if err := rr.Frame(k, payloads[i]); err != nil {
			t.Fatalf("frame %c: %v", k, err)
		}
	}
	if len(got) != 2 || got[0].Kind != FuncEntry || got[1].Kind != FuncReturn || got[0].Func != "work" ||
		got[0].Time != 100 || got[1].Time != 150 || got[1].EntryTime != 100 || got[0].Comm != "w" || got[0].CPU != 1 || got[0].Tid != 8 {
		t.Fatalf("events %+v", got)
	}
}

// FuzzRawFrames: whatever a raw frame holds, after the tables, the
// decoder neither panics nor loops: it decodes or says the frame is
// damaged.
func FuzzRawFrames(f *testing.F) {
	kinds, payloads := rawSample()
	for i := range kinds {
		f.Add(kinds[i], payloads[i])
	}
	site, _ := json.Marshal(RawSite{ID: 2, Regs: []int{4096}, StackWords: -1})
	f.Add(byte(RawSiteFrame), site)
	f.Fuzz(func(t *testing.T, kind byte, payload []byte) {
		rr := NewRawReader(func(*FuncEvent) {})
		ks, ps := rawSample()
		for i := range ks[:3] { // the tables, the site, the thread
			if err := rr.Frame(ks[i], ps[i]); err != nil {
				t.Fatal(err)
			}
		}
		rr.Frame(kind, payload)
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
	b.ResetTimer()
	for b.Loop() {
		b.StopTimer()
		fill()
		b.StartTimer()
		rings.DrainAll(0, func(r *ring.Record) {
			enc.Record(RawRecord{Tid: r.Tid, CPU: r.CPU, Time: int64(r.TSC), Site: r.Site, Values: r.Values})
		})
	}
	b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "records/s")
}
