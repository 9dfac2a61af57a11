package output

import (
	"bufio"
	"cmp"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"

	"github.com/probedbg/probe/probe"
)

// GraphOptions tune a function_graph trace; the zero value is the kernel's
// default.
type GraphOptions struct {
	// Threshold, in nanoseconds, is ftrace's tracing_thresh: when above 0,
	// only returns of calls that took at least this long are shown.
	Threshold int64
	// CPUWidth is the number of digits of the CPU column; 0 means 1.
	CPUWidth int
}

// Graph writes ftrace's function_graph trace with the funcgraph-proc
// column:
//
//	# CPU  TASK/PID         DURATION                  FUNCTION CALLS
//	 1)   loop-4242    |               |  main() {
//	 1)   loop-4242    |   0.820 us    |    work();
//	 1)   loop-4242    | + 12.300 us   |  }
type Graph struct {
	w      *bufio.Writer
	opts   GraphOptions
	header bool // written
	lanes  map[int64]*graphLane
	seq    uint64 // arrival order of held-back entries
	last   struct {
		printed   bool // a line was printed: the lane below is valid
		lane      int64
		comm      string
		tid       int
		goroutine int64
	}
	buf []byte // what one call writes
}

// graphLane is one call stack's state between records.
type graphLane struct {
	open int // calls entered and not yet returned or lost
	// pending is an entry held back until the lane's next record says
	// whether it returns at once (a leaf, "func();") or not ("func() {").
	pending    Record
	hasPending bool
	seq        uint64 // of pending
}

// NewGraph returns a function_graph writer; like Text, it writes its
// header with the first line.
func NewGraph(w io.Writer, opts GraphOptions) *Graph {
	opts.CPUWidth = max(opts.CPUWidth, 1)
	return &Graph{w: bufio.NewWriterSize(w, 64<<10), opts: opts, lanes: map[int64]*graphLane{}}
}

// noDuration marks a line whose duration column is blank; it is no
// duration a record can carry, not even a bad negative one.
const noDuration = math.MinInt64

func (g *Graph) Write(r *Record) error {
	g.buf = g.buf[:0]
	lane := g.lanes[r.Lane]
	if lane == nil {
		lane = &graphLane{}
		g.lanes[r.Lane] = lane
	}
	// Only the lane's own next record resolves its pending entry, as ftrace
	// peeks at the next event of the same CPU buffer only.
	if lane.hasPending {
		lane.hasPending = false
		p := &lane.pending
		if r.Kind == KindReturn && r.Func == p.Func && r.Depth == p.Depth {
			g.line(p, r.Time-r.EntryTime, p.Depth, p.Func, "();")
			return g.end(r, lane)
		}
		g.line(p, noDuration, p.Depth, p.Func, "() {")
	}
	switch r.Kind {
	case KindEntry:
		// In tracing_thresh mode the kernel records no entries at all.
		if g.opts.Threshold == 0 {
			lane.pending, lane.hasPending = *r, true
			lane.seq = g.seq
			g.seq++
		}
	case KindReturn:
		d := r.Time - r.EntryTime
		switch {
		case g.opts.Threshold == 0:
			g.line(r, d, r.Depth, "}")
		case d >= g.opts.Threshold:
			// No entry line says which call this closes: name it.
			g.line(r, d, r.Depth, "} /* ", r.Func, " */")
		}
	case KindLost:
		if g.opts.Threshold == 0 {
			g.line(r, noDuration, r.Depth, "} /* ", r.Func, ": return lost */")
		}
	case KindProbe:
		g.startLine(r, noDuration, lane.open)
		g.buf = fmt.Appendf(g.buf, "/* %s: (%s)", r.Event, r.Where)
		g.buf = probe.AppendFields(g.buf, r.Fields)
		g.buf = append(g.buf, " */\n"...)
		for _, f := range r.Stack { // a stacktrace action's frames, a comment each
			g.startLine(r, noDuration, lane.open)
			g.buf = fmt.Appendf(g.buf, "/* => %s */\n", f)
		}
	}
	return g.end(r, lane)
}

// end records how many calls r leaves open in its lane, forgets a lane
// with none (goroutines come and go), and writes what Write printed.
func (g *Graph) end(r *Record, lane *graphLane) error {
	switch r.Kind {
	case KindEntry:
		lane.open = r.Depth + 1
	case KindReturn, KindLost:
		lane.open = r.Depth
	}
	if lane.open == 0 && !lane.hasPending {
		delete(g.lanes, r.Lane)
	}
	return g.write()
}

func (g *Graph) write() error {
	if len(g.buf) == 0 {
		return nil
	}
	_, err := g.w.Write(g.buf)
	return err
}

// line appends one trace line for r's thread to g.buf: see startLine.
func (g *Graph) line(r *Record, d int64, depth int, text ...string) {
	g.startLine(r, d, depth)
	for _, s := range text {
		g.buf = append(g.buf, s...)
	}
	g.buf = append(g.buf, '\n')
}

// startLine appends the start of a line for r's thread to g.buf: the CPU
// and proc columns, the duration (d, or noDuration for a blank column) and
// 2 spaces of indentation per depth.
func (g *Graph) startLine(r *Record, d int64, depth int) {
	g.writeHeader()
	// A line of another lane than the last one is a context switch.
	if g.last.printed && g.last.lane != r.Lane {
		g.buf = append(g.buf, " ------------------------------------------\n"...)
		g.buf = g.appendCPU(g.buf, r.CPU)
		g.buf = appendProc(g.buf, g.last.comm, g.last.tid, g.last.goroutine)
		g.buf = append(g.buf, " => "...)
		g.buf = appendProc(g.buf, r.Comm, r.Tid, r.Goroutine)
		g.buf = append(g.buf, "\n ------------------------------------------\n\n"...)
	}
	g.last.printed, g.last.lane, g.last.comm, g.last.tid, g.last.goroutine = true, r.Lane, r.Comm, r.Tid, r.Goroutine

	g.buf = g.appendCPU(g.buf, r.CPU)
	g.buf = appendProc(g.buf, r.Comm, r.Tid, r.Goroutine)
	g.buf = append(g.buf, " | "...)
	if d == noDuration {
		g.buf = append(g.buf, "              |  "...)
	} else {
		g.buf = append(g.buf, durationMark(d), ' ')
		g.buf = appendDuration(g.buf, d)
		g.buf = append(g.buf, "|  "...)
	}
	g.buf = appendSpaces(g.buf, 2*depth)
}

func (g *Graph) appendCPU(dst []byte, cpu int) []byte {
	return append(appendIntRight(append(dst, ' '), int64(cpu), g.opts.CPUWidth), ") "...)
}

// appendProc appends the kernel's funcgraph-proc column: comm cut to 7
// bytes, then comm-tid centred in 14 characters. A Go call stack belongs
// to its goroutine, whichever thread runs it: comm-gID.
func appendProc(dst []byte, comm string, tid int, goroutine int64) []byte {
	comm = comm[:min(len(comm), 7)]
	pid := strconv.Itoa(tid)
	if goroutine != 0 {
		pid = "g" + strconv.FormatInt(goroutine, 10)
	}
	spaces := max(14-(len(comm)+1+len(pid)), 0)
	dst = appendSpaces(dst, spaces/2)
	dst = append(append(append(dst, comm...), '-'), pid...)
	return appendSpaces(dst, spaces-spaces/2)
}

func appendSpaces(dst []byte, n int) []byte {
	for range n {
		dst = append(dst, ' ')
	}
	return dst
}

func (g *Graph) writeHeader() {
	if !g.header {
		g.header = true
		g.buf = append(g.buf, "# tracer: function_graph\n"+
			"#\n"+
			"# CPU  TASK/PID         DURATION                  FUNCTION CALLS\n"+
			"# |     |    |           |   |                     |   |   |   |\n"...)
	}
}

func (g *Graph) Comment(s string) error {
	g.buf = g.buf[:0]
	g.writeHeader()
	g.buf = append(g.buf, "# "...)
	g.buf = append(g.buf, s...)
	g.buf = append(g.buf, '\n')
	return g.write()
}

// Flush writes out what is buffered but leaves pending entries pending:
// whether one is a leaf must not depend on when the event queue ran dry.
func (g *Graph) Flush() error {
	g.buf = g.buf[:0]
	g.writeHeader()
	if err := g.write(); err != nil {
		return err
	}
	return g.w.Flush()
}

// Finish prints the entries still waiting for their lane's next record as
// calls that had not returned when the trace ended, in the order they came.
func (g *Graph) Finish() error {
	var pending []*graphLane
	for _, lane := range g.lanes {
		if lane.hasPending {
			pending = append(pending, lane)
		}
	}
	slices.SortFunc(pending, func(a, b *graphLane) int { return cmp.Compare(a.seq, b.seq) })
	g.buf = g.buf[:0]
	for _, lane := range pending {
		lane.hasPending = false
		p := &lane.pending
		g.line(p, noDuration, p.Depth, p.Func, "() {")
	}
	if err := g.write(); err != nil {
		return err
	}
	return g.Flush()
}
