package output

import (
	"io"
	"testing"
	"time"
)

// graphRecords is a function_graph workload's records: entries and
// returns of a leaf called from main, as the function tracer sends them.
func benchGraphRecord(i int) Record {
	r := Record{Kind: KindEntry, Time: int64(1000 + 200*i), CPU: 1, Pid: 4242, Tid: 4242, Comm: "calls",
		Func: "one", Caller: "main", Depth: 1, Lane: 4242}
	if i%2 == 1 {
		r.Kind, r.EntryTime = KindReturn, r.Time-200
	}
	return r
}

// benchStream sends b.N function tracer records through a Stream into w.
func benchStream(b *testing.B, w Writer) {
	s := NewStream(w)
	b.ReportAllocs()
	b.ResetTimer()
	room := 0
	for i := range b.N {
		for room == 0 {
			// The drain takes what the stream has room for, and
			// waits when it has none.
			if room = min(s.Room(), 1<<14); room == 0 {
				time.Sleep(time.Millisecond)
			}
		}
		s.Send(benchGraphRecord(i))
		room--
	}
	if err := s.Close(); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds()/1e6, "Mrecords/s")
}

func BenchmarkStreamRecorder(b *testing.B) {
	benchStream(b, NewRecorder(io.Discard, RecordingInfo{Tracers: "function_graph"}))
}

func BenchmarkStreamGraphText(b *testing.B) {
	benchStream(b, NewGraph(io.Discard, GraphOptions{}))
}

func BenchmarkStreamText(b *testing.B) {
	benchStream(b, NewText(io.Discard, "function"))
}

func BenchmarkStreamJSON(b *testing.B) {
	benchStream(b, NewJSON(io.Discard))
}

// benchWriter writes b.N records into w directly: the writer's own cost.
func benchWriter(b *testing.B, w Writer) {
	b.ReportAllocs()
	recs := make([]Record, 1024)
	for i := range recs {
		recs[i] = benchGraphRecord(i)
	}
	b.ResetTimer()
	for i := range b.N {
		if err := w.Write(&recs[i%len(recs)]); err != nil {
			b.Fatal(err)
		}
	}
	w.Finish()
	w.Flush()
}

func BenchmarkWriteRecorder(b *testing.B) {
	benchWriter(b, NewRecorder(io.Discard, RecordingInfo{Tracers: "function_graph"}))
}

func BenchmarkWriteGraphText(b *testing.B) { benchWriter(b, NewGraph(io.Discard, GraphOptions{})) }
func BenchmarkWriteText(b *testing.B)      { benchWriter(b, NewText(io.Discard, "function")) }
func BenchmarkWriteJSON(b *testing.B)      { benchWriter(b, NewJSON(io.Discard)) }
