package output

import (
	"bytes"
	"math"
	"strings"
	"testing"
)

// profileTrace: two threads; main calls work twice (the second time work
// calls helper) and jump, which longjmps out; loop2 calls work once and is
// inside it again when the trace ends.
var profileTrace = []Record{
	loop.entry(0, "main", 0),
	loop.entry(1000, "work", 1),
	loop2.entry(0, "work", 0),
	loop.ret(1000, 3000, "work", 1), // 2000
	loop.entry(4000, "work", 1),
	loop2.ret(0, 4000, "work", 0), // 4000
	loop.entry(5000, "helper", 2),
	loop.ret(5000, 6000, "helper", 2), // 1000
	loop.ret(4000, 10000, "work", 1),  // 6000, 5000 of it its own
	loop.entry(11000, "jump", 1),
	loop.lost(12000, "jump", 1),
	loop.probe(13000, "p_main_4", "main+0x4/0x20"), // ignored
	loop.ret(0, 20000, "main", 0),                  // 20000, less 2000 and 6000 in work
	loop2.entry(21000, "work", 0),
}

func TestProfileStats(t *testing.T) {
	p := NewProfile(&bytes.Buffer{})
	for _, r := range profileTrace {
		p.Write(&r)
	}
	want := []FuncStat{
		{Func: "main", Hits: 1, Calls: 1, Time: 20000, Self: 12000, Sum: 20000},
		// Durations 2000, 6000, 4000: mean 4000, sum of squared
		// deviations 8e6, over n-1 = 2 gives 4e6.
		{Func: "work", Hits: 4, Calls: 3, Time: 12000, Self: 11000, Sum: 12000, Stddev: 2000},
		{Func: "helper", Hits: 1, Calls: 1, Time: 1000, Self: 1000, Sum: 1000},
		{Func: "jump", Hits: 1},
	}
	got := p.Stats()
	if len(got) != len(want) {
		t.Fatalf("got %+v\nwant %+v", got, want)
	}
	for i := range want {
		g, w := got[i], want[i]
		if math.Abs(g.Stddev-w.Stddev) > 1e-6 {
			t.Errorf("%s: stddev %v, want %v", g.Func, g.Stddev, w.Stddev)
		}
		g.Stddev, w.Stddev = 0, 0
		if g != w {
			t.Errorf("stat %d: got %+v, want %+v", i, g, w)
		}
	}
	if avg := got[1].Avg(); avg != 4000 {
		t.Errorf("work: average %d, want 4000", avg)
	}
}

// A recursion's time is counted once, in its outermost call, per thread:
// two threads in the same function at once each count theirs.
func TestProfileRecursion(t *testing.T) {
	a, b := thread{lane: 1, tid: 1}, thread{lane: 2, tid: 2}
	trace := []Record{
		a.entry(0, "rec", 0),
		b.entry(500, "rec", 0),
		a.entry(1000, "rec", 1),
		a.entry(2000, "rec", 2),
		a.ret(2000, 3000, "rec", 2),
		a.ret(1000, 5000, "rec", 1),
		b.ret(500, 5500, "rec", 0),
		a.ret(0, 10000, "rec", 0),
	}
	p := NewProfile(&bytes.Buffer{})
	for _, r := range trace {
		p.Write(&r)
	}
	got := p.Stats()
	// Durations 1000, 4000, 5000, 10000; thread 1's outermost 10000 and
	// thread 2's 5000 make the time; self: 1000 + 3000 + 5000 + 6000.
	want := FuncStat{Func: "rec", Hits: 4, Calls: 4, Time: 15000, Self: 15000, Sum: 20000}
	if len(got) != 1 {
		t.Fatalf("got %+v", got)
	}
	got[0].Stddev = 0
	if got[0] != want {
		t.Errorf("got %+v, want %+v", got[0], want)
	}
	// Time/Hit, the columns agreeing (not the mean of the 4 durations,
	// 5000, which counts the inner calls' time again).
	if avg := got[0].Avg(); avg != 3750 || avg != int64(want.Time)/int64(want.Hits) {
		t.Errorf("average %d, want Time/Hit = 3750", avg)
	}
}

func TestProfile(t *testing.T) {
	const long = "main.(*Server).handleConnection.func1" // 37 bytes
	for _, c := range []struct {
		name    string
		records []Record
		want    []string // the lines, spelled out: they end in spaces
	}{{
		name:    "table",
		records: profileTrace,
		want: []string{
			"# tracer: profile",
			"  Function                               Hit    Time            Avg             Stddev          Self",
			"  --------                               ---    ----            ---             ------          ----",
			"  main                                     1    20.000 us       20.000 us       0.000 us        12.000 us   ",
			"  work                                     4    12.000 us       4.000 us        2.000 us        11.000 us   ",
			"  helper                                   1    1.000 us        1.000 us        0.000 us        1.000 us    ",
			"  jump                                     1    0.000 us        0.000 us        0.000 us        0.000 us    ",
			"# 1 return lost",
		},
	}, {
		// Equal times go by name; a name longer than 30 widens the
		// column. Stddev of 1 and 2 ns is 0.707 ns: rounded to 1.
		name: "long names and ties",
		records: []Record{
			loop.entry(0, "z", 0), loop.ret(0, 3, "z", 0),
			loop.entry(0, long, 0), loop.ret(0, 1, long, 0),
			loop.entry(0, long, 0), loop.ret(0, 2, long, 0),
		},
		want: []string{
			"# tracer: profile",
			"  Function                                      Hit    Time            Avg             Stddev          Self",
			"  --------                                      ---    ----            ---             ------          ----",
			"  main.(*Server).handleConnection.func1           2    0.003 us        0.001 us        0.001 us        0.003 us    ",
			"  z                                               1    0.003 us        0.003 us        0.000 us        0.003 us    ",
			"# 1 return lost",
		},
	}, {
		name: "long durations",
		records: []Record{
			loop.entry(0, "sleep", 0), loop.ret(0, 1234567890123, "sleep", 0),
		},
		want: []string{
			"# tracer: profile",
			"  Function                               Hit    Time            Avg             Stddev          Self",
			"  --------                               ---    ----            ---             ------          ----",
			"  sleep                                    1    1234567890 us     1234567890 us     0.000 us        1234567890 us ",
			"# 1 return lost",
		},
	}} {
		t.Run(c.name, func(t *testing.T) {
			var b bytes.Buffer
			p := NewProfile(&b)
			for _, r := range c.records {
				if err := p.Write(&r); err != nil {
					t.Fatal(err)
				}
			}
			// Comments wait for the table.
			p.Comment("1 return lost")
			p.Flush()
			if b.Len() != 0 {
				t.Errorf("wrote %q before Finish", b.String())
			}
			if err := p.Finish(); err != nil {
				t.Fatal(err)
			}
			if want := strings.Join(c.want, "\n") + "\n"; b.String() != want {
				t.Errorf("got\n%s\nwant\n%s", b.String(), want)
			}
		})
	}
}

func TestProfileCommentAfterFinish(t *testing.T) {
	var b bytes.Buffer
	p := NewProfile(&b)
	p.Finish()
	p.Comment("3 hits lost while detaching")
	p.Flush()
	want := `# tracer: profile
  Function                               Hit    Time            Avg             Stddev          Self
  --------                               ---    ----            ---             ------          ----
# 3 hits lost while detaching
`
	if b.String() != want {
		t.Errorf("got\n%s\nwant\n%s", b.String(), want)
	}
}
