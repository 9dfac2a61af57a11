// Package output turns event records into the formats users read, after
// ftrace's tracers: the text trace (nop and function), function_graph,
// the function profile and the stack tracer's report.
//
//	w := output.NewText(os.Stdout, "nop")
//	w.Write(&output.Record{...}); w.Close()
package output

import (
	"bufio"
	"fmt"
	"io"

	"github.com/probedbg/probe/probe"
)

// Kind says what a Record reports.
type Kind uint8

const (
	KindProbe  Kind = iota // a probe fired: Event, Where, Fields
	KindEntry              // a traced function was entered: Func, Caller, Depth
	KindReturn             // a traced function returned: Func, Depth, EntryTime
	KindLost               // a traced call will never be seen returning (longjmp, exception, exit): Func, Depth
)

// Record is one event, as the tracer saw it.
type Record struct {
	Kind   Kind
	Time   int64 // CLOCK_MONOTONIC nanoseconds
	CPU    int
	Pid    int
	Tid    int
	Comm   string
	Event  string // the event name, e.g. p_work_0
	Where  string // sym+0xoff/0xsize, or caller+0xoff/0xsize <- func
	Fields []probe.Field

	// Function tracer events.
	Func      string // the traced function
	Caller    string // KindEntry: the function it was called from
	Depth     int    // nesting level of the call, 0 = outermost traced call
	EntryTime int64  // KindReturn: when the call began
	Lane      int64  // the call stack the event belongs to: the thread, or for Go the goroutine
	Goroutine int64  // the Go goroutine id, or 0
}

// Writer is one output format.
type Writer interface {
	Write(*Record) error
	// Comment adds a line that is not an event (a lost-event count...).
	Comment(string) error
	// Flush writes out what is buffered; it is called whenever the event
	// queue runs dry, so it must not change what a finished trace looks
	// like.
	Flush() error
	// Finish ends the trace: what a writer held back (a function_graph
	// call waiting to learn whether it is a leaf, a profile's table) is
	// written. Comments may still follow.
	Finish() error
}

// Text writes ftrace's trace format: probe events, and for the function
// tracer one line per call entered:
//
//	loop-4242    [001] 5123.000123: p_work_0: (work+0x0/0x12)
//	loop-4242    [001] 5123.000125: work <-main
type Text struct {
	w      *bufio.Writer
	tracer string
	header bool   // written
	line   []byte // scratch
}

// NewText returns a writer of tracer's trace; the ftrace header goes out
// with the first line, so that a trace that never starts writes nothing.
func NewText(w io.Writer, tracer string) *Text {
	return &Text{w: bufio.NewWriterSize(w, 64<<10), tracer: tracer}
}

func (t *Text) writeHeader() {
	if !t.header {
		t.header = true
		fmt.Fprintf(t.w, "# tracer: %s\n", t.tracer)
		fmt.Fprintf(t.w, "#           TASK-PID     CPU#  TIMESTAMP  FUNCTION\n")
	}
}

func (t *Text) Write(r *Record) error {
	var b []byte
	switch r.Kind {
	case KindProbe:
		b = fmt.Appendf(t.prefix(r), "%s: (%s)", r.Event, r.Where)
		b = probe.AppendFields(b, r.Fields)
	case KindEntry:
		b = append(t.prefix(r), r.Func...)
		// The kernel leaves the parent out when it has no address for it.
		if r.Caller != "" {
			b = append(append(b, " <-"...), r.Caller...)
		}
	default:
		// The function tracer reports entries only.
		return nil
	}
	t.writeHeader()
	b = append(b, '\n')
	t.line = b
	_, err := t.w.Write(b)
	return err
}

// prefix starts a line in t.line with the kernel's columns: comm
// right-aligned in 16, pid left-aligned in 7, CPU in 3 digits,
// seconds.microseconds.
func (t *Text) prefix(r *Record) []byte {
	return fmt.Appendf(t.line[:0], "%16s-%-7d [%03d] %5d.%06d: ",
		r.Comm, r.Tid, r.CPU, r.Time/1e9, r.Time%1e9/1e3)
}

func (t *Text) Comment(s string) error {
	t.writeHeader()
	_, err := fmt.Fprintf(t.w, "# %s\n", s)
	return err
}

func (t *Text) Flush() error {
	t.writeHeader()
	return t.w.Flush()
}

func (t *Text) Finish() error { return t.Flush() }

// Stream decouples formatting from the ptrace thread: records are queued
// and written by a goroutine, flushed whenever the queue runs dry so that
// a live trace shows up at once.
type Stream struct {
	records chan Record
	done    chan error
	failed  chan struct{} // closed at the first write error
	w       Writer
}

// NewStream starts the writing goroutine.
func NewStream(w Writer) *Stream {
	s := &Stream{records: make(chan Record, 8192), done: make(chan error, 1), failed: make(chan struct{}), w: w}
	go s.run()
	return s
}

func (s *Stream) run() {
	var err error
	fail := func(e error) {
		if e != nil && err == nil {
			err = e
			close(s.failed)
		}
	}
	for r := range s.records {
		// After a failure records are still taken, so that the tracer
		// never blocks on a reader who has gone.
		if err == nil {
			fail(s.w.Write(&r))
			if len(s.records) == 0 && err == nil {
				fail(s.w.Flush())
			}
		}
	}
	if err == nil {
		fail(s.w.Flush())
	}
	s.done <- err
}

// Send queues a record. It blocks when the writer falls behind rather than
// drop an event.
func (s *Stream) Send(r Record) { s.records <- r }

// Failed is closed when a write has failed (the reader of a pipe has gone):
// time to stop tracing.
func (s *Stream) Failed() <-chan struct{} { return s.failed }

// Close writes what is queued and returns the first write error.
func (s *Stream) Close() error {
	close(s.records)
	return <-s.done
}
