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
	"sync"
	"sync/atomic"
	"time"

	"github.com/probedbg/probe/fetch"
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
	Fields []fetch.Field
	// Stack is the user stack at a probe hit, innermost frame first, each
	// "sym+0xoff/0xsize [module]" (the stacktrace action); nil otherwise.
	Stack []string

	// Function tracer events. With --args, Fields are the parameters of
	// a KindEntry and the result of a KindReturn.
	Func      string // the traced function
	Caller    string // KindEntry: the function it was called from
	Depth     int    // nesting level of the call, 0 = outermost traced call
	EntryTime int64  // KindReturn: when the call began
	Lane      int64  // the call stack the event belongs to: the thread, or for Go the goroutine
	Goroutine int64  // the Go goroutine id, or 0

	do func(Writer) error // Stream.Do's: run in the record's place
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
		b = append(append(t.prefix(r), r.Event...), ": ("...)
		b = append(append(b, r.Where...), ')')
		b = fetch.AppendFields(b, r.Fields)
		for _, f := range r.Stack { // ftrace's stacktrace trigger: one frame a line
			b = append(append(b, "\n => "...), f...)
		}
	case KindEntry:
		if t.tracer != "function" {
			// A trace of probe events beside the profile, whose calls
			// go to its table only.
			return nil
		}
		b = append(t.prefix(r), r.Func...)
		b = appendArgs(b, r.Fields)
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
	b := append(appendRight(t.line[:0], r.Comm, 16), '-')
	b = append(appendIntLeft(b, int64(r.Tid), 7), " ["...)
	b = append(appendIntZero(b, int64(r.CPU), 3), "] "...)
	b = append(appendIntRight(b, r.Time/1e9, 5), '.')
	return append(appendIntZero(b, r.Time%1e9/1e3, 6), ": "...)
}

func (t *Text) Comment(s string) error {
	t.writeHeader()
	_, err := fmt.Fprintf(t.w, "# %s\n", s)
	return err
}

// Print writes text as it is among the events (a printf action's).
func (t *Text) Print(text []byte) error {
	t.writeHeader()
	_, err := t.w.Write(text)
	return err
}

func (t *Text) Flush() error {
	t.writeHeader()
	return t.w.Flush()
}

func (t *Text) Finish() error { return t.Flush() }

// Stream decouples formatting from the ptrace thread. Records are
// appended to a batch under a mutex (no channel operation, no wake-up of
// another thread per event); a goroutine takes the whole batch every
// FlushInterval while records keep coming, formats and flushes it, and
// sleeps when they stop. A live trace shows up within FlushInterval.
type Stream struct {
	mu    sync.Mutex
	batch []Record
	limit int    // records a batch holds; past it they are dropped
	lost  uint64 // records dropped because the batch was full
	// written counts the records the writer has taken (Written).
	written atomic.Uint64
	closed  bool
	syncs   []chan struct{} // closed once what was queued before them is flushed
	taken   chan struct{}   // closed when the writer next takes the batch (Taken)
	wake    chan struct{}   // the first record after a quiet spell, or Close
	urgent  chan struct{}   // a Sync: no gathering of a trickle now
	done    chan error
	failed  chan struct{} // closed at the first write error
	w       Writer
}

// FlushInterval bounds how long a record waits to be written.
const FlushInterval = 10 * time.Millisecond

// DefaultBuffer bounds the records queued for the writer. Past it records
// are dropped and counted, as ftrace's ring buffer overruns, rather than
// stall the tracee's threads behind a slow reader.
const DefaultBuffer = 1 << 16

// NewStream starts the writing goroutine, with a buffer of DefaultBuffer
// records.
func NewStream(w Writer) *Stream { return NewStreamSize(w, DefaultBuffer) }

// NewStreamSize starts the writing goroutine, with a buffer of size
// records (at least 1).
func NewStreamSize(w Writer, size int) *Stream {
	s := &Stream{limit: max(size, 1), wake: make(chan struct{}, 1), urgent: make(chan struct{}, 1), done: make(chan error, 1), failed: make(chan struct{}), w: w}
	// Both batches at their full size at once (up to DefaultBuffer's):
	// grown record by record, each copied itself over and over, and the
	// GC scanned the copies (Lua under function_graph: record 350 -> 270
	// ms). The pages are the kernel's until written.
	s.batch = make([]Record, 0, min(s.limit, DefaultBuffer))
	go s.run(make([]Record, 0, cap(s.batch)))
	return s
}

// run writes the batches, swapping spare for the one filled.
func (s *Stream) run(spare []Record) {
	var err error
	fail := func(e error) {
		if e != nil && err == nil {
			err = e
			close(s.failed)
		}
	}
	for {
		<-s.wake
		for {
			s.mu.Lock()
			batch, closed, syncs := s.batch, s.closed, s.syncs
			s.batch, s.syncs = spare[:0], nil
			if s.taken != nil {
				close(s.taken)
				s.taken = nil
			}
			s.mu.Unlock()
			// After a failure records are still taken, so that the
			// tracer never blocks on a reader who has gone.
			for i := range batch {
				switch {
				case err != nil:
				case batch[i].do != nil:
					fail(batch[i].do(s.w))
				default:
					fail(s.w.Write(&batch[i]))
				}
				s.written.Add(1)
			}
			if err == nil {
				fail(s.w.Flush())
			}
			for _, c := range syncs {
				close(c)
			}
			clear(batch) // drop references to fields
			spare = batch
			if closed {
				s.done <- err
				return
			}
			if len(batch) == 0 {
				break // quiet: sleep until the next record
			}
			if len(batch) < s.limit/8 {
				// A trickle: let records gather rather than flush
				// each few. A flood goes on at once: the producer may
				// be waiting for room (Room), and so its tracee; so
				// does a Sync, whose caller waits.
				timer := time.NewTimer(FlushInterval)
				select {
				case <-timer.C:
				case <-s.urgent:
					timer.Stop()
				}
			}
		}
	}
}

// Room is how many records Send can take now without dropping any: a
// producer that can wait (the drain of in-process probes' rings, which
// hold what it has not taken) takes no more than that.
func (s *Stream) Room() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.limit - len(s.batch)
}

// Taken is closed when the writer next takes what is queued, making room:
// a producer that waits for Room waits for it.
func (s *Stream) Taken() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.taken == nil {
		s.taken = make(chan struct{})
	}
	return s.taken
}

// Send queues a record. It never blocks: when the writer has fallen a
// whole buffer behind, the record is dropped and counted (Lost).
func (s *Stream) Send(r Record) {
	s.mu.Lock()
	if len(s.batch) >= s.limit {
		s.lost++
		s.mu.Unlock()
		return
	}
	s.batch = append(s.batch, r)
	first := len(s.batch) == 1
	s.mu.Unlock()
	if first {
		s.ring()
	}
}

// Do runs f on the writing goroutine after the records sent before it:
// what writes beside the records (periodic tables) keeps their order and
// never races the writer. Unlike a record it is never dropped.
func (s *Stream) Do(f func(Writer) error) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.batch = append(s.batch, Record{do: f})
	first := len(s.batch) == 1
	s.mu.Unlock()
	if first {
		s.ring()
	}
}

// Sync has the writer flush what it has been sent, and whatever a writer
// puts at the top of a trace (the text header), and waits for it: called
// before the tracee runs, it keeps the header ahead of what the tracee
// itself prints on the same terminal.
func (s *Stream) Sync() {
	done := make(chan struct{})
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.syncs = append(s.syncs, done)
	s.mu.Unlock()
	s.ring()
	select {
	case s.urgent <- struct{}{}:
	default:
	}
	<-done
}

func (s *Stream) ring() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// Written is how many records the writer has taken so far: a producer
// that waits for Room sees it make progress.
func (s *Stream) Written() uint64 { return s.written.Load() }

// Lost returns the number of records dropped because the buffer was full.
func (s *Stream) Lost() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lost
}

// LostNote is the comment that reports n dropped records.
func LostNote(n uint64) string { return fmt.Sprintf("%d events lost (buffer full)", n) }

// Failed is closed when a write has failed (the reader of a pipe has gone):
// time to stop tracing.
func (s *Stream) Failed() <-chan struct{} { return s.failed }

// Close writes what is queued and returns the first write error. A
// writer letting a trickle gather is woken too (urgent): nothing more
// comes, and every probe run and record waited up to FlushInterval at
// its end.
func (s *Stream) Close() error {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.ring()
	select {
	case s.urgent <- struct{}{}:
	default:
	}
	return <-s.done
}
