package output

import (
	"bytes"
	"strings"
	"testing"

	"github.com/probedbg/probe/fetch"
)

const graphHeader = `# tracer: function_graph
#
# CPU  TASK/PID         DURATION                  FUNCTION CALLS
# |     |    |           |   |                     |   |   |   |
`

var (
	loop  = thread{lane: 4242, tid: 4242, cpu: 1, comm: "loop"}
	loop2 = thread{lane: 4243, tid: 4243, cpu: 2, comm: "loop"}
	// Two goroutines that ran on loop's thread.
	g1 = thread{lane: 1, tid: 4242, cpu: 1, comm: "loop"}
	g2 = thread{lane: 2, tid: 4242, cpu: 1, comm: "loop"}
)

// TestGraph: whole traces, every line worked out by hand from
// kernel/trace/trace_functions_graph.c.
func TestGraph(t *testing.T) {
	for _, c := range []struct {
		name    string
		opts    GraphOptions
		records []Record
		want    string // after the header
	}{{
		name: "nested call and leaf",
		records: []Record{
			loop.entry(1000, "main", 0),
			loop.entry(2000, "work", 1),
			loop.ret(2000, 2820, "work", 1),
			loop.ret(1000, 13300, "main", 0),
		},
		want: `
 1)   loop-4242    |               |  main() {
 1)   loop-4242    |   0.820 us    |    work();
 1)   loop-4242    | + 12.300 us   |  }
`,
	}, {
		name: "durations and marks",
		records: []Record{
			loop.entry(0, "f", 0), loop.ret(0, 0, "f", 0),
			loop.entry(0, "f", 0), loop.ret(0, 999, "f", 0),
			loop.entry(0, "f", 0), loop.ret(0, 1000, "f", 0),
			loop.entry(0, "f", 0), loop.ret(0, 10001, "f", 0),
			loop.entry(0, "f", 0), loop.ret(0, 123456789, "f", 0),
			loop.entry(0, "f", 0), loop.ret(0, 1234567890123, "f", 0),
		},
		want: `
 1)   loop-4242    |   0.000 us    |  f();
 1)   loop-4242    |   0.999 us    |  f();
 1)   loop-4242    |   1.000 us    |  f();
 1)   loop-4242    | + 10.001 us   |  f();
 1)   loop-4242    | @ 123456.7 us |  f();
 1)   loop-4242    | $ 1234567890 us |  f();
`,
	}, {
		name: "recursion: only the innermost call is a leaf",
		records: []Record{
			loop.entry(0, "f", 0),
			loop.entry(100, "f", 1),
			loop.ret(100, 200, "f", 1),
			loop.ret(0, 1100, "f", 0),
		},
		want: `
 1)   loop-4242    |               |  f() {
 1)   loop-4242    |   0.100 us    |    f();
 1)   loop-4242    |   1.100 us    |  }
`,
	}, {
		name: "lost return",
		records: []Record{
			loop.entry(0, "main", 0),
			loop.entry(100, "jump", 1),
			loop.lost(200, "jump", 1),
			loop.ret(0, 5000, "main", 0),
		},
		want: `
 1)   loop-4242    |               |  main() {
 1)   loop-4242    |               |    jump() {
 1)   loop-4242    |               |    } /* jump: return lost */
 1)   loop-4242    |   5.000 us    |  }
`,
	}, {
		name: "probes are comments at the lane's depth",
		records: []Record{
			loop.probe(0, "p_main_0", "main+0x0/0x20"),
			loop.entry(100, "main", 0),
			loop.probe(200, "p_main_4", "main+0x4/0x20", fetch.Field{Name: "x", Value: fetch.UintValue(fetch.TypeX64, 5)}),
			loop.entry(300, "work", 1),
			loop.probe(400, "p_work_0", "work+0x0/0x12", fetch.Field{Name: "s", Value: fetch.StringValue("hi")}),
			loop.ret(300, 500, "work", 1),
			loop.ret(100, 600, "main", 0),
		},
		want: `
 1)   loop-4242    |               |  /* p_main_0: (main+0x0/0x20) */
 1)   loop-4242    |               |  main() {
 1)   loop-4242    |               |    /* p_main_4: (main+0x4/0x20) x=0x5 */
 1)   loop-4242    |               |    work() {
 1)   loop-4242    |               |      /* p_work_0: (work+0x0/0x12) s="hi" */
 1)   loop-4242    |   0.200 us    |    }
 1)   loop-4242    |   0.500 us    |  }
`,
	}, {
		// A pending entry waits for its own lane: main on loop2 is still a
		// leaf though loop's lines come between, and the lines are printed
		// in the order they are resolved.
		name: "threads",
		records: []Record{
			loop.entry(0, "main", 0),
			loop2.entry(10, "main", 0),
			loop.entry(20, "work", 1),
			loop.ret(20, 30, "work", 1),
			loop2.ret(10, 40, "main", 0),
			loop.ret(0, 50, "main", 0),
		},
		// In time order: loop-4243's main came before loop-4242's work,
		// and waits behind nothing once it is known for a leaf.
		want: `
 1)   loop-4242    |               |  main() {
 ------------------------------------------
 2)   loop-4242    =>   loop-4243   
 ------------------------------------------

 2)   loop-4243    |   0.030 us    |  main();
 ------------------------------------------
 1)   loop-4243    =>   loop-4242   
 ------------------------------------------

 1)   loop-4242    |   0.010 us    |    work();
 1)   loop-4242    |   0.050 us    |  }
`,
	}, {
		name: "goroutines on one thread are lanes of their own",
		records: []Record{
			g1.entry(0, "main.work", 0),
			g2.entry(10, "main.work", 0),
			g2.ret(10, 20, "main.work", 0),
			g1.ret(0, 30, "main.work", 0),
		},
		// In time order: g1's call began first, though it ended last.
		want: `
 1)   loop-4242    |   0.030 us    |  main.work();
 ------------------------------------------
 1)   loop-4242    =>   loop-4242   
 ------------------------------------------

 1)   loop-4242    |   0.010 us    |  main.work();
`,
	}, {
		name: "threshold",
		opts: GraphOptions{Threshold: 1000},
		records: []Record{
			loop.entry(0, "main", 0),
			loop.entry(100, "work", 1),
			loop.ret(100, 1099, "work", 1), // 999 ns: too short
			loop.entry(2000, "work", 1),
			loop.ret(2000, 3000, "work", 1),
			loop.entry(4000, "jump", 1),
			loop.lost(5000, "jump", 1),
			loop.probe(6000, "p_main_4", "main+0x4/0x20"),
			loop.ret(0, 12300, "main", 0),
		},
		want: `
 1)   loop-4242    |   1.000 us    |    } /* work */
 1)   loop-4242    |               |    /* p_main_4: (main+0x4/0x20) */
 1)   loop-4242    | + 12.300 us   |  } /* main */
`,
	}, {
		name: "CPU width",
		opts: GraphOptions{CPUWidth: 3},
		records: []Record{
			{Kind: KindEntry, CPU: 12, Tid: 7, Lane: 7, Comm: "a-very-long-name", Func: "f"},
			{Kind: KindReturn, Time: 1000, CPU: 12, Tid: 7, Lane: 7, Comm: "a-very-long-name", Func: "f"},
		},
		want: `
  12)   a-very--7    |   1.000 us    |  f();
`,
	}, {
		// Finish shows calls still open at the end in the order they began.
		name: "finish",
		records: []Record{
			{Kind: KindEntry, CPU: 1, Tid: 3, Lane: 3, Comm: "c", Func: "three"},
			{Kind: KindEntry, CPU: 1, Tid: 1, Lane: 1, Comm: "c", Func: "one"},
			{Kind: KindEntry, CPU: 1, Tid: 2, Lane: 2, Comm: "c", Func: "two"},
		},
		want: `
 1)      c-3       |               |  three() {
 ------------------------------------------
 1)      c-3       =>      c-1      
 ------------------------------------------

 1)      c-1       |               |  one() {
 ------------------------------------------
 1)      c-1       =>      c-2      
 ------------------------------------------

 1)      c-2       |               |  two() {
`,
	}} {
		t.Run(c.name, func(t *testing.T) {
			var b bytes.Buffer
			g := NewGraph(&b, c.opts)
			for _, r := range c.records {
				if err := g.Write(&r); err != nil {
					t.Fatal(err)
				}
			}
			if err := g.Finish(); err != nil {
				t.Fatal(err)
			}
			if want := graphHeader + strings.TrimPrefix(c.want, "\n"); b.String() != want {
				t.Errorf("got\n%s\nwant\n%s", b.String(), want)
			}
		})
	}
}

// TestGraphFlushKeepsPending: a Flush between an entry and its return
// (the queue ran dry) must not turn a leaf into "f() {".
func TestGraphFlushKeepsPending(t *testing.T) {
	var b bytes.Buffer
	g := NewGraph(&b, GraphOptions{})
	e, r := loop.entry(0, "f", 0), loop.ret(0, 1000, "f", 0)
	g.Write(&e)
	g.Flush()
	if b.String() != graphHeader {
		t.Errorf("after the entry and a flush: got\n%s\nwant the header only", b.String())
	}
	g.Write(&r)
	g.Flush()
	want := graphHeader + " 1)   loop-4242    |   1.000 us    |  f();\n"
	if b.String() != want {
		t.Errorf("got\n%s\nwant\n%s", b.String(), want)
	}
}

func TestGraphComment(t *testing.T) {
	var b bytes.Buffer
	g := NewGraph(&b, GraphOptions{})
	g.Comment("2 returns lost")
	e := loop.entry(0, "f", 0)
	g.Write(&e)
	g.Finish()
	g.Comment("3 hits lost while detaching")
	g.Flush()
	want := graphHeader + `# 2 returns lost
 1)   loop-4242    |               |  f() {
# 3 hits lost while detaching
`
	if b.String() != want {
		t.Errorf("got\n%s\nwant\n%s", b.String(), want)
	}
}

func TestGraphEmpty(t *testing.T) {
	var b bytes.Buffer
	g := NewGraph(&b, GraphOptions{})
	if b.Len() != 0 {
		t.Errorf("wrote %q before any event", b.String())
	}
	g.Finish()
	if b.String() != graphHeader {
		t.Errorf("got\n%s\nwant the header only", b.String())
	}
}

// TestProcColumn: comm cut to 7 bytes, comm-tid centred in 14, the odd
// space after.
func TestProcColumn(t *testing.T) {
	for _, c := range []struct {
		comm string
		tid  int
		want string
	}{
		{"loop", 4242, "  loop-4242   "},
		{"sh", 1, "     sh-1     "},
		{"loop", 42, "   loop-42    "},
		{"a-very-long-name", 7, "  a-very--7   "},
		{"loop", 1234567890, "loop-1234567890"},
		{"", 5, "      -5      "},
	} {
		if got := string(appendProc(nil, c.comm, c.tid, 0)); got != c.want {
			t.Errorf("appendProc(%q, %d) = %q, want %q", c.comm, c.tid, got, c.want)
		}
	}
}

// A Go call stack is a goroutine's: the column names it, not the thread.
func TestProcColumnGoroutine(t *testing.T) {
	if got, want := string(appendProc(nil, "server", 4242, 17)), "  server-g17  "; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}
