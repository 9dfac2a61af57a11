package output

import (
	"bytes"
	"testing"
)

func TestTextFormat(t *testing.T) {
	var b bytes.Buffer
	w := NewText(&b, "nop")
	w.Write(&Record{Time: 5123_000123_456, CPU: 1, Tid: 4242, Comm: "loop", Event: "p_work_0", Where: "work+0x0/0x12"})
	w.Write(&Record{Time: 7_000001_999, CPU: 12, Tid: 7, Comm: "a-very-long-nam", Event: "ev", Where: "main.work+0x4/0x20"})
	w.Comment("3 hits lost while detaching")
	w.Flush()
	want := `# tracer: nop
#           TASK-PID     CPU#  TIMESTAMP  FUNCTION
            loop-4242    [001]  5123.000123: p_work_0: (work+0x0/0x12)
 a-very-long-nam-7       [012]     7.000001: ev: (main.work+0x4/0x20)
# 3 hits lost while detaching
`
	if b.String() != want {
		t.Errorf("got\n%s\nwant\n%s", b.String(), want)
	}
}

func TestTextNoEventsNoHeaderUntilFlush(t *testing.T) {
	var b bytes.Buffer
	NewText(&b, "nop")
	if b.Len() != 0 {
		t.Errorf("wrote %q before any event", b.String())
	}
}

// TestStreamKeepsOrder: everything sent is written, in order, by Close.
func TestStreamKeepsOrder(t *testing.T) {
	var b bytes.Buffer
	w := NewText(&b, "nop")
	s := NewStream(w)
	for i := 0; i < 20000; i++ {
		s.Send(Record{Tid: i, Comm: "c", Event: "e", Where: "w"})
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	lines := bytes.Split(bytes.TrimSuffix(b.Bytes(), []byte("\n")), []byte("\n"))
	if len(lines) != 20002 {
		t.Fatalf("%d lines, want 20002", len(lines))
	}
	if want := "               c-19999   [000]     0.000000: e: (w)"; string(lines[20001]) != want {
		t.Errorf("last line %q, want %q", lines[20001], want)
	}
}
