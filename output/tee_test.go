package output

import (
	"bytes"
	"errors"
	"testing"
)

// TestTee: function_graph and profile into one file; the graph's lines
// come as they are written, the table at Finish, in the order given.
func TestTee(t *testing.T) {
	var b bytes.Buffer
	w := Tee(NewGraph(&b, GraphOptions{}), NewProfile(&b))
	for _, r := range []Record{
		loop.entry(0, "main", 0),
		loop.entry(1000, "work", 1),
		loop.ret(1000, 1820, "work", 1),
		loop.ret(0, 12300, "main", 0),
	} {
		if err := w.Write(&r); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Finish(); err != nil {
		t.Fatal(err)
	}
	want := graphHeader + ` 1)   loop-4242    |               |  main() {
 1)   loop-4242    |   0.820 us    |    work();
 1)   loop-4242    | + 12.300 us   |  }
# tracer: profile
  Function                               Hit    Time            Avg             Stddev          Self
  --------                               ---    ----            ---             ------          ----
` +
		"  main                                     1    12.300 us       12.300 us       0.000 us        11.480 us   \n" +
		"  work                                     1    0.820 us        0.820 us        0.000 us        0.820 us    \n"
	if b.String() != want {
		t.Errorf("got\n%s\nwant\n%s", b.String(), want)
	}
}

// failing is a Writer whose every call fails.
type failing struct{ calls int }

var errFailing = errors.New("failing")

func (f *failing) Write(*Record) error  { f.calls++; return errFailing }
func (f *failing) Comment(string) error { f.calls++; return errFailing }
func (f *failing) Flush() error         { f.calls++; return errFailing }
func (f *failing) Finish() error        { f.calls++; return errFailing }

// TestTeeErrors: a failing writer does not keep the others from their
// calls, and its error is returned.
func TestTeeErrors(t *testing.T) {
	var b bytes.Buffer
	f := &failing{}
	w := Tee(f, NewText(&b, "function"))
	r := loop.entry(5123_000123_456, "work", 0)
	for _, err := range []error{w.Write(&r), w.Comment("c"), w.Flush(), w.Finish()} {
		if !errors.Is(err, errFailing) {
			t.Errorf("got %v, want %v", err, errFailing)
		}
	}
	if f.calls != 4 {
		t.Errorf("failing writer called %d times, want 4", f.calls)
	}
	want := `# tracer: function
#           TASK-PID     CPU#  TIMESTAMP  FUNCTION
            loop-4242    [001]  5123.000123: work <-main
# c
`
	if b.String() != want {
		t.Errorf("got\n%s\nwant\n%s", b.String(), want)
	}
}
