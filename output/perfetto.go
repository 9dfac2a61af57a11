package output

import (
	"bufio"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"io"
	"math"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/probedbg/probe/fetch"
)

// Perfetto writes Perfetto's own trace format, the protobuf Trace of
// TracePackets that ui.perfetto.dev and trace_processor load, for traces
// too large for JSON: a track per thread (or goroutine) under a track
// per process, function_graph calls as slices (begin at the entry, end at
// the return), a return probe's call as a slice, an entry probe's hit as
// an instant, fields as debug annotations. A Trace is its packets one
// after another, so each is written as it comes.
//
// The times are CLOCK_MONOTONIC's, and say so (timestamp_clock_id), with
// a ClockSnapshot first that makes it the trace's clock and ties it to
// the wall clock and to CLOCK_BOOTTIME (the clock of a system trace it
// may be merged with, and trace_processor's default). A call still open at the end is left
// unfinished, as Perfetto shows one ("did not end").
//
// The field numbers are those of perfetto's protos (trace.proto,
// trace_packet.proto, track_event/*.proto, clock_snapshot.proto); only
// what is needed here. trace_processor (built from Perfetto's source)
// loads these traces with no import error, each call a slice as the
// text trace draws it.
type Perfetto struct {
	w       *bufio.Writer
	tracks  map[int64]uint64 // lane: its track's uuid
	procs   map[int]uint64   // pid: its process track's uuid
	open    map[int64][]int  // lane: the depths of the calls begun and not ended
	clocks  PerfettoClocks
	started bool // the clock snapshot is written
	scratch []byte
	// evBuf and pkBuf hold the event and the packet being built, reused.
	evBuf, pkBuf []byte
}

// PerfettoClocks relate the trace's CLOCK_MONOTONIC times to other
// clocks: what to add to one to get CLOCK_REALTIME's (0: not known), and
// CLOCK_BOOTTIME's (the time the machine was suspended; trace_processor
// needs the relation).
type PerfettoClocks struct {
	Wall, Boot int64
}

// NowClocks are the offsets of the clocks here and now.
func NowClocks() PerfettoClocks {
	var mono, boot unix.Timespec
	unix.ClockGettime(unix.CLOCK_MONOTONIC, &mono)
	unix.ClockGettime(unix.CLOCK_BOOTTIME, &boot)
	return PerfettoClocks{Wall: MonoToWall(), Boot: boot.Nano() - mono.Nano()}
}

// Field numbers: perfetto.protos.*.
const (
	pfTracePacket = 1 // Trace.packet

	pfTimestamp       = 8  // TracePacket.timestamp
	pfSequenceID      = 10 // TracePacket.trusted_packet_sequence_id
	pfTrackEvent      = 11 // TracePacket.track_event
	pfClockID         = 58 // TracePacket.timestamp_clock_id
	pfTrackDescriptor = 60 // TracePacket.track_descriptor
	pfClockSnapshot   = 6  // TracePacket.clock_snapshot

	pfSnapshotClock   = 1 // ClockSnapshot.clocks
	pfSnapshotPrimary = 2 // ClockSnapshot.primary_trace_clock
	pfClockClockID    = 1 // ClockSnapshot.Clock.clock_id
	pfClockTimestamp  = 2 // ClockSnapshot.Clock.timestamp

	pfRealtime  = 1 // BuiltinClock
	pfMonotonic = 3
	pfBoottime  = 6

	pfEventAnnotations = 4  // TrackEvent.debug_annotations
	pfEventType        = 9  // TrackEvent.type
	pfEventTrack       = 11 // TrackEvent.track_uuid
	pfEventCategories  = 22 // TrackEvent.categories
	pfEventName        = 23 // TrackEvent.name

	pfSliceBegin = 1 // TrackEvent.Type
	pfSliceEnd   = 2
	pfInstant    = 3

	pfTrackUUID    = 1 // TrackDescriptor.uuid
	pfTrackName    = 2 // TrackDescriptor.name
	pfTrackProcess = 3 // TrackDescriptor.process
	pfTrackThread  = 4 // TrackDescriptor.thread
	pfTrackParent  = 5 // TrackDescriptor.parent_uuid

	pfProcessPid  = 1 // ProcessDescriptor.pid
	pfProcessName = 6 // ProcessDescriptor.process_name
	pfThreadPid   = 1 // ThreadDescriptor.pid
	pfThreadTid   = 2 // ThreadDescriptor.tid
	pfThreadName  = 5 // ThreadDescriptor.thread_name

	pfAnnotationBool   = 2  // DebugAnnotation.bool_value
	pfAnnotationUint   = 3  // DebugAnnotation.uint_value
	pfAnnotationInt    = 4  // DebugAnnotation.int_value
	pfAnnotationDouble = 5  // DebugAnnotation.double_value
	pfAnnotationString = 6  // DebugAnnotation.string_value
	pfAnnotationName   = 10 // DebugAnnotation.name

	// One writer, one sequence.
	pfSequence = 1
)

// NewPerfetto returns the writer; clocks relate the trace's times to
// the wall clock and CLOCK_BOOTTIME.
func NewPerfetto(w io.Writer, clocks PerfettoClocks) *Perfetto {
	return &Perfetto{w: bufio.NewWriterSize(w, 64<<10), tracks: map[int64]uint64{}, procs: map[int]uint64{},
		open: map[int64][]int{}, clocks: clocks}
}

// snapshot writes the ClockSnapshot at time ts, the first record's.
func (p *Perfetto) snapshot(ts int64) {
	var cs []byte
	clock := func(id uint64, t int64) {
		var c []byte
		c = protowire.AppendTag(c, pfClockClockID, protowire.VarintType)
		c = protowire.AppendVarint(c, id)
		c = protowire.AppendTag(c, pfClockTimestamp, protowire.VarintType)
		c = protowire.AppendVarint(c, uint64(t))
		cs = protowire.AppendTag(cs, pfSnapshotClock, protowire.BytesType)
		cs = protowire.AppendBytes(cs, c)
	}
	clock(pfMonotonic, ts)
	clock(pfBoottime, ts+p.clocks.Boot)
	if p.clocks.Wall != 0 {
		clock(pfRealtime, ts+p.clocks.Wall)
	}
	cs = protowire.AppendTag(cs, pfSnapshotPrimary, protowire.VarintType)
	cs = protowire.AppendVarint(cs, pfMonotonic)
	p.packet(ts, pfClockSnapshot, cs)
}

// uuid makes a track id from what identifies the track.
func uuid(kind string, ids ...int64) uint64 {
	h := fnv.New64a()
	fmt.Fprint(h, kind)
	for _, id := range ids {
		fmt.Fprint(h, ",", id)
	}
	return h.Sum64() | 1 // never 0, the trace-global track
}

// packet writes one TracePacket holding body at field num.
func (p *Perfetto) packet(ts int64, num protowire.Number, body []byte) {
	pk := p.pkBuf[:0]
	if ts != 0 {
		pk = protowire.AppendTag(pk, pfTimestamp, protowire.VarintType)
		pk = protowire.AppendVarint(pk, uint64(ts))
		pk = protowire.AppendTag(pk, pfClockID, protowire.VarintType)
		pk = protowire.AppendVarint(pk, pfMonotonic)
	}
	pk = protowire.AppendTag(pk, pfSequenceID, protowire.VarintType)
	pk = protowire.AppendVarint(pk, pfSequence)
	pk = protowire.AppendTag(pk, num, protowire.BytesType)
	pk = protowire.AppendBytes(pk, body)
	out := protowire.AppendTag(p.scratch[:0], pfTracePacket, protowire.BytesType)
	out = protowire.AppendBytes(out, pk)
	p.scratch, p.pkBuf = out, pk
	p.w.Write(out)
}

// track returns r's track, described first if new.
func (p *Perfetto) track(r *Record) uint64 {
	if id, ok := p.tracks[r.Lane]; ok {
		return id
	}
	proc, ok := p.procs[r.Pid]
	if !ok {
		proc = uuid("process", int64(r.Pid))
		p.procs[r.Pid] = proc
		var pd []byte
		pd = protowire.AppendTag(pd, pfProcessPid, protowire.VarintType)
		pd = protowire.AppendVarint(pd, uint64(r.Pid))
		pd = protowire.AppendTag(pd, pfProcessName, protowire.BytesType)
		pd = protowire.AppendString(pd, r.Comm)
		var td []byte
		td = protowire.AppendTag(td, pfTrackUUID, protowire.VarintType)
		td = protowire.AppendVarint(td, proc)
		td = protowire.AppendTag(td, pfTrackProcess, protowire.BytesType)
		td = protowire.AppendBytes(td, pd)
		p.packet(r.Time, pfTrackDescriptor, td)
	}
	id := uuid("lane", int64(r.Pid), r.Lane)
	p.tracks[r.Lane] = id
	var td []byte
	td = protowire.AppendTag(td, pfTrackUUID, protowire.VarintType)
	td = protowire.AppendVarint(td, id)
	td = protowire.AppendTag(td, pfTrackParent, protowire.VarintType)
	td = protowire.AppendVarint(td, proc)
	if r.Goroutine != 0 {
		// A goroutine is no thread of the kernel's: a named track.
		td = protowire.AppendTag(td, pfTrackName, protowire.BytesType)
		td = protowire.AppendString(td, fmt.Sprintf("%s-g%d", r.Comm, r.Goroutine))
	} else {
		var th []byte
		th = protowire.AppendTag(th, pfThreadPid, protowire.VarintType)
		th = protowire.AppendVarint(th, uint64(r.Pid))
		th = protowire.AppendTag(th, pfThreadTid, protowire.VarintType)
		th = protowire.AppendVarint(th, uint64(r.Tid))
		th = protowire.AppendTag(th, pfThreadName, protowire.BytesType)
		th = protowire.AppendString(th, r.Comm)
		td = protowire.AppendTag(td, pfTrackThread, protowire.BytesType)
		td = protowire.AppendBytes(td, th)
	}
	p.packet(r.Time, pfTrackDescriptor, td)
	return id
}

// event writes a TrackEvent on track.
func (p *Perfetto) event(ts int64, track uint64, typ uint64, category, name string, notes []annotation) {
	ev := p.evBuf[:0]
	ev = protowire.AppendTag(ev, pfEventType, protowire.VarintType)
	ev = protowire.AppendVarint(ev, typ)
	ev = protowire.AppendTag(ev, pfEventTrack, protowire.VarintType)
	ev = protowire.AppendVarint(ev, track)
	if category != "" {
		ev = protowire.AppendTag(ev, pfEventCategories, protowire.BytesType)
		ev = protowire.AppendString(ev, category)
	}
	if name != "" {
		ev = protowire.AppendTag(ev, pfEventName, protowire.BytesType)
		ev = protowire.AppendString(ev, name)
	}
	for _, a := range notes {
		ev = protowire.AppendTag(ev, pfEventAnnotations, protowire.BytesType)
		ev = protowire.AppendBytes(ev, a.encode())
	}
	p.evBuf = ev
	p.packet(ts, pfTrackEvent, ev)
}

// annotation is one debug annotation: a field, by its JSON type.
type annotation struct {
	name  string
	value any
}

func (a annotation) encode() []byte {
	var b []byte
	b = protowire.AppendTag(b, pfAnnotationName, protowire.BytesType)
	b = protowire.AppendString(b, a.name)
	switch v := a.value.(type) {
	case uint64:
		b = protowire.AppendTag(b, pfAnnotationUint, protowire.VarintType)
		b = protowire.AppendVarint(b, v)
	case int64:
		b = protowire.AppendTag(b, pfAnnotationInt, protowire.VarintType)
		b = protowire.AppendVarint(b, uint64(v))
	case bool:
		b = protowire.AppendTag(b, pfAnnotationBool, protowire.VarintType)
		b = protowire.AppendVarint(b, protowire.EncodeBool(v))
	case float64:
		b = protowire.AppendTag(b, pfAnnotationDouble, protowire.Fixed64Type)
		b = protowire.AppendFixed64(b, math.Float64bits(v))
	default:
		b = protowire.AppendTag(b, pfAnnotationString, protowire.BytesType)
		b = protowire.AppendString(b, fmt.Sprint(v))
	}
	return b
}

// annotations are fields as debug annotations; a fault has none.
func annotations(fields []fetch.Field, more ...annotation) []annotation {
	notes := more
	for _, f := range fields {
		v := scalarValue(f.Value)
		if v == nil {
			continue
		}
		switch x := v.(type) {
		case uint64, int64, bool, string:
		case json.Number: // a DWARF value that is a number: as one
			if i, err := x.Int64(); err == nil {
				v = i
			} else if u, err := strconv.ParseUint(x.String(), 10, 64); err == nil {
				v = u
			} else if d, err := x.Float64(); err == nil {
				v = d
			} else {
				v = x.String()
			}
		default:
			v = f.Value.String() // DWARF text: as printed
		}
		notes = append(notes, annotation{f.Name, v})
	}
	return notes
}

func (p *Perfetto) Write(r *Record) error {
	if !p.started {
		p.started = true
		p.snapshot(r.Time)
	}
	track := p.track(r)
	switch r.Kind {
	case KindEntry:
		p.endFrom(r.Lane, track, r.Depth, r.Time)
		p.event(r.Time, track, pfSliceBegin, "function", r.Func, annotations(r.Fields))
		p.open[r.Lane] = append(p.open[r.Lane], r.Depth)
	case KindReturn, KindLost:
		p.endFrom(r.Lane, track, r.Depth+1, r.Time)
		open := p.open[r.Lane]
		if len(open) == 0 || open[len(open)-1] != r.Depth {
			return nil // entered before the trace began (or before this lane's first record: a fork child's)
		}
		notes := annotations(r.Fields)
		if r.Kind == KindLost {
			notes = append(notes, annotation{"note", "return lost"})
		}
		p.event(r.Time, track, pfSliceEnd, "", "", notes)
		p.open[r.Lane] = open[:len(open)-1]
	case KindProbe:
		notes := annotations(r.Fields, annotation{"location", r.Where})
		if len(r.Stack) > 0 {
			notes = append(notes, annotation{"stack", fmt.Sprint(r.Stack)})
		}
		if d, ok := returnDuration(r); ok && len(p.open[r.Lane]) == 0 {
			// A return probe's call, outside any traced call (inside
			// one, a slice ending now could not nest in the open calls).
			p.event(r.Time-d, track, pfSliceBegin, "probe", r.Event, notes)
			p.event(r.Time, track, pfSliceEnd, "", "", nil)
			break
		}
		if d, ok := returnDuration(r); ok {
			notes = append(notes, annotation{"duration_ns", d})
		}
		p.event(r.Time, track, pfInstant, "probe", r.Event, notes)
	}
	return nil
}

// endFrom ends the open calls of lane at depth and deeper, at time end:
// their returns were lost.
func (p *Perfetto) endFrom(lane int64, track uint64, depth int, end int64) {
	open := p.open[lane]
	for len(open) > 0 && open[len(open)-1] >= depth {
		p.event(end, track, pfSliceEnd, "", "", []annotation{{"note", "return lost"}})
		open = open[:len(open)-1]
	}
	p.open[lane] = open
}

// Comment: notes (events lost...) go to standard error; a trace has no
// place for them.
func (p *Perfetto) Comment(s string) error {
	fmt.Fprintf(os.Stderr, "probe: %s\n", s)
	return nil
}

func (p *Perfetto) Flush() error { return p.w.Flush() }

// Finish leaves the calls still open unfinished: Perfetto shows them as
// calls that did not end (a detach, an exit inside them), where a slice
// ended at the last time seen would show a made-up duration.
func (p *Perfetto) Finish() error { return p.w.Flush() }
