package output

import (
	"bytes"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/probedbg/probe/fetch"
)

func TestTextFormat(t *testing.T) {
	var b bytes.Buffer
	w := NewText(&b, "nop")
	w.Write(&Record{Time: 5123_000123_456, CPU: 1, Tid: 4242, Comm: "loop", Event: "p_work_0", Where: "work+0x0/0x12"})
	w.Write(&Record{Time: 7_000001_999, CPU: 12, Tid: 7, Comm: "a-very-long-nam", Event: "ev", Where: "main.work+0x4/0x20"})
	w.Comment("3 hits lost while detaching")
	w.Flush()
	want := `# tracer: nop
#           TASK-PID     CPU#  TIMESTAMP  FUNCTION
            loop-4242    [001]  5123.000123: p_work_0: (work+0x0/0x12)
 a-very-long-nam-7       [012]     7.000001: ev: (main.work+0x4/0x20)
# 3 hits lost while detaching
`
	if b.String() != want {
		t.Errorf("got\n%s\nwant\n%s", b.String(), want)
	}
}

func TestTextNoEventsNoHeaderUntilFlush(t *testing.T) {
	var b bytes.Buffer
	NewText(&b, "nop")
	if b.Len() != 0 {
		t.Errorf("wrote %q before any event", b.String())
	}
}

// TestStreamKeepsOrder: everything sent is written, in order, by Close.
func TestStreamKeepsOrder(t *testing.T) {
	var b bytes.Buffer
	w := NewText(&b, "nop")
	s := NewStream(w)
	for i := 0; i < 20000; i++ {
		s.Send(Record{Tid: i, Comm: "c", Event: "e", Where: "w"})
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	lines := bytes.Split(bytes.TrimSuffix(b.Bytes(), []byte("\n")), []byte("\n"))
	if len(lines) != 20002 {
		t.Fatalf("%d lines, want 20002", len(lines))
	}
	if want := "               c-19999   [000]     0.000000: e: (w)"; string(lines[20001]) != want {
		t.Errorf("last line %q, want %q", lines[20001], want)
	}
}

// TestStreamCloseAfterTrickle: Close does not wait out the
// FlushInterval for which the writer lets a trickle of records gather:
// it was the last ~10 ms of every probe record.
func TestStreamCloseAfterTrickle(t *testing.T) {
	fastest := time.Hour
	for range 5 {
		s := NewStream(NewText(io.Discard, "nop"))
		s.Send(Record{Tid: 1, Comm: "c", Event: "e", Where: "w"})
		for s.Written() != 1 {
			time.Sleep(100 * time.Microsecond)
		}
		// The writer now gathers the trickle for FlushInterval.
		s.Send(Record{Tid: 1, Comm: "c", Event: "e", Where: "w"})
		start := time.Now()
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		fastest = min(fastest, time.Since(start))
		if s.Written() != 2 {
			t.Fatalf("%d records written, want 2", s.Written())
		}
	}
	if fastest >= FlushInterval/2 {
		t.Errorf("Close took %v at the fastest of 5, waiting for the writer's FlushInterval (%v)", fastest, FlushInterval)
	}
}

// TestStreamSync: Sync returns once the header (and anything sent before
// it) is written, with no record needed to set the writer off.
func TestStreamSync(t *testing.T) {
	var b bytes.Buffer
	s := NewStream(NewText(&b, "nop"))
	s.Sync()
	if want := "# tracer: nop\n#           TASK-PID     CPU#  TIMESTAMP  FUNCTION\n"; b.String() != want {
		t.Errorf("after Sync: %q, want %q", b.String(), want)
	}
	s.Send(Record{Tid: 1, Comm: "c", Event: "e", Where: "w"})
	s.Sync()
	if n := bytes.Count(b.Bytes(), []byte("\n")); n != 3 {
		t.Errorf("after a record and Sync: %d lines, want 3:\n%s", n, b.String())
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s.Sync() // after Close: returns at once
}

func TestTextFunction(t *testing.T) {
	var b bytes.Buffer
	w := NewText(&b, "function")
	for _, r := range []Record{
		loop.entry(5123_000123_456, "work", 0),
		loop.ret(5123_000123_456, 5123_000124_000, "work", 0), // ignored
		loop.entry(5123_000125_000, "jump", 0),
		loop.lost(5123_000126_000, "jump", 0), // ignored
		{Kind: KindEntry, Time: 7_000001_999, CPU: 12, Tid: 7, Comm: "a-very-long-nam", Func: "_start"},
		loop.probe(5123_000127_000, "p_work_0", "work+0x0/0x12"),
	} {
		w.Write(&r)
	}
	w.Finish()
	want := `# tracer: function
#           TASK-PID     CPU#  TIMESTAMP  FUNCTION
            loop-4242    [001]  5123.000123: work <-main
            loop-4242    [001]  5123.000125: jump <-main
 a-very-long-nam-7       [012]     7.000001: _start
            loop-4242    [001]  5123.000127: p_work_0: (work+0x0/0x12)
`
	if b.String() != want {
		t.Errorf("got\n%s\nwant\n%s", b.String(), want)
	}
}

// TestTextIgnoredRecordsWriteNothing: the header waits for a line.
func TestTextIgnoredRecordsWriteNothing(t *testing.T) {
	var b bytes.Buffer
	w := NewText(&b, "function")
	w.Write(&Record{Kind: KindReturn, Func: "work"})
	w.Write(&Record{Kind: KindLost, Func: "work"})
	w.w.Flush()
	if b.Len() != 0 {
		t.Errorf("wrote %q for returns only", b.String())
	}
}

// thread is where a test's records ran; for Go, lane is a goroutine and
// may differ from tid.
type thread struct {
	lane int64
	tid  int
	cpu  int
	comm string
}

func (th thread) record(k Kind, t int64) Record {
	return Record{Kind: k, Time: t, CPU: th.cpu, Pid: th.tid, Tid: th.tid, Comm: th.comm, Lane: th.lane}
}

// entry is a call to fn, from main.
func (th thread) entry(t int64, fn string, depth int) Record {
	r := th.record(KindEntry, t)
	r.Func, r.Caller, r.Depth = fn, "main", depth
	return r
}

func (th thread) ret(start, end int64, fn string, depth int) Record {
	r := th.record(KindReturn, end)
	r.Func, r.Depth, r.EntryTime = fn, depth, start
	return r
}

func (th thread) lost(t int64, fn string, depth int) Record {
	r := th.record(KindLost, t)
	r.Func, r.Depth = fn, depth
	return r
}

func (th thread) probe(t int64, event, where string, fields ...fetch.Field) Record {
	r := th.record(KindProbe, t)
	r.Event, r.Where, r.Fields = event, where, fields
	return r
}

type failingWriter struct{}

func (failingWriter) Write(*Record) error  { return errors.New("broken pipe") }
func (failingWriter) Comment(string) error { return nil }
func (failingWriter) Flush() error         { return nil }
func (failingWriter) Finish() error        { return nil }

// A failed write is signalled, and later records are still taken.
func TestStreamFailed(t *testing.T) {
	s := NewStream(failingWriter{})
	for range 10000 {
		s.Send(Record{})
	}
	select {
	case <-s.Failed():
	case <-time.After(5 * time.Second):
		t.Fatal("no failure signalled")
	}
	if err := s.Close(); err == nil || err.Error() != "broken pipe" {
		t.Errorf("Close: %v, want broken pipe", err)
	}
}

// gateWriter writes nothing until its gate opens.
type gateWriter struct {
	gate chan struct{}
	n    int
}

func (g *gateWriter) Write(*Record) error  { <-g.gate; g.n++; return nil }
func (g *gateWriter) Comment(string) error { return nil }
func (g *gateWriter) Flush() error         { return nil }
func (g *gateWriter) Finish() error        { return nil }

// TestStreamTaken: a producer that fills the stream waits on Taken, which
// is closed once the writer takes what is queued and not before.
func TestStreamTaken(t *testing.T) {
	g := &gateWriter{gate: make(chan struct{})}
	s := NewStreamSize(g, 4)
	s.Send(Record{}) // the writer takes it and blocks in Write
	for s.Room() != 4 {
		time.Sleep(time.Millisecond)
	}
	for range 4 {
		s.Send(Record{})
	}
	taken := s.Taken()
	if s.Room() != 0 {
		t.Fatalf("room %d, want 0", s.Room())
	}
	select {
	case <-taken:
		t.Fatal("Taken closed while the writer is blocked")
	case <-time.After(20 * time.Millisecond):
	}
	close(g.gate)
	select {
	case <-taken:
	case <-time.After(5 * time.Second):
		t.Fatal("Taken not closed after the writer took the batch")
	}
	if err := s.Close(); err != nil || g.n != 5 {
		t.Fatalf("Close: %v, %d records written, want 5", err, g.n)
	}
}
