package output

import (
	"bufio"
	"io"
	"math"
	"strconv"

	"github.com/probedbg/probe/fetch"
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
	// queue holds the lines not yet written, in the order their records
	// came (the order of their stops): an entry waits there until its
	// lane's next record says whether it is a leaf, and the lines of
	// other lanes that came after it wait behind it, so that the trace
	// reads in time order as ftrace's merge of its buffers does.
	queue []*graphItem
	last  struct {
		printed   bool // a line was printed: the lane below is valid
		lane      int64
		comm      string
		tid       int
		goroutine int64
	}
	buf []byte // what one call writes
	// free holds the items written, for the next records: an item per
	// record on the heap cost a tenth of a µs a record in the GC.
	free []*graphItem
}

// newItem is an empty item, from g.free if it has one.
func (g *Graph) newItem() *graphItem {
	if n := len(g.free); n > 0 {
		it := g.free[n-1]
		g.free = g.free[:n-1]
		return it
	}
	return &graphItem{}
}

// graphItem is one record's line (or lines) to come.
type graphItem struct {
	comment string // a note, in its place among the lines; else rec's
	rec     Record
	depth   int // the probe comment's indentation: its lane's calls open
	// For an entry, until resolved: whether it is a leaf, and the
	// duration if it is.
	resolved bool
	leaf     bool
	d        int64
	result   []fetch.Field // a leaf's: its return's fields
}

// maxHeld bounds the queue: past it, the oldest entry is taken for a call
// that does not return at once ("func() {"), as ftrace does when the next
// event is not in its peek.
const maxHeld = 1 << 14

// graphLane is one call stack's state between records.
type graphLane struct {
	open    int        // calls entered and not yet returned or lost
	pending *graphItem // an entry whose lane has had no record since
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
	lane := g.lanes[r.Lane]
	if lane == nil {
		lane = &graphLane{}
		g.lanes[r.Lane] = lane
	}
	// Only the lane's own next record resolves its pending entry, as ftrace
	// peeks at the next event of the same CPU buffer only.
	if p := lane.pending; p != nil {
		lane.pending, p.resolved = nil, true
		if r.Kind == KindReturn && r.Func == p.rec.Func && r.Depth == p.rec.Depth {
			p.leaf, p.d, p.result = true, r.Time-r.EntryTime, r.Fields
			g.account(r, lane)
			return g.drain(false)
		}
	}
	it := g.newItem()
	it.rec, it.depth, it.resolved = *r, lane.open, r.Kind != KindEntry
	switch {
	case r.Kind == KindEntry && g.opts.Threshold > 0:
		// In tracing_thresh mode the kernel records no entries at all.
		it = nil
	case r.Kind == KindEntry:
		lane.pending = it
	case r.Kind == KindReturn && g.opts.Threshold > 0 && r.Time-r.EntryTime < g.opts.Threshold,
		r.Kind == KindLost && g.opts.Threshold > 0:
		it = nil
	}
	if it != nil {
		g.queue = append(g.queue, it)
	}
	g.account(r, lane)
	return g.drain(false)
}

// account records how many calls r leaves open in its lane, and forgets a
// lane with none (goroutines come and go).
func (g *Graph) account(r *Record, lane *graphLane) {
	switch r.Kind {
	case KindEntry:
		lane.open = r.Depth + 1
	case KindReturn, KindLost:
		lane.open = r.Depth
	}
	if lane.open == 0 && lane.pending == nil {
		delete(g.lanes, r.Lane)
	}
}

// drain writes the queued lines up to the first entry not yet resolved;
// with all, or past maxHeld, it takes such entries for calls that do not
// return at once.
func (g *Graph) drain(all bool) error {
	g.buf = g.buf[:0]
	n := 0
	for ; n < len(g.queue); n++ {
		it := g.queue[n]
		if !it.resolved {
			if !all && len(g.queue)-n <= maxHeld {
				break
			}
			it.resolved = true
			if l := g.lanes[it.rec.Lane]; l != nil && l.pending == it {
				l.pending = nil
			}
		}
		g.render(it)
		*it = graphItem{}
		g.free = append(g.free, it)
	}
	g.queue = g.queue[:copy(g.queue, g.queue[n:])]
	return g.write()
}

// render appends an item's lines to g.buf.
func (g *Graph) render(it *graphItem) {
	if it.comment != "" {
		g.writeHeader()
		g.buf = append(append(append(g.buf, "# "...), it.comment...), '\n')
		return
	}
	r := &it.rec
	switch r.Kind {
	case KindEntry:
		var d int64 = noDuration
		if it.leaf {
			d = it.d
		}
		g.startLine(r, d, r.Depth)
		g.buf = append(g.buf, r.Func...)
		if r.Fields == nil {
			g.buf = append(g.buf, "()"...)
		}
		g.buf = appendArgs(g.buf, r.Fields)
		if it.leaf {
			// As ftrace's funcgraph-retval: "func(); /* = 0x0 */".
			g.buf = append(g.buf, ';')
			g.buf = appendResult(g.buf, " /* = ", it.result, " */")
		} else {
			g.buf = append(g.buf, " {"...)
		}
		g.buf = append(g.buf, '\n')
	case KindReturn:
		g.startLine(r, r.Time-r.EntryTime, r.Depth)
		g.buf = append(g.buf, '}')
		if g.opts.Threshold == 0 && len(r.Fields) == 0 {
			g.buf = append(g.buf, '\n')
			break
		}
		// No entry line says which call this closes (tracing_thresh), or
		// the result goes with its name: "} /* func = 0x0 */".
		g.buf = append(append(g.buf, " /* "...), r.Func...)
		g.buf = appendResult(g.buf, " = ", r.Fields, "")
		g.buf = append(g.buf, " */\n"...)
	case KindLost:
		g.line(r, noDuration, r.Depth, "} /* ", r.Func, ": return lost */")
	case KindProbe:
		g.startLine(r, noDuration, it.depth)
		g.buf = append(append(append(append(g.buf, "/* "...), r.Event...), ": ("...), r.Where...)
		g.buf = append(g.buf, ')')
		g.buf = fetch.AppendFields(g.buf, r.Fields)
		g.buf = append(g.buf, " */\n"...)
		for _, f := range r.Stack { // a stacktrace action's frames, a comment each
			g.startLine(r, noDuration, it.depth)
			g.buf = append(append(append(g.buf, "/* => "...), f...), " */\n"...)
		}
	}
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
	g.queue = append(g.queue, &graphItem{comment: s, resolved: true})
	return g.drain(false)
}

// Flush writes out what is buffered but leaves pending entries pending
// (and what came after them): whether one is a leaf must not depend on
// when the event queue ran dry.
func (g *Graph) Flush() error {
	g.buf = g.buf[:0]
	g.writeHeader()
	if err := g.write(); err != nil {
		return err
	}
	return g.w.Flush()
}

// Finish prints the entries still waiting for their lane's next record as
// calls that had not returned when the trace ended, each in its place.
func (g *Graph) Finish() error {
	if err := g.drain(true); err != nil {
		return err
	}
	return g.Flush()
}

// appendArgs appends a call's parameters as "(a=1, b=0x7ffd...)" (uftrace's
// and ftrace's funcgraph-args form), nothing without --args.
func appendArgs(dst []byte, fields []fetch.Field) []byte {
	if fields == nil {
		return dst
	}
	dst = append(dst, '(')
	for i := range fields {
		if i > 0 {
			dst = append(dst, ", "...)
		}
		dst = append(append(dst, fields[i].Name...), '=')
		dst = fields[i].Value.AppendText(dst)
	}
	return append(dst, ')')
}

// appendResult appends a return's value between before and after, or
// nothing when it has none.
func appendResult(dst []byte, before string, fields []fetch.Field, after string) []byte {
	if len(fields) == 0 {
		return dst
	}
	dst = append(dst, before...)
	dst = fields[0].Value.AppendText(dst)
	return append(dst, after...)
}
