package probe

import (
	"encoding/json"
	"testing"
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
