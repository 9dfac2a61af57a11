package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
)

// pfEvent is a TrackEvent of a Perfetto trace, read back by field number
// (perfetto's protos: Trace.packet 1; TracePacket.timestamp 8,
// trusted_packet_sequence_id 10, track_event 11, track_descriptor 60;
// TrackEvent.type 9, track_uuid 11, name 23, debug_annotations 4;
// DebugAnnotation.name 10, int_value 4, uint_value 3, string_value 6;
// TrackDescriptor.uuid 1, parent_uuid 5, thread 4 (tid 2, thread_name 5),
// process 3 (pid 1)).
type pfEvent struct {
	ts    uint64
	typ   uint64
	track uint64
	name  string
	notes map[string]string
}

type pfTrack struct {
	parent, tid, pid uint64
	name             string
}

// fields splits a message into its fields: number -> values (varints as
// uint64, bytes as []byte).
func pfFields(t *testing.T, b []byte) map[protowire.Number][]any {
	t.Helper()
	out := map[protowire.Number][]any{}
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			t.Fatalf("bad tag: %v", protowire.ParseError(n))
		}
		b = b[n:]
		switch typ {
		case protowire.VarintType:
			v, n := protowire.ConsumeVarint(b)
			if n < 0 {
				t.Fatalf("bad varint")
			}
			out[num], b = append(out[num], v), b[n:]
		case protowire.BytesType:
			v, n := protowire.ConsumeBytes(b)
			if n < 0 {
				t.Fatalf("bad bytes")
			}
			out[num], b = append(out[num], v), b[n:]
		default:
			t.Fatalf("field %d: wire type %d not written by probe", num, typ)
		}
	}
	return out
}

func pfUint(f map[protowire.Number][]any, n protowire.Number) uint64 {
	if v, ok := f[n]; ok {
		return v[0].(uint64)
	}
	return 0
}

func pfString(f map[protowire.Number][]any, n protowire.Number) string {
	if v, ok := f[n]; ok {
		return string(v[0].([]byte))
	}
	return ""
}

// readPerfetto reads a trace probe wrote, and checks what Perfetto's
// trace_processor needs to read it as meant: a ClockSnapshot first that
// makes CLOCK_MONOTONIC (3) the trace's clock (ClockSnapshot: clocks 1
// (clock_id 1, timestamp 2), primary_trace_clock 2; TracePacket
// clock_snapshot 6), and gives CLOCK_REALTIME (1) at the same instant;
// every timestamp said to be CLOCK_MONOTONIC's (timestamp_clock_id 58);
// each packet on its sequence; each event on a track described before
// it; each slice's end with its begin on its track. unfinished: the
// slices begun and never ended.
func readPerfetto(t *testing.T, path string) (events []pfEvent, tracks map[uint64]pfTrack) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	tracks = map[uint64]pfTrack{}
	trace := pfFields(t, data)
	if len(trace) != 1 || len(trace[1]) == 0 {
		t.Fatalf("a Trace holds packets (field 1) only: fields %v", trace)
	}
	open := map[uint64]int{}
	for i, raw := range trace[1] {
		pk := pfFields(t, raw.([]byte))
		if pfUint(pk, 10) == 0 {
			t.Errorf("a packet without its trusted_packet_sequence_id")
		}
		if ts := pfUint(pk, 8); ts != 0 && pfUint(pk, 58) != 3 {
			t.Errorf("packet %d: timestamp %d of clock %d, want CLOCK_MONOTONIC's (3)", i, ts, pfUint(pk, 58))
		}
		snap, isSnap := pk[6]
		if isSnap != (i == 0) {
			t.Fatalf("packet %d: a clock snapshot %v: want one, the first packet", i, isSnap)
		}
		if isSnap {
			cs := pfFields(t, snap[0].([]byte))
			clocks := map[uint64]uint64{}
			for _, c := range cs[1] {
				f := pfFields(t, c.([]byte))
				clocks[pfUint(f, 1)] = pfUint(f, 2)
			}
			wall := time.Unix(0, int64(clocks[1]))
			if pfUint(cs, 2) != 3 || clocks[3] != pfUint(pk, 8) || time.Since(wall).Abs() > time.Hour {
				t.Errorf("clock snapshot: primary clock %d, clocks %v at %d: want 3 (CLOCK_MONOTONIC), its time the packet's, and CLOCK_REALTIME's now", pfUint(cs, 2), clocks, pfUint(pk, 8))
			}
		}
		if d, ok := pk[60]; ok {
			td := pfFields(t, d[0].([]byte))
			tr := pfTrack{parent: pfUint(td, 5), name: pfString(td, 2)}
			if th, ok := td[4]; ok {
				f := pfFields(t, th[0].([]byte))
				tr.pid, tr.tid, tr.name = pfUint(f, 1), pfUint(f, 2), pfString(f, 5)
			}
			if pr, ok := td[3]; ok {
				tr.pid = pfUint(pfFields(t, pr[0].([]byte)), 1)
			}
			tracks[pfUint(td, 1)] = tr
		}
		if e, ok := pk[11]; ok {
			te := pfFields(t, e[0].([]byte))
			ev := pfEvent{ts: pfUint(pk, 8), typ: pfUint(te, 9), track: pfUint(te, 11), name: pfString(te, 23), notes: map[string]string{}}
			for _, a := range te[4] {
				f := pfFields(t, a.([]byte))
				v := pfString(f, 6)
				if x, ok := f[4]; ok {
					v = fmt.Sprint(int64(x[0].(uint64)))
				} else if x, ok := f[3]; ok {
					v = fmt.Sprint(x[0].(uint64))
				}
				ev.notes[pfString(f, 10)] = v
			}
			if _, known := tracks[ev.track]; !known {
				t.Errorf("event %q on track %d, not described before", ev.name, ev.track)
			}
			switch ev.typ {
			case 1:
				open[ev.track]++
			case 2:
				if open[ev.track]--; open[ev.track] < 0 {
					t.Errorf("a slice's end at %d on track %d, which has no slice begun", ev.ts, ev.track)
				}
			}
			events = append(events, ev)
		}
	}
	return events, tracks
}

// TestOutputPerfetto: --format perfetto writes the calls of a recording
// of four threads as slices on a track per thread under their process's,
// each begin with its end, in the order and nesting of the JSON trace of
// the same recording; --args go with them as debug annotations.
func TestOutputPerfetto(t *testing.T) {
	t.Parallel()
	exe := tracerBin(t, "threads")
	dir := t.TempDir()
	rec := filepath.Join(dir, "trace.bin")
	mustProbe(t, "record", "-o", rec, "--tracer", "function_graph", "--args", "--filter", "worker,step,twig", "--", exe, "2")
	pf := filepath.Join(dir, "trace.pftrace")
	mustProbe(t, "report", "--format", "perfetto", "-o", pf, rec)
	js := filepath.Join(dir, "trace.json")
	mustProbe(t, "report", "--format", "json", "-o", js, rec)

	events, tracks := readPerfetto(t, pf)
	// Per thread, the JSON's entries and exits in order against the
	// slices' begins and ends.
	want, got := map[int][]string{}, map[int][]string{}
	for _, e := range readJSONLines(t, js) {
		switch e.Event {
		case "func_entry":
			want[e.Tid] = append(want[e.Tid], fmt.Sprintf("B %s %d", e.Func, e.Time))
		case "func_exit":
			want[e.Tid] = append(want[e.Tid], fmt.Sprintf("E %d", e.Time))
		}
	}
	for _, ev := range events {
		tr := tracks[ev.track]
		if proc, ok := tracks[tr.parent]; !ok || proc.pid != tr.pid || tr.tid == 0 || tr.name != "threads" {
			t.Fatalf("track %+v: want a thread's track named threads, under its process's (%+v)", tr, proc)
		}
		switch ev.typ {
		case 1:
			got[int(tr.tid)] = append(got[int(tr.tid)], fmt.Sprintf("B %s %d", ev.name, ev.ts))
		case 2:
			got[int(tr.tid)] = append(got[int(tr.tid)], fmt.Sprintf("E %d", ev.ts))
		default:
			t.Errorf("event type %d, want slice begins and ends only", ev.typ)
		}
	}
	if len(want) != 4 || fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("slices by thread:\n%v\nwant (from the JSON):\n%v", got, want)
	}
	// worker(id) gets ids 0..3; each twig(x) ends with retval x+1.
	ids := map[string]bool{}
	var twigs int
	open := map[uint64][]pfEvent{}
	for _, ev := range events {
		switch ev.typ {
		case 1:
			open[ev.track] = append(open[ev.track], ev)
			if ev.name == "worker" {
				ids[ev.notes["id"]] = true
			}
		case 2:
			stack := open[ev.track]
			b := stack[len(stack)-1]
			open[ev.track] = stack[:len(stack)-1]
			var x int64
			if _, err := fmt.Sscan(b.notes["x"], &x); b.name == "twig" && (err != nil || ev.notes["retval"] != fmt.Sprint(x+1)) {
				t.Errorf("twig(x=%s) ended with retval %q, want x+1", b.notes["x"], ev.notes["retval"])
			}
			if b.name == "twig" {
				twigs++
			}
		}
	}
	if twigs != 4*2*2 || fmt.Sprint(ids) != "map[0:true 1:true 2:true 3:true]" {
		t.Errorf("%d twig slices (want 16), worker ids %v (want 0-3)", twigs, ids)
	}
}

// TestOutputPerfettoUnfinished: a followed child's track starts inside
// calls it inherited (forkexit's children _exit inside spawn and main):
// their lost returns end nothing (before, an end with no begin, which
// trace_processor drops silently); and calls in progress at a detach
// stay unfinished, as Perfetto shows them, not slices cut at the last
// time seen.
func TestOutputPerfettoUnfinished(t *testing.T) {
	t.Parallel()
	// Both built before either runs (the arm64 guest's fixtures are
	// built by a host run that stops at its first exec).
	exe := builtOnce(t, "forkexit", filepath.Join("testdata", "lost", "forkexit.c"), "-O2", "-g", "-Wall")
	sleepy := builtOnce(t, "sleepy", filepath.Join("testdata", "tracers", "sleepy.c"), "-O1", "-g")
	pf := filepath.Join(t.TempDir(), "trace.pftrace")
	mustProbe(t, "run", "-f", "--format", "perfetto", "-o", pf, "--tracer", "function_graph", "--filter", "main,spawn,work", "--", exe, "2")
	events, _ := readPerfetto(t, pf)
	begun := map[string]int{}
	ends := 0
	for _, ev := range events {
		if ev.typ == 1 {
			begun[ev.name]++
		} else if ev.typ == 2 {
			ends++
		}
	}
	// The parent's main and two spawns, the children's works: all ended.
	if fmt.Sprint(begun) != "map[main:1 spawn:2 work:2]" || ends != 5 {
		t.Errorf("slices begun %v, %d ended: want main 1, spawn 2, work 2, all ended", begun, ends)
	}

	// Attached while sleepy sleeps inside inside outer, as it nearly
	// always is: at the detach, the two calls open have a begin and no
	// end.
	p := startBg(t, nil, sleepy)
	time.Sleep(100 * time.Millisecond)
	mustProbe(t, "attach", "--duration", "1s", "--format", "perfetto", "-o", pf, "--tracer", "function_graph", fmt.Sprint(p.cmd.Process.Pid))
	events, _ = readPerfetto(t, pf)
	var open []string
	for _, ev := range events {
		switch ev.typ {
		case 1:
			open = append(open, ev.name)
		case 2:
			open = open[:len(open)-1]
		}
	}
	if fmt.Sprint(open) != "[outer inner]" {
		t.Errorf("calls unfinished at the detach: %v, want [outer inner]", open)
	}
}
