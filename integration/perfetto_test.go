package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

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
	for _, raw := range trace[1] {
		pk := pfFields(t, raw.([]byte))
		if pfUint(pk, 10) == 0 {
			t.Errorf("a packet without its trusted_packet_sequence_id")
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
