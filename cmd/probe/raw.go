package main

import (
	"fmt"
	"sync"

	"github.com/probedbg/probe/output"
	"github.com/probedbg/probe/probe"
)

// Raw capture (probe/raw.go): probe record of a function_graph, of
// entry and return probes, or of these together, writes the records as
// the tracee made them, and probe report decodes them.

// rawSink is the raw capture of a recording: an encoder whose frames go
// to the recording through the stream, in order with the rest, at most
// rawPending bytes of them waiting.
type rawSink struct {
	enc *probe.RawEncoder
	rec *output.Recorder
	on  bool // the tracer captures raw (decided at its Start)

	mu      sync.Mutex
	pending int           // bytes of frames put and not yet written
	freed   chan struct{} // closed when some are written, if one waits
}

// rawPending bounds what the frames waiting for the writer hold. In
// bytes, not frames: a stop puts a frame of the few records before it,
// and 64 of those filled a bound of frames while the writer slept
// (output.FlushInterval), holding the stop (Lua: 0.17 -> 0.32 s).
const rawPending = 8 << 20

// wantsRaw reports whether the recording may be raw: probe record of a
// function_graph, of probes, or of both (the tracer decides at Start
// whether each probe and function can: probe.Tracer.RawCapture).
func wantsRaw(ts tracers, o *options, s *sink) bool {
	_, ok := s.all.(*output.Recorder)
	return ok && o.record && !o.follow && len(o.morePids) == 0 && !o.args && (ts == tracers{graph: true} || ts == tracers{})
}

// setupRaw asks t for raw capture where the recording may be raw.
func setupRaw(t *probe.Tracer, ts tracers, o *options, s *sink) error {
	if !wantsRaw(ts, o, s) {
		return nil
	}
	rec := s.all.(*output.Recorder)
	r := &rawSink{rec: rec}
	r.enc = probe.NewRawEncoder(func(kind byte, payload []byte) {
		if !r.reserve(len(payload), s.stream.Failed()) {
			return // nobody writes them any more
		}
		s.stream.Do(func(output.Writer) error {
			r.release(len(payload))
			err := rec.Frame(kind, payload)
			if kind == probe.RawChunksFrame {
				r.enc.Reuse(payload) // (written: the recorder keeps none of it)
			}
			return err
		})
	})
	s.raw = r
	return t.SetRawOutput(r.enc)
}

// reserve waits for room for n bytes of frames (a frame larger than the
// bound goes alone); false if the writer has failed meanwhile.
func (r *rawSink) reserve(n int, failed <-chan struct{}) bool {
	for {
		r.mu.Lock()
		if r.pending == 0 || r.pending+n <= rawPending {
			r.pending += n
			r.mu.Unlock()
			return true
		}
		if r.freed == nil {
			r.freed = make(chan struct{})
		}
		freed := r.freed
		r.mu.Unlock()
		select {
		case <-freed:
		case <-failed:
			return false
		}
	}
}

// release gives back the room of n bytes written.
func (r *rawSink) release(n int) {
	r.mu.Lock()
	r.pending -= n
	if r.freed != nil {
		close(r.freed)
		r.freed = nil
	}
	r.mu.Unlock()
}

// flush puts what the encoder holds into the stream, once the tracer
// is done: before the stream closes.
func (r *rawSink) flush(t *probe.Tracer) {
	if r == nil || t == nil {
		return
	}
	_, r.on = t.RawCapture()
	r.enc.Flush()
}

// funcRecord is a function tracer's event as a record.
func funcRecord(ev *probe.FuncEvent) output.Record {
	return output.Record{
		Kind: recordKind[ev.Kind], Time: ev.Time, CPU: ev.CPU, Pid: ev.Pid, Tid: ev.Tid, Comm: ev.Comm,
		Func: ev.Func, Caller: ev.Caller, Depth: ev.Depth, EntryTime: ev.EntryTime, Lane: ev.Lane, Goroutine: ev.Goroutine,
		Fields: fieldsCopy(ev.Fields),
	}
}

// rawReplay decodes a recording's raw frames (probe report): the
// events as the live trace would have had them, and at the 'D' frame the
// notes of the returns the decoder found lost.
func rawReplay() output.FrameHandler {
	var out output.ReplayOut
	var r output.Record // (one, reused: a record made per call escaped to the heap)
	rr := probe.NewRawReader(probe.DecodeHandlers{
		Func: func(ev *probe.FuncEvent) {
			r = funcRecord(ev)
			out.Record(&r)
		},
		Probe: func(h *probe.Hit) {
			r = hitRecord(h)
			out.Record(&r)
		},
	})
	return func(kind byte, payload []byte, cut bool, o output.ReplayOut) error {
		out = o
		switch {
		case kind == 'D':
			for _, note := range returnNotes(rr.Stats(), false) {
				o.Comment(note)
			}
		case probe.IsRawFrame(kind) && cut:
			return rr.FrameCut(kind, payload)
		case probe.IsRawFrame(kind):
			return rr.Frame(kind, payload)
		}
		return nil
	}
}

// returnNotes are the notes of the returns the tracer did not see:
// lost (not with --calls, which shows each), not recorded, in progress
// at the detach.
func returnNotes(stats probe.Stats, calls bool) []string {
	var notes []string
	if lost := stats.LostReturns; lost > 0 && !calls {
		notes = append(notes, fmt.Sprintf("%d returns lost (calls that never returned: longjmp, an exception, a stack not switched back to, a thread gone)", lost))
	}
	if n := stats.UnrecordedReturns; n > 0 {
		notes = append(notes, fmt.Sprintf("%d returns not recorded (calls in threads whose ring was full at times: their returns were most likely among the events lost; --ring-size)", n))
	}
	if n := stats.CallsInProgress; n > 0 {
		notes = append(notes, fmt.Sprintf("%d calls in progress at the detach (their returns come after it: not in the trace)", n))
	}
	return notes
}
