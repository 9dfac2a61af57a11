package output

import (
	"bytes"
	"encoding/json"
	"strings"
	"sync"
	"testing"

	"github.com/google/pprof/profile"

	"github.com/probedbg/probe/fetch"
)

// graphRecords is main() { work() { leaf(); } leaf(); } on thread 7, a
// probe hit inside work, and on thread 8 a call that never returns.
func graphRecords() []Record {
	e := func(t int64, tid, depth int, fn string) Record {
		return Record{Kind: KindEntry, Time: t, Tid: tid, Pid: 7, Comm: "app", Lane: int64(tid), Func: fn, Depth: depth}
	}
	x := func(t, start int64, tid, depth int, fn string) Record {
		return Record{Kind: KindReturn, Time: t, EntryTime: start, Tid: tid, Pid: 7, Comm: "app", Lane: int64(tid), Func: fn, Depth: depth}
	}
	return []Record{
		e(1000, 7, 0, "main"),
		e(1100, 7, 1, "work"),
		{Kind: KindProbe, Time: 1150, Tid: 7, Pid: 7, Comm: "app", Lane: 7, Event: "p_work_0", Where: "work+0x4/0x20",
			Fields: []fetch.Field{{Name: "n", Value: fetch.UintValue(fetch.TypeU32, 5)}, {Name: "s", Value: fetch.StringValue("hi")}, {Name: "bad", Value: fetch.FaultValue(fetch.TypeString)}}},
		e(1200, 7, 2, "leaf"),
		x(1300, 1200, 7, 2, "leaf"),
		x(1500, 1100, 7, 1, "work"),
		e(1600, 7, 1, "leaf"),
		x(1650, 1600, 7, 1, "leaf"),
		x(2000, 1000, 7, 0, "main"),
		e(1700, 8, 0, "spin"),
		{Kind: KindProbe, Time: 2500, Tid: 8, Pid: 7, Comm: "app", Lane: 8, Event: "p_spin_0", Where: "spin+0x0/0x10"},
	}
}

func writeAll(t testing.TB, w Writer, recs []Record) {
	t.Helper()
	for i := range recs {
		if err := w.Write(&recs[i]); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Finish(); err != nil {
		t.Fatal(err)
	}
	if err := w.Comment("3 events lost (buffer full)"); err != nil {
		t.Fatal(err)
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
}

func TestJSON(t *testing.T) {
	var b bytes.Buffer
	writeAll(t, NewJSON(&b), graphRecords())
	lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	if len(lines) != len(graphRecords())+1 {
		t.Fatalf("%d lines, want %d:\n%s", len(lines), len(graphRecords())+1, b.String())
	}
	want := map[int]string{
		2:  `{"time":1150,"pid":7,"tid":7,"comm":"app","cpu":0,"event":"p_work_0","location":"work+0x4/0x20","fields":{"bad":null,"n":5,"s":"hi"}}`,
		4:  `{"time":1300,"pid":7,"tid":7,"comm":"app","cpu":0,"event":"func_exit","func":"leaf","depth":2,"duration":100}`,
		0:  `{"time":1000,"pid":7,"tid":7,"comm":"app","cpu":0,"event":"func_entry","func":"main","depth":0}`,
		11: `{"comment":"3 events lost (buffer full)"}`,
	}
	for i, w := range want {
		if lines[i] != w {
			t.Errorf("line %d:\n got %s\nwant %s", i, lines[i], w)
		}
	}
}

func TestJSONFieldTypes(t *testing.T) {
	var b bytes.Buffer
	w := NewJSON(&b)
	w.Write(&Record{Event: "e", Where: "w", Stack: []string{"leaf+0x4/0x10 [app]", "main+0x20/0x40 [app]"}, EntryTime: 10, Time: 30, Fields: []fetch.Field{
		{Name: "s8", Value: fetch.UintValue(fetch.TypeS8, 0xff)},
		{Name: "x", Value: fetch.UintValue(fetch.TypeX32, 255)},
		{Name: "c", Value: fetch.UintValue(fetch.TypeChar, 'A')},
		{Name: "dn", Value: fetch.DwarfValue("-12.5")},
		{Name: "db", Value: fetch.DwarfValue("true")},
		{Name: "ds", Value: fetch.DwarfValue(`"a\"b"`)},
		{Name: "dp", Value: fetch.DwarfValue("(*int)(0xc000012345)")},
		{Name: "dc", Value: fetch.DwarfValue("97 'a'")},
	}})
	w.Flush()
	want := `{"time":30,"pid":0,"tid":0,"comm":"","cpu":0,"event":"e","location":"w","duration":20,"fields":{"c":"'A'","db":true,"dc":"97 'a'","dn":-12.5,"dp":"(*int)(0xc000012345)","ds":"a\"b","s8":-1,"x":"0xff"},"stack":["leaf+0x4/0x10 [app]","main+0x20/0x40 [app]"]}` + "\n"
	if b.String() != want {
		t.Errorf("got  %s\nwant %s", b.String(), want)
	}
}

type chromeDoc struct {
	TraceEvents []struct {
		Name string         `json:"name"`
		Ph   string         `json:"ph"`
		Ts   float64        `json:"ts"`
		Dur  float64        `json:"dur"`
		Tid  int            `json:"tid"`
		Args map[string]any `json:"args"`
	} `json:"traceEvents"`
	OtherData struct {
		Comments []string `json:"comments"`
	} `json:"otherData"`
}

func TestChrome(t *testing.T) {
	var b bytes.Buffer
	writeAll(t, NewChrome(&b, true), graphRecords())
	var doc chromeDoc
	if err := json.Unmarshal(b.Bytes(), &doc); err != nil {
		t.Fatalf("%v:\n%s", err, b.String())
	}
	var got []string
	for _, e := range doc.TraceEvents {
		s := e.Ph + " " + e.Name
		switch e.Ph {
		case "X":
			s += " " + strings.TrimSpace(strings.Join([]string{ftoa(e.Ts), ftoa(e.Dur)}, "+"))
		case "M":
			s += " " + e.Args["name"].(string)
		case "i":
			s += " " + ftoa(e.Ts)
		}
		got = append(got, s)
	}
	want := []string{
		"M thread_name app-7",
		"i p_work_0 1.15",
		"X leaf 1.2+0.1",
		"X work 1.1+0.4",
		"X leaf 1.6+0.05",
		"X main 1+1",
		"M thread_name app-8",
		"i p_spin_0 2.5",
		"X spin 1.7+0.8", // still open: ends at the last time seen
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if doc.TraceEvents[1].Args["n"] != 5.0 || doc.TraceEvents[1].Args["location"] != "work+0x4/0x20" {
		t.Errorf("probe args %v", doc.TraceEvents[1].Args)
	}
	if len(doc.OtherData.Comments) != 1 {
		t.Errorf("comments %q, want the lost-events note", doc.OtherData.Comments)
	}
}

func ftoa(f float64) string { b, _ := json.Marshal(f); return string(b) }

// TestChromeLostFrames: frames whose return was lost end where the loss
// is seen, and a return whose inner calls never returned closes them.
func TestChromeLostFrames(t *testing.T) {
	var b bytes.Buffer
	writeAll(t, NewChrome(&b, true), []Record{
		{Kind: KindEntry, Time: 10, Tid: 1, Lane: 1, Func: "a"},
		{Kind: KindEntry, Time: 20, Tid: 1, Lane: 1, Func: "b", Depth: 1},
		{Kind: KindEntry, Time: 30, Tid: 1, Lane: 1, Func: "c", Depth: 2},
		{Kind: KindLost, Time: 40, Tid: 1, Lane: 1, Func: "c", Depth: 2},
		{Kind: KindReturn, Time: 50, EntryTime: 10, Tid: 1, Lane: 1, Func: "a"},
	})
	var doc chromeDoc
	if err := json.Unmarshal(b.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range doc.TraceEvents[1:] {
		got = append(got, e.Name+" "+ftoa(e.Ts*1000)+"+"+ftoa(e.Dur*1000))
	}
	if want := "c 30+10 b 20+30 a 10+40"; strings.Join(got, " ") != want {
		t.Errorf("got %q, want %q", strings.Join(got, " "), want)
	}
}

// TestFolded: stacks and their self times, nothing else in the file (a
// "# ..." line makes flamegraph.pl warn); the comments go to the notes.
func TestFolded(t *testing.T) {
	var b, notes bytes.Buffer
	writeAll(t, NewFolded(&b, &notes), graphRecords())
	want := `main 550
main;leaf 50
main;work 300
main;work;leaf 100
spin 800
`
	if b.String() != want {
		t.Errorf("got\n%s\nwant\n%s", b.String(), want)
	}
	if want := "probe: 3 events lost (buffer full)\n"; notes.String() != want {
		t.Errorf("notes %q, want %q", notes.String(), want)
	}
}

func TestPprof(t *testing.T) {
	recs := graphRecords()
	recs = append(recs, Record{Kind: KindProbe, Time: 2600, Event: "p_x", Stack: []string{"leaf+0x4/0x10 [app]", "main+0x20/0x40 [app]"}})
	var b bytes.Buffer
	writeAll(t, NewPprof(&b), recs)
	prof, err := profile.Parse(&b)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string][2]int64{}
	for _, s := range prof.Sample {
		var frames []string
		for _, l := range s.Location {
			frames = append(frames, l.Line[0].Function.Name)
		}
		k := strings.Join(frames, "<")
		got[k] = [2]int64{got[k][0] + s.Value[0], got[k][1] + s.Value[1]}
	}
	want := map[string][2]int64{
		"main":           {1, 550},
		"leaf<main":      {2, 50}, // one hit of the probe's stack, one call
		"work<main":      {1, 300},
		"leaf<work<main": {1, 100},
		"spin":           {1, 900}, // still open: ends at the last time seen (2600)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("stack %s: got %v, want %v", k, got[k], v)
		}
	}
	if len(prof.Sample) != 6 {
		t.Errorf("%d samples, want 6 (5 stacks of calls and the probe hit's)", len(prof.Sample))
	}
	if len(prof.Comments) != 1 || prof.Comments[0] != "3 events lost (buffer full)" {
		t.Errorf("comments %q", prof.Comments)
	}
}

// blockingWriter holds the stream's writer in Write until released.
type blockingWriter struct {
	entered chan struct{}
	release chan struct{}
	once    sync.Once
	n       int
}

func (w *blockingWriter) Write(*Record) error {
	w.once.Do(func() { close(w.entered); <-w.release })
	w.n++
	return nil
}
func (w *blockingWriter) Comment(string) error { return nil }
func (w *blockingWriter) Flush() error         { return nil }
func (w *blockingWriter) Finish() error        { return nil }

// TestStreamDropsWhenFull: with the writer stuck, Send neither blocks nor
// grows the buffer past its size; the drops are counted.
func TestStreamDropsWhenFull(t *testing.T) {
	w := &blockingWriter{entered: make(chan struct{}), release: make(chan struct{})}
	s := NewStreamSize(w, 4)
	s.Send(Record{})
	<-w.entered // the writer holds the first record
	for range 10 {
		s.Send(Record{}) // must not block
	}
	if got := s.Lost(); got != 6 {
		t.Errorf("lost %d, want 6", got)
	}
	close(w.release)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if w.n != 5 {
		t.Errorf("wrote %d records, want 5", w.n)
	}
	if got := LostNote(s.Lost()); got != "6 events lost (buffer full)" {
		t.Errorf("note %q", got)
	}
}
