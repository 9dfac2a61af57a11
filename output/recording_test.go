package output

import (
	"bytes"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
)

func record(t *testing.T, recs []Record) []byte {
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
	n, err := rec.Replay(g, g)
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
		n, err := rec.Replay(g, g)
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

// TestRecordingDamagedLength: a recording whose first message claims 8
// EiB (or any length over the bound) is refused at once, without gob
// allocating for it.
func TestRecordingDamagedLength(t *testing.T) {
	for _, length := range [][]byte{
		{0xf8, 0x7f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, // 2^63-1
		{0xfc, 0x10, 0x00, 0x00, 0x00},                         // 256 MiB
	} {
		head := fmt.Sprintf("%s%d\n", recordingMagic, recordingVersion)
		src := append([]byte(head), length...)
		src = append(src, make([]byte, 64)...)
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		_, err := OpenRecording(bytes.NewReader(src))
		runtime.ReadMemStats(&after)
		if err == nil || !strings.Contains(err.Error(), "damaged: a message of") {
			t.Errorf("length % x: %v, want the message refused as damaged", length, err)
		}
		if grew := after.TotalAlloc - before.TotalAlloc; grew > 8<<20 {
			t.Errorf("length % x: %d bytes allocated", length, grew)
		}
	}
}
