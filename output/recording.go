package output

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/probedbg/probe/fetch"
	"github.com/probedbg/probe/internal/varint"
)

// A recording is a trace kept to be reported later (probe record, then
// probe report), as ftrace's trace file is read after the fact where
// trace_pipe is read live. Its layout (docs/recording.md has it whole):
// the line "probe-trace", the line of the format's version, then frames,
// each a type byte, its payload's length (uvarint) and the payload:
//
//	'i' the RecordingInfo, as JSON: first, once
//	's' a string, the next of the string table (ids from 1; 0 is "")
//	'r' a record (appendRecord), its strings by id
//	'c' a comment line
//	'f' the trace finished (comments may follow)
//	'e' the recording is whole: the last frame
//
// A reader skips frames of a type it does not know. A recording cut
// short (the recorder killed) still reports up to its last whole frame,
// and what is whole of the one cut (FrameHandler's cut).
const (
	recordingMagic   = "probe-trace\n"
	recordingVersion = 4
	// oldestVersion is the oldest this build reads: version 3 differs
	// only in having no raw return probes (their modules' 'M' frames,
	// which a reader of 3 took for none: the hits lost, or a crash),
	// version 2 in its records too, every field given.
	oldestVersion = 2
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

// Recorder is a Writer that records the trace to a file.
type Recorder struct {
	w       *bufio.Writer
	strings map[string]uint64 // the string table: id by string
	// recent is, for each of a record's five strings, the last one
	// written and its id: mostly the next record's too.
	recent [5]struct {
		s  string
		id uint64
	}
	prev     recordState
	frame    []byte // the payload being built, reused
	head     [1 + binary.MaxVarintLen64]byte
	finished bool
	ended    bool
	err      error
}

// NewRecorder starts a recording on w with its header and info; a
// failure to write them is returned by the first Write or Flush.
func NewRecorder(w io.Writer, info RecordingInfo) *Recorder {
	b := bufio.NewWriterSize(w, 256<<10)
	fmt.Fprintf(b, "%s%d\n", recordingMagic, recordingVersion)
	r := &Recorder{w: b, strings: map[string]uint64{"": 0}}
	js, err := json.Marshal(&info)
	r.err = err
	r.put('i', js)
	return r
}

// put writes a frame.
func (r *Recorder) put(kind byte, payload []byte) error {
	if r.err != nil {
		return r.err
	}
	r.head[0] = kind
	n := binary.PutUvarint(r.head[1:], uint64(len(payload)))
	if _, r.err = r.w.Write(r.head[:1+n]); r.err == nil {
		_, r.err = r.w.Write(payload)
	}
	return r.err
}

// id is s's id in the string table, s written to it first if new.
func (r *Recorder) id(s string) uint64 {
	if id, ok := r.strings[s]; ok {
		return id
	}
	id := uint64(len(r.strings))
	r.strings[s] = id
	r.put('s', []byte(s))
	return id
}

// The record frame's head (versions 3 and 4): the kind in its low bits, then
// a bit for each field the record gives, in this order after its time:
// a field that is the previous record's (or zero: depth, entry) is left
// out. A function_graph record is 5-8 bytes with its frame's.
const (
	kindBits = 2
	hasFunc  = 1 << (kindBits + iota - 1)
	hasDepth
	hasEntry // a return's start, less its time
	hasTid
	hasCPU
	hasLane
	hasPid
	hasComm
	hasEvent
	hasWhere
	hasCaller
	hasGoroutine
	hasFields
	hasStack
)

// recordState is what a record is encoded against: the previous
// record's fields, its strings by id.
type recordState struct {
	time                       int64
	cpu, pid, tid              int
	lane, goroutine            int64
	depth                      int
	comm, event, where, fn, cl uint64
}

func (r *Recorder) Write(rec *Record) error {
	if r.err != nil {
		return r.err
	}
	// The strings first: their frames go before the record's.
	ids := [5]uint64{r.recentID(0, rec.Comm), r.recentID(1, rec.Event), r.recentID(2, rec.Where), r.recentID(3, rec.Func), r.recentID(4, rec.Caller)}
	p := &r.prev
	head := uint64(rec.Kind)
	flag := func(bit uint64, differs bool) {
		if differs {
			head |= bit
		}
	}
	flag(hasFunc, ids[3] != p.fn)
	flag(hasDepth, rec.Depth != p.depth)
	flag(hasEntry, rec.EntryTime != 0)
	flag(hasTid, rec.Tid != p.tid)
	flag(hasCPU, rec.CPU != p.cpu)
	flag(hasLane, rec.Lane != p.lane)
	flag(hasPid, rec.Pid != p.pid)
	flag(hasComm, ids[0] != p.comm)
	flag(hasEvent, ids[1] != p.event)
	flag(hasWhere, ids[2] != p.where)
	flag(hasCaller, ids[4] != p.cl)
	flag(hasGoroutine, rec.Goroutine != p.goroutine)
	flag(hasFields, len(rec.Fields) > 0)
	flag(hasStack, len(rec.Stack) > 0)
	b := binary.AppendUvarint(r.frame[:0], head)
	b = binary.AppendVarint(b, rec.Time-p.time)
	if head&hasFunc != 0 {
		b = binary.AppendUvarint(b, ids[3])
	}
	if head&hasDepth != 0 {
		b = binary.AppendVarint(b, int64(rec.Depth))
	}
	if head&hasEntry != 0 {
		b = binary.AppendVarint(b, rec.EntryTime-rec.Time)
	}
	for _, f := range [...]struct {
		bit uint64
		v   int64
	}{{hasTid, int64(rec.Tid)}, {hasCPU, int64(rec.CPU)}, {hasLane, rec.Lane}, {hasPid, int64(rec.Pid)}} {
		if head&f.bit != 0 {
			b = binary.AppendVarint(b, f.v)
		}
	}
	for _, f := range [...]struct {
		bit, id uint64
	}{{hasComm, ids[0]}, {hasEvent, ids[1]}, {hasWhere, ids[2]}, {hasCaller, ids[4]}} {
		if head&f.bit != 0 {
			b = binary.AppendUvarint(b, f.id)
		}
	}
	if head&hasGoroutine != 0 {
		b = binary.AppendVarint(b, rec.Goroutine)
	}
	if head&hasFields != 0 {
		b = binary.AppendUvarint(b, uint64(len(rec.Fields)))
		for i := range rec.Fields {
			b = binary.AppendUvarint(b, r.id(rec.Fields[i].Name))
			b = rec.Fields[i].Value.AppendBinary(b)
		}
	}
	if head&hasStack != 0 {
		b = binary.AppendUvarint(b, uint64(len(rec.Stack)))
		for _, f := range rec.Stack {
			b = binary.AppendUvarint(b, r.id(f))
		}
	}
	*p = recordState{time: rec.Time, cpu: rec.CPU, pid: rec.Pid, tid: rec.Tid, lane: rec.Lane, goroutine: rec.Goroutine, depth: rec.Depth,
		comm: ids[0], event: ids[1], where: ids[2], fn: ids[3], cl: ids[4]}
	r.frame = b
	return r.put('r', b)
}

// recentID is the id of s, the record's string i (comm, event, where,
// func, caller): mostly the one the previous record had there, whose
// id is at hand without a look-up.
func (r *Recorder) recentID(i int, s string) uint64 {
	c := &r.recent[i]
	if c.s != s {
		c.s, c.id = s, r.id(s)
	}
	return c.id
}

func (r *Recorder) Comment(s string) error { return r.put('c', []byte(s)) }

// Frame writes a frame of a type the recording does not decode itself
// (a raw capture's, for Replay's FrameHandler).
func (r *Recorder) Frame(kind byte, payload []byte) error { return r.put(kind, payload) }

// DecoderNotes marks where the notes of a FrameHandler's decoder go
// among the trace's notes: they are known once its frames are decoded.
func (r *Recorder) DecoderNotes() error { return r.put('D', nil) }

func (r *Recorder) Finish() error {
	r.finished = true
	return r.put('f', nil)
}

// Flush writes out what is buffered; the first flush after Finish marks
// the recording whole, so that a cut anywhere before can be told.
func (r *Recorder) Flush() error {
	if r.finished && !r.ended {
		r.ended = true
		r.put('e', nil)
	}
	if r.err != nil {
		return r.err
	}
	return r.w.Flush()
}

// Recording is an opened recording, its info read.
type Recording struct {
	Info     RecordingInfo
	r        *bufio.Reader
	version  int
	strings  []string
	lastTime int64       // version 2's
	prev     recordState // version 3's and 4's
	frame    []byte      // the payload read, reused
}

// maxFrame bounds a frame's payload: a record is a few hundred bytes,
// and a damaged length must not make the reader allocate gigabytes
// before it finds out.
const maxFrame = 16 << 20

// OpenRecording reads a recording's header and info.
func OpenRecording(r io.Reader) (*Recording, error) {
	br := bufio.NewReaderSize(r, 256<<10)
	head := make([]byte, len(recordingMagic))
	if _, err := io.ReadFull(br, head); err != nil || !bytes.Equal(head, []byte(recordingMagic)) {
		return nil, ErrNotRecording
	}
	line, err := br.ReadSlice('\n') // (bounded by the buffer)
	version, serr := strconv.Atoi(string(bytes.TrimSuffix(line, []byte("\n"))))
	if err != nil || serr != nil {
		return nil, ErrNotRecording
	}
	if version < oldestVersion || version > recordingVersion {
		return nil, fmt.Errorf("%w: format version %d (this probe reads %d to %d)", ErrNotRecording, version, oldestVersion, recordingVersion)
	}
	rec := &Recording{r: br, strings: []string{""}, version: version}
	kind, payload, err := rec.next()
	if err == nil && kind != 'i' {
		err = fmt.Errorf("damaged: it starts with a frame of type %q", kind)
	}
	if err == nil {
		err = json.Unmarshal(payload, &rec.Info)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: its header is cut short or damaged (%v)", ErrNotRecording, err)
	}
	return rec, nil
}

// next reads the next frame; its payload is valid until the next call.
// A frame cut short by the file's end is an error, with its kind and
// what the file holds of its payload.
func (rec *Recording) next() (kind byte, payload []byte, err error) {
	if kind, err = rec.r.ReadByte(); err != nil {
		return 0, nil, err
	}
	n, err := binary.ReadUvarint(rec.r)
	if err != nil {
		return 0, nil, unexpected(err)
	}
	if n > maxFrame {
		return 0, nil, fmt.Errorf("damaged: a frame of %d bytes (at most %d)", n, maxFrame)
	}
	if uint64(cap(rec.frame)) < n {
		rec.frame = make([]byte, n)
	}
	rec.frame = rec.frame[:n]
	if got, err := io.ReadFull(rec.r, rec.frame); err != nil {
		return kind, rec.frame[:got], unexpected(err)
	}
	return kind, rec.frame, nil
}

// unexpected is err, an end of file in the middle of a frame said so.
func unexpected(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

// FrameHandler decodes the frames of a recording that are not the
// trace's own (a raw capture's: probe.RawReader), handing the records
// and comments they make to out. A frame 'D' says where the notes of
// its decoder go among the trace's (Recorder.DecoderNotes). cut: the
// frame is the last, cut short by the file's end (the recorder killed
// as it wrote it), and payload what the file holds of it: what of it is
// whole is worth its records (a drain pass's frame is up to a MiB).
type FrameHandler func(kind byte, payload []byte, cut bool, out ReplayOut) error

// ReplayOut takes what a FrameHandler decodes.
type ReplayOut interface {
	Record(*Record)
	Comment(string)
}

// Replay writes the recorded trace: records to events, comments to notes
// (as the live trace did: with several writers teed, the notes went to
// the first), then Finish and the final Flush. Frames of other types go
// to other, if not nil. It returns the number of records replayed, and
// ErrTruncated if the recording was cut short.
//
// The frames are read and decoded on the calling goroutine and written
// on another, a batch at a time: the two take about as long.
func (rec *Recording) Replay(events, notes Writer, other FrameHandler) (n int, err error) {
	out := &replayOut{w: startReplayWriter(events, notes)}
	out.batch = out.w.batch()
	finished, ended := false, false
	for !ended && !out.w.failed() {
		kind, payload, rerr := rec.next()
		if rerr != nil {
			if other != nil && len(payload) > 0 {
				other(kind, payload, true, out) // (what is whole, up to the damage)
			}
			err = fmt.Errorf("%w after %d records: %v", ErrTruncated, n+out.n, rerr)
			break
		}
		switch kind {
		case 'e':
			ended = true
		case 's':
			rec.strings = append(rec.strings, string(payload))
		case 'r':
			out.batch = append(out.batch, replayItem{kind: 'r'})
			if derr := rec.decode(payload, &out.batch[len(out.batch)-1].rec); derr != nil {
				out.batch = out.batch[:len(out.batch)-1]
				err = fmt.Errorf("%w after %d records: damaged: %v", ErrTruncated, n+out.n, derr)
				ended = true
				break
			}
			n++
			out.full()
		case 'f':
			if !finished {
				out.batch = append(out.batch, replayItem{kind: 'f'})
				finished = true
				out.full()
			}
		case 'c':
			out.Comment(string(payload))
		default:
			if other == nil {
				break // a type this reader does not know
			}
			if derr := other(kind, payload, false, out); derr != nil {
				err = fmt.Errorf("%w after %d records: damaged: %v", ErrTruncated, n+out.n, derr)
				ended = true
			}
		}
	}
	if !finished {
		out.batch = append(out.batch, replayItem{kind: 'f'})
	}
	if werr := out.w.close(out.batch); werr != nil {
		return n + out.n, werr
	}
	return n + out.n, err
}

// replayOut gathers the items of a replay into batches for its writer.
type replayOut struct {
	w     *replayWriter
	batch []replayItem
	n     int // records a FrameHandler made
}

func (o *replayOut) Record(r *Record) {
	o.batch = append(o.batch, replayItem{kind: 'r', rec: *r})
	o.n++
	o.full()
}

func (o *replayOut) Comment(s string) {
	o.batch = append(o.batch, replayItem{kind: 'c', comment: s})
	o.full()
}

// full hands a full batch to the writer.
func (o *replayOut) full() {
	if len(o.batch) == cap(o.batch) {
		o.batch = o.w.send(o.batch)
	}
}

// replayItem is a frame of a recording to write: a record ('r'), a
// comment ('c') or the trace's end ('f').
type replayItem struct {
	kind    byte
	rec     Record
	comment string
}

// replayWriter writes batches of items on a goroutine of its own.
type replayWriter struct {
	events, notes Writer
	full, free    chan []replayItem
	done          chan error
	stop          atomic.Bool // a write failed
}

const replayBatch = 4096

func startReplayWriter(events, notes Writer) *replayWriter {
	w := &replayWriter{events: events, notes: notes, full: make(chan []replayItem, 2), free: make(chan []replayItem, 3), done: make(chan error, 1)}
	for range cap(w.free) {
		w.free <- make([]replayItem, 0, replayBatch)
	}
	go w.run()
	return w
}

// batch is an empty batch, once the writer has one to spare.
func (w *replayWriter) batch() []replayItem { return <-w.free }

// send hands b to the writer and returns an empty batch.
func (w *replayWriter) send(b []replayItem) []replayItem {
	w.full <- b
	return w.batch()
}

func (w *replayWriter) failed() bool { return w.stop.Load() }

// close hands the writer its last batch and returns the first write
// error.
func (w *replayWriter) close(b []replayItem) error {
	w.full <- b
	close(w.full)
	return <-w.done
}

func (w *replayWriter) run() {
	var err error
	for b := range w.full {
		for i := range b {
			if err != nil {
				break
			}
			switch it := &b[i]; it.kind {
			case 'r':
				err = w.events.Write(&it.rec)
			case 'c':
				err = w.notes.Comment(it.comment)
			case 'f':
				if err = w.events.Flush(); err == nil {
					err = w.events.Finish()
				}
			}
		}
		if err != nil {
			w.stop.Store(true)
		}
		clear(b) // drop references to fields
		w.free <- b[:0]
	}
	if err == nil {
		err = w.notes.Flush()
	}
	w.done <- err
}

var errBadRecord = errors.New("a record that cannot be read")

// recordReader reads a record's payload: its varints and string ids,
// noting the first that cannot be read.
type recordReader struct {
	varint.Reader
	strings []string
}

// id reads a string id, checked against the table.
func (d *recordReader) id() uint64 {
	id := d.Uvarint()
	if id >= uint64(len(d.strings)) {
		d.Bad = true
		return 0
	}
	return id
}

// fields reads a record's fields: their count, then each's name and
// value.
func (d *recordReader) fields() ([]fetch.Field, error) {
	nf := d.Uvarint()
	if nf == 0 || d.Bad {
		return nil, nil
	}
	if nf > uint64(len(d.B)) {
		return nil, errBadRecord
	}
	fs := make([]fetch.Field, nf)
	for i := range fs {
		fs[i].Name = d.strings[d.id()]
		if d.Bad {
			return nil, errBadRecord
		}
		var err error
		if d.B, err = fs[i].Value.DecodeBinary(d.B); err != nil {
			return nil, err
		}
	}
	return fs, nil
}

// stack reads a record's stack: its count, then each frame's string.
func (d *recordReader) stack() ([]string, error) {
	ns := d.Uvarint()
	if ns == 0 || d.Bad {
		return nil, nil
	}
	if ns > uint64(len(d.B)) {
		return nil, errBadRecord
	}
	st := make([]string, ns)
	for i := range st {
		st[i] = d.strings[d.id()]
	}
	return st, nil
}

// decode reads a record frame's payload into r.
func (rec *Recording) decode(b []byte, r *Record) error {
	if rec.version == 2 {
		return rec.decodeV2(b, r)
	}
	d := recordReader{Reader: varint.Reader{B: b}, strings: rec.strings}
	p := &rec.prev
	head := d.Uvarint()
	*r = Record{Kind: Kind(head & (1<<kindBits - 1))}
	p.time += d.Varint()
	r.Time = p.time
	if head&hasFunc != 0 {
		p.fn = d.id()
	}
	if head&hasDepth != 0 {
		p.depth = int(d.Varint())
	}
	if head&hasEntry != 0 {
		r.EntryTime = r.Time + d.Varint()
	}
	if head&hasTid != 0 {
		p.tid = int(d.Varint())
	}
	if head&hasCPU != 0 {
		p.cpu = int(d.Varint())
	}
	if head&hasLane != 0 {
		p.lane = d.Varint()
	}
	if head&hasPid != 0 {
		p.pid = int(d.Varint())
	}
	for _, f := range [...]struct {
		bit uint64
		id  *uint64
	}{{hasComm, &p.comm}, {hasEvent, &p.event}, {hasWhere, &p.where}, {hasCaller, &p.cl}} {
		if head&f.bit != 0 {
			*f.id = d.id()
		}
	}
	if head&hasGoroutine != 0 {
		p.goroutine = d.Varint()
	}
	var err error
	if head&hasFields != 0 && err == nil {
		r.Fields, err = d.fields()
	}
	if head&hasStack != 0 && err == nil {
		r.Stack, err = d.stack()
	}
	if err != nil {
		return err
	}
	if d.Bad || head>>(kindBits+14) != 0 {
		return errBadRecord
	}
	r.CPU, r.Pid, r.Tid, r.Lane, r.Goroutine, r.Depth = p.cpu, p.pid, p.tid, p.lane, p.goroutine, p.depth
	r.Comm, r.Event, r.Where, r.Func, r.Caller = rec.strings[p.comm], rec.strings[p.event], rec.strings[p.where], rec.strings[p.fn], rec.strings[p.cl]
	return nil
}

// decodeV2 reads a version 2 record, every field given.
func (rec *Recording) decodeV2(b []byte, r *Record) error {
	d := recordReader{Reader: varint.Reader{B: b}, strings: rec.strings}
	str := func() string { return rec.strings[d.id()] }
	r.Kind = Kind(d.Uvarint())
	rec.lastTime += d.Varint()
	r.Time = rec.lastTime
	r.CPU, r.Pid, r.Tid = int(d.Varint()), int(d.Varint()), int(d.Varint())
	r.Comm, r.Event, r.Where, r.Func, r.Caller = str(), str(), str(), str(), str()
	var err error
	if r.Fields, err = d.fields(); err != nil {
		return err
	}
	if r.Stack, err = d.stack(); err != nil {
		return err
	}
	r.Depth = int(d.Varint())
	r.EntryTime = r.Time + d.Varint()
	r.Lane, r.Goroutine = d.Varint(), d.Varint()
	if d.Bad {
		return errBadRecord
	}
	return nil
}
