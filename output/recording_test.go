package output

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"reflect"
	"runtime"
	"strings"
	"testing"

	"github.com/probedbg/probe/fetch"
)

// recordSample is a recording of graphRecords and a probe hit with
// fields and a stack.
func recordSample(t testing.TB) []byte { return record(t, sampleRecords()) }

func sampleRecords() []Record {
	return append(graphRecords(), Record{Kind: KindProbe, Time: 5, CPU: 1, Pid: 7, Tid: 8, Comm: "x", Event: "p_a_0", Where: "a+0x0/0x4",
		Fields: []fetch.Field{{Name: "n", Value: fetch.UintValue(fetch.TypeU64, 3)}, {Name: "s", Value: fetch.StringValue("hi")}}, Stack: []string{"a+0x0/0x4 [x]", "main+0x9/0x20 [x]"}})
}

func record(t testing.TB, recs []Record) []byte {
	t.Helper()
	var b bytes.Buffer
	r := NewRecorder(&b, RecordingInfo{Tracers: "function_graph", CPUWidth: 1, Probes: true})
	writeAll(t, r, recs)
	return b.Bytes()
}

func live(t *testing.T, recs []Record) string {
	var b bytes.Buffer
	writeAll(t, NewGraph(&b, GraphOptions{}), recs)
	return b.String()
}

func TestRecordingReplaysAsLive(t *testing.T) {
	data := record(t, graphRecords())
	rec, err := OpenRecording(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	if rec.Info.Tracers != "function_graph" || !rec.Info.Probes {
		t.Errorf("info %+v", rec.Info)
	}
	var b bytes.Buffer
	g := NewGraph(&b, GraphOptions{CPUWidth: rec.Info.CPUWidth})
	n, err := rec.Replay(g, g, nil)
	if err != nil || n != len(graphRecords()) {
		t.Fatalf("replayed %d, %v; want %d, nil", n, err, len(graphRecords()))
	}
	if want := live(t, graphRecords()); b.String() != want {
		t.Errorf("report\n%s\nlive\n%s", b.String(), want)
	}
}

// TestRecordingTruncated: a recording cut anywhere replays its whole
// entries and says it was cut short.
func TestRecordingTruncated(t *testing.T) {
	data := record(t, graphRecords())
	full := len(graphRecords())
	header := 0
	for cut := len(data) - 1; cut > 0; cut-- {
		rec, err := OpenRecording(bytes.NewReader(data[:cut]))
		if err != nil {
			header = cut
			break
		}
		var b bytes.Buffer
		g := NewGraph(&b, GraphOptions{})
		n, err := rec.Replay(g, g, nil)
		if !errors.Is(err, ErrTruncated) {
			t.Fatalf("cut at %d: %v, want ErrTruncated", cut, err)
		}
		if n > full {
			t.Fatalf("cut at %d: %d records", cut, n)
		}
		if n == full-1 && !strings.Contains(b.String(), "main() {") {
			t.Errorf("cut at %d: lost what was complete:\n%s", cut, b.String())
		}
	}
	if header == 0 {
		t.Error("every cut opened")
	}
}

func TestRecordingRejectsOtherFiles(t *testing.T) {
	for _, data := range []string{"", "hello\n", "\x7fELF\x02\x01\x01", "probe-trace\n2\n", "probe-trace\n1\ngarbage"} {
		if _, err := OpenRecording(strings.NewReader(data)); !errors.Is(err, ErrNotRecording) {
			t.Errorf("%q: %v, want ErrNotRecording", data, err)
		}
	}
}

// TestRecordingDamagedLength: a recording whose first frame claims 8
// EiB (or any length over the bound) is refused at once, without the
// reader allocating for it.
func TestRecordingDamagedLength(t *testing.T) {
	for _, length := range [][]byte{
		{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f}, // 2^63-1
		{0x80, 0x80, 0x80, 0x80, 0x01},                         // 256 MiB
	} {
		head := fmt.Sprintf("%s%d\ni", recordingMagic, recordingVersion)
		src := append([]byte(head), length...)
		src = append(src, make([]byte, 64)...)
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		_, err := OpenRecording(bytes.NewReader(src))
		runtime.ReadMemStats(&after)
		if err == nil || !strings.Contains(err.Error(), "damaged: a frame of") {
			t.Errorf("length % x: %v, want the frame refused as damaged", length, err)
		}
		if grew := after.TotalAlloc - before.TotalAlloc; grew > 8<<20 {
			t.Errorf("length % x: %d bytes allocated", length, grew)
		}
	}
}

// FuzzRecording: whatever the bytes, opening and replaying them neither
// panics nor allocates without bound; what a reader gets is a recording,
// a cut one (ErrTruncated), or not one (ErrNotRecording).
func FuzzRecording(f *testing.F) {
	whole := recordSample(f)
	f.Add(whole)
	f.Add(whole[:len(whole)/2])
	f.Add([]byte("probe-trace\n3\n"))
	f.Add([]byte("probe-trace\n4\n"))
	f.Add([]byte("probe-trace\n1\n"))
	if v2, err := os.ReadFile("testdata/recording-v2.rec"); err == nil {
		f.Add(v2)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		rec, err := OpenRecording(bytes.NewReader(data))
		if err != nil {
			if !errors.Is(err, ErrNotRecording) {
				t.Fatalf("open: %v, want ErrNotRecording", err)
			}
			return
		}
		var b bytes.Buffer
		g := NewGraph(&b, GraphOptions{})
		if _, err := rec.Replay(g, g, nil); err != nil && !errors.Is(err, ErrTruncated) {
			t.Fatalf("replay: %v, want nil or ErrTruncated", err)
		}
	})
}

// collect is a Writer that keeps the records it is given.
type collect struct{ recs []Record }

func (c *collect) Write(r *Record) error { c.recs = append(c.recs, *r); return nil }
func (c *collect) Comment(string) error  { return nil }
func (c *collect) Flush() error          { return nil }
func (c *collect) Finish() error         { return nil }

// TestRecordingRoundTrip: every record comes back from a recording as
// it went in, its fields' values and its stack included.
func TestRecordingRoundTrip(t *testing.T) {
	want := sampleRecords()
	rec, err := OpenRecording(bytes.NewReader(record(t, want)))
	if err != nil {
		t.Fatal(err)
	}
	var c collect
	if n, err := rec.Replay(&c, &c, nil); err != nil || n != len(want) {
		t.Fatalf("replayed %d, %v; want %d, nil", n, err, len(want))
	}
	if !reflect.DeepEqual(c.recs, want) {
		t.Errorf("replayed\n%+v\nwant\n%+v", c.recs, want)
	}
}

// TestRecordingVersion2: a recording made before version 3 (every field
// of every record given) reports as the live trace of its records did.
func TestRecordingVersion2(t *testing.T) {
	data, err := os.ReadFile("testdata/recording-v2.rec")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(data, []byte("probe-trace\n2\n")) {
		t.Fatalf("testdata/recording-v2.rec is not of version 2: %q", data[:14])
	}
	rec, err := OpenRecording(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	var got, want bytes.Buffer
	g := NewGraph(&got, GraphOptions{})
	if n, err := rec.Replay(g, g, nil); err != nil || n != len(sampleRecords()) {
		t.Fatalf("replayed %d, %v; want %d, nil", n, err, len(sampleRecords()))
	}
	writeAll(t, NewGraph(&want, GraphOptions{}), sampleRecords())
	if got.String() != want.String() {
		t.Errorf("report\n%s\nlive\n%s", got.String(), want.String())
	}
}

// TestRecordingFieldsLeftOut: whatever fields a record shares with the
// one before (version 3 leaves them out), each reads back as written.
func TestRecordingFieldsLeftOut(t *testing.T) {
	base := Record{Kind: KindEntry, Time: 100, CPU: 1, Pid: 7, Tid: 8, Comm: "c", Func: "f", Depth: 2, Lane: 8}
	recs := []Record{base}
	change := []func(*Record){
		func(r *Record) { r.Kind = KindReturn; r.EntryTime = r.Time }, // a call of no time
		func(r *Record) { r.Kind = KindReturn; r.EntryTime = r.Time - 5 },
		func(r *Record) { r.Tid, r.Lane = 9, 9 },
		func(r *Record) { r.Lane, r.Goroutine = 1<<40, 3 },
		func(r *Record) { r.CPU = 0 },
		func(r *Record) { r.Pid = 70 },
		func(r *Record) { r.Comm = "d" },
		func(r *Record) { r.Kind, r.Event, r.Where, r.Func, r.Depth = KindProbe, "p_a_0", "a+0x0/0x4", "", 0 },
		func(r *Record) { r.Caller = "main" },
		func(r *Record) { r.Fields = []fetch.Field{{Name: "n", Value: fetch.UintValue(fetch.TypeU64, 3)}} },
		func(r *Record) { r.Stack = []string{"a+0x0/0x4 [x]"} },
		func(r *Record) { r.Time -= 50 }, // an earlier time: a negative delta
		func(r *Record) { r.Kind = KindLost; r.Depth = -1 },
	}
	for i, ch := range change {
		r := recs[len(recs)-1]
		r.Time += int64(10 * i)
		r.EntryTime, r.Fields, r.Stack = 0, nil, nil
		ch(&r)
		recs = append(recs, r, r) // and once more, all of it as before
	}
	rec, err := OpenRecording(bytes.NewReader(record(t, recs)))
	if err != nil {
		t.Fatal(err)
	}
	var c collect
	n, err := rec.Replay(&c, &c, nil)
	got := c.recs
	if err != nil || n != len(recs) {
		t.Fatalf("replayed %d, %v; want %d, nil", n, err, len(recs))
	}
	for i := range recs {
		if !reflect.DeepEqual(got[i], recs[i]) {
			t.Errorf("record %d: got %+v, want %+v", i, got[i], recs[i])
		}
	}
}

// TestRecordingVersion3: a recording of version 3 (whose frames are
// version 4's, without raw return probes) reads as one of 4.
func TestRecordingVersion3(t *testing.T) {
	whole := recordSample(t)
	if !bytes.HasPrefix(whole, []byte("probe-trace\n4\n")) {
		t.Fatalf("a recording starts %q", whole[:14])
	}
	var reports []string
	for _, data := range [][]byte{whole, append([]byte("probe-trace\n3\n"), whole[14:]...)} {
		rec, err := OpenRecording(bytes.NewReader(data))
		if err != nil {
			t.Fatal(err)
		}
		var b bytes.Buffer
		g := NewGraph(&b, GraphOptions{})
		if n, err := rec.Replay(g, g, nil); err != nil || n != len(sampleRecords()) {
			t.Fatalf("replayed %d, %v; want %d, nil", n, err, len(sampleRecords()))
		}
		reports = append(reports, b.String())
	}
	if reports[0] != reports[1] {
		t.Errorf("version 3\n%s\nversion 4\n%s", reports[1], reports[0])
	}
}
