package output

import (
	"bufio"
	"bytes"
	"encoding/gob"
	"errors"
	"fmt"
	"io"
	"time"
)

// A recording is a trace kept to be reported later (probe record, then
// probe report), as ftrace's trace file is read after the fact where
// trace_pipe is read live. The file is a magic line naming the format and
// its version, then an encoding/gob stream: a RecordingInfo, then one
// recordingEntry per record, comment and the end of the trace. A
// recording cut short (the recorder killed) still replays up to its last
// whole entry.
const (
	recordingMagic   = "probe-trace\n"
	recordingVersion = 1
)

// ErrNotRecording is returned for a file that is not a recording, or of a
// version this build does not read.
var ErrNotRecording = errors.New("not a probe recording")

// ErrTruncated is returned by Replay for a recording cut short: what it
// held was replayed.
var ErrTruncated = errors.New("recording cut short")

// RecordingInfo is what a report needs to render a recording's records
// as the live trace would have.
type RecordingInfo struct {
	Tracers   string // --tracer, e.g. "function_graph"
	Calls     bool   // --calls: ltrace's lines
	Threshold int64  // function_graph's tracing_thresh, ns
	Probes    bool   // probes were placed
	CPUWidth  int    // digits of the CPU column
	Command   []string
	// Where it was recorded (probe report --info); a recording made
	// before these were kept has them zero.
	Pid      int
	Attached bool // to a running process; else launched
	Host     string
	Arch     string // GOARCH
	Kernel   string // uname's release
	Started  time.Time
	// WallOffset turns the records' CLOCK_MONOTONIC times into Unix
	// times (for OTLP's spans); BootOffset into CLOCK_BOOTTIME's (for
	// Perfetto's; 0 in a recording made before it was kept).
	WallOffset, BootOffset int64
}

// recordingEntry is one element of a recording after its info.
type recordingEntry struct {
	Record  *Record
	Comment string
	Finish  bool // the trace ended; comments may follow
	End     bool // the recording is whole: written by the first Flush after Finish
}

// Recorder is a Writer that records the trace to a file.
type Recorder struct {
	w        *bufio.Writer
	enc      *gob.Encoder
	finished bool
	ended    bool
	err      error
}

// NewRecorder starts a recording on w with its header and info; a
// failure to write them is returned by the first Write or Flush.
func NewRecorder(w io.Writer, info RecordingInfo) *Recorder {
	b := bufio.NewWriterSize(w, 64<<10)
	fmt.Fprintf(b, "%s%d\n", recordingMagic, recordingVersion)
	r := &Recorder{w: b, enc: gob.NewEncoder(b)}
	r.err = r.enc.Encode(&info)
	return r
}

func (r *Recorder) put(e *recordingEntry) error {
	if r.err == nil {
		r.err = r.enc.Encode(e)
	}
	return r.err
}

func (r *Recorder) Write(rec *Record) error { return r.put(&recordingEntry{Record: rec}) }
func (r *Recorder) Comment(s string) error  { return r.put(&recordingEntry{Comment: s}) }
func (r *Recorder) Finish() error {
	r.finished = true
	return r.put(&recordingEntry{Finish: true})
}

// Flush writes out what is buffered; the first flush after Finish marks
// the recording whole, so that a cut anywhere before can be told.
func (r *Recorder) Flush() error {
	if r.finished && !r.ended {
		r.ended = true
		r.put(&recordingEntry{End: true})
	}
	if r.err != nil {
		return r.err
	}
	return r.w.Flush()
}

// Recording is an opened recording, its info read.
type Recording struct {
	Info RecordingInfo
	dec  *gob.Decoder
}

// OpenRecording reads a recording's header and info.
func OpenRecording(r io.Reader) (*Recording, error) {
	br := bufio.NewReaderSize(r, 64<<10)
	head := make([]byte, len(recordingMagic))
	if _, err := io.ReadFull(br, head); err != nil || !bytes.Equal(head, []byte(recordingMagic)) {
		return nil, ErrNotRecording
	}
	var version int
	if _, err := fmt.Fscanf(br, "%d\n", &version); err != nil {
		return nil, ErrNotRecording
	}
	if version != recordingVersion {
		return nil, fmt.Errorf("%w: format version %d (this probe reads %d)", ErrNotRecording, version, recordingVersion)
	}
	rec := &Recording{dec: gob.NewDecoder(&gobLimit{r: br})}
	if err := rec.dec.Decode(&rec.Info); err != nil {
		return nil, fmt.Errorf("%w: its header is cut short or damaged (%v)", ErrNotRecording, err)
	}
	return rec, nil
}

// Replay writes the recorded trace: records to events, comments to notes
// (as the live trace did: with several writers teed, the notes went to
// the first), then Finish and the final Flush. It returns the number of
// records replayed, and ErrTruncated if the recording was cut short.
func (rec *Recording) Replay(events, notes Writer) (n int, err error) {
	finished, ended := false, false
	for !ended {
		var e recordingEntry
		if derr := rec.dec.Decode(&e); derr != nil {
			err = fmt.Errorf("%w after %d records: %v", ErrTruncated, n, derr)
			break
		}
		switch {
		case e.End:
			ended = true
		case e.Record != nil:
			if werr := events.Write(e.Record); werr != nil {
				return n, werr
			}
			n++
		case e.Finish && !finished:
			if ferr := events.Flush(); ferr != nil {
				return n, ferr
			}
			if ferr := events.Finish(); ferr != nil {
				return n, ferr
			}
			finished = true
		default:
			if cerr := notes.Comment(e.Comment); cerr != nil {
				return n, cerr
			}
		}
	}
	if !finished {
		if ferr := events.Finish(); ferr != nil {
			return n, ferr
		}
	}
	if ferr := notes.Flush(); ferr != nil {
		return n, ferr
	}
	return n, err
}

// maxGobMessage bounds one message of a recording's gob stream: a record
// is a few hundred bytes, and a damaged length must not make gob allocate
// gigabytes before it finds out.
const maxGobMessage = 16 << 20

// gobLimit passes a gob stream through, reading each message's length
// prefix (gob's unsigned integer: one byte below 128, else the negated
// count of big-endian bytes that follow) and refusing one over
// maxGobMessage before gob sees it.
type gobLimit struct {
	r       *bufio.Reader
	left    uint64 // bytes of the current message still to pass
	pending []byte // a length prefix read, still to pass
}

func (g *gobLimit) Read(p []byte) (int, error) {
	n := 0
	for n < len(p) {
		if len(g.pending) > 0 {
			c := copy(p[n:], g.pending)
			g.pending, n = g.pending[c:], n+c
			continue
		}
		if g.left == 0 {
			if n > 0 {
				return n, nil // a message's end: let gob take it
			}
			if err := g.prefix(); err != nil {
				return n, err
			}
			continue
		}
		m, err := g.r.Read(p[n:min(len(p), n+int(min(g.left, uint64(len(p)))))])
		n, g.left = n+m, g.left-uint64(m)
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// prefix reads the next message's length.
func (g *gobLimit) prefix() error {
	b, err := g.r.ReadByte()
	if err != nil {
		return err
	}
	g.pending = append(g.pending[:0], b)
	if b < 0x80 {
		g.left = uint64(b)
		return nil
	}
	size := int(-int8(b))
	if size > 8 {
		return fmt.Errorf("damaged: a message length of %d bytes", size)
	}
	var v uint64
	for i := 0; i < size; i++ {
		c, err := g.r.ReadByte()
		if err != nil {
			return err
		}
		g.pending = append(g.pending, c)
		v = v<<8 | uint64(c)
	}
	if v > maxGobMessage {
		return fmt.Errorf("damaged: a message of %d bytes (at most %d)", v, maxGobMessage)
	}
	g.left = v
	return nil
}
