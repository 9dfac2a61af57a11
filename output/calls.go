package output

import (
	"bufio"
	"cmp"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/probedbg/probe/fetch"
)

// Calls writes a program's library calls as ltrace does, a line per call
// at its return, arguments and result as --args fetch them:
//
//	[pid 4242] malloc(272)                              = 0x55d1c2e8b2a0
//	[pid 4242] open("/etc/hosts", O_RDONLY, 0)          = 3
//
// A call that another starts inside of (a callback) is cut, as ltrace
// cuts it: "func(args <unfinished ...>", then "<... func resumed> = r".
// With Summary, only ltrace -c's table at the end: per function its
// share of the time, calls, time per call and errors (the calls whose
// result the prototype table says is a failure: those with an errno).
type Calls struct {
	w     *bufio.Writer
	opts  CallsOptions
	last  int64                 // -r: the time of the last line, 0 before the first
	open  map[int64][]*callOpen // per lane, the calls not returned
	stats map[string]*callStat
	notes []string
	// finished: the calls and the table are out; notes go straight after
	finished bool
	buf      []byte // the line being built, reused
}

type callOpen struct {
	rec     Record
	printed bool // its "<unfinished ...>" line is out
}

type callStat struct {
	calls, errors int64
	ns            int64
}

// CallsOptions are ltrace's options for its lines.
type CallsOptions struct {
	Summary bool // -c: the table only
	// Stamp, as ltrace -t, -tt, -ttt: 1 the time of day a line begins
	// at, 2 with microseconds, 3 seconds since the epoch with
	// microseconds. A call's line begins at its entry, a resumed one's
	// at its return.
	Stamp int
	// Relative (-r): the time since the last line began.
	Relative bool
	// Durations (-T): the time spent in each call, after its result.
	Durations bool
	// WallOffset turns the records' CLOCK_MONOTONIC times into Unix
	// times (Stamp).
	WallOffset int64
	// Indent (-n): spaces before a call for each call it is inside.
	Indent int
	// StringLen (-s), if not 0: the most bytes of a string shown, a
	// longer one cut and followed by "...", as ltrace's.
	StringLen int
}

// NewCalls returns the writer.
func NewCalls(w io.Writer, o CallsOptions) *Calls {
	return &Calls{w: bufio.NewWriterSize(w, 64<<10), opts: o, open: map[int64][]*callOpen{}, stats: map[string]*callStat{}}
}

// begin appends the start of a line that begins at time at, of a call
// depth calls deep, as ltrace does: "[pid N] ", -r's and -t's times,
// -n's indent.
func (c *Calls) begin(b []byte, tid int, at int64, depth int) []byte {
	b = append(b, "[pid "...)
	b = strconv.AppendInt(b, int64(tid), 10)
	b = append(b, "] "...)
	if c.opts.Relative {
		d := int64(0)
		if c.last != 0 {
			d = max(0, at-c.last) // (lines come at returns: another thread's may have begun later)
		}
		c.last = at
		b = appendMicros(b, d, 3)
		b = append(b, ' ')
	}
	if c.opts.Stamp > 0 {
		wall := time.Unix(0, at+c.opts.WallOffset)
		switch c.opts.Stamp {
		case 1:
			b = wall.AppendFormat(b, "15:04:05")
		case 2:
			b = wall.AppendFormat(b, "15:04:05.000000")
		default:
			b = appendMicros(b, wall.UnixNano(), 0)
		}
		b = append(b, ' ')
	}
	for range c.opts.Indent * depth {
		b = append(b, ' ')
	}
	return b
}

// appendMicros appends ns as seconds with microseconds, as ltrace's
// "%lu.%06d" (width: the seconds' at least, space-padded).
func appendMicros(b []byte, ns int64, width int) []byte {
	us := ns / 1000
	var digits [20]byte // (no allocation: a line's times)
	sec := strconv.AppendInt(digits[:0], us/1e6, 10)
	for n := len(sec); n < width; n++ {
		b = append(b, ' ')
	}
	b = append(append(b, sec...), '.')
	frac := strconv.AppendInt(digits[:0], 1e6+us%1e6, 10) // 1 and six digits
	return append(b, frac[1:]...)
}

// callColumn is where " = result" goes, as ltrace aligns it.
const callColumn = 40

func (c *Calls) Write(r *Record) error {
	switch r.Kind {
	case KindEntry:
		stack := c.open[r.Lane]
		if len(stack) > 0 && !c.opts.Summary {
			// A call inside a call: the outer one's line is cut here.
			if top := stack[len(stack)-1]; !top.printed {
				top.printed = true
				c.line(&top.rec, len(stack)-1, " <unfinished ...>\n")
			}
		}
		c.open[r.Lane] = append(stack, &callOpen{rec: *r})
	case KindReturn, KindLost:
		stack := c.open[r.Lane]
		failed := len(r.Fields) > 1 && r.Fields[1].Name == "errno"
		var call *callOpen
		switch {
		case len(stack) > 0:
			call = stack[len(stack)-1]
			c.open[r.Lane] = stack[:len(stack)-1]
		case r.Kind == KindReturn && !c.opts.Summary:
			// A return with no call in its lane: a fork child's from
			// fork, the call its parent's (the tracer copied it with
			// the stack), as ltrace's "<... fork resumed> = 0".
			call = &callOpen{rec: Record{Time: r.EntryTime}, printed: true}
		default:
			return nil
		}
		if r.Kind == KindReturn && len(stack) > 0 { // (a call that never returned, __libc_start_main's: not in the table, as ltrace -c)
			st := c.stats[r.Func]
			if st == nil {
				st = &callStat{}
				c.stats[r.Func] = st
			}
			st.calls++
			st.ns += r.Time - call.rec.Time
			if failed {
				st.errors++
			}
		}
		if c.opts.Summary {
			return nil
		}
		// ltrace's line: the call, then at column callColumn its result.
		var b []byte
		if call.printed {
			b = c.begin(c.buf[:0], r.Tid, r.Time, len(c.open[r.Lane]))
			b = append(append(append(b, "<... "...), r.Func...), " resumed> "...)
		} else {
			b = c.begin(c.buf[:0], r.Tid, call.rec.Time, len(c.open[r.Lane]))
			b = append(append(b, r.Func...), '(')
			b = append(c.appendArgs(b, call.rec.Fields, filled(r.Fields)), ") "...)
		}
		for n := utf8.RuneCount(b); n < callColumn; n++ { // (as fmt's %-40s: runes)
			b = append(b, ' ')
		}
		b = append(b, "= "...)
		switch {
		case r.Kind == KindLost:
			b = append(b, "<no return ...>"...)
		case len(r.Fields) == 0:
			b = append(b, "<void>"...)
		default:
			b = c.appendValue(b, r.Fields[0].Value)
		}
		if failed && r.Kind != KindLost {
			// As strace shows a failed call: -1 ENOENT (No such file or directory).
			name := r.Fields[1].Value.String()
			b = append(append(b, ' '), name...)
			if text := fetch.ErrnoText(name); text != "" {
				b = append(append(append(b, " ("...), text...), ')')
			}
		}
		if c.opts.Durations && r.Kind == KindReturn {
			b = append(appendMicros(append(b, " <"...), r.Time-call.rec.Time, 0), '>')
		}
		c.buf = append(b, '\n')
		c.w.Write(c.buf)
	}
	return nil
}

// line writes the start of call's line, "[pid N] func(args", and end;
// depth calls are open around it.
func (c *Calls) line(call *Record, depth int, end string) {
	b := c.begin(c.buf[:0], call.Tid, call.Time, depth)
	b = append(append(b, call.Func...), '(')
	c.buf = append(c.appendArgs(b, call.Fields, nil), end...)
	c.w.Write(c.buf)
}

// filled is what a return says of the buffers its call filled: its
// fields after the result and errno (read's "buf").
func filled(ret []fetch.Field) []fetch.Field {
	if len(ret) > 1 && ret[1].Name == "errno" {
		return ret[2:]
	}
	if len(ret) > 0 {
		return ret[1:]
	}
	return nil
}

// appendArgs appends the arguments as ltrace shows them: values only, a
// buffer the call filled as it filled it (an argument of its name in
// out).
func (c *Calls) appendArgs(b []byte, fields, out []fetch.Field) []byte {
	for i, f := range fields {
		if i > 0 {
			b = append(b, ", "...)
		}
		v := f.Value
		for _, o := range out {
			if o.Name == f.Name {
				v = o.Value
			}
		}
		b = c.appendValue(b, v)
	}
	return b
}

// appendValue appends v, a string cut to StringLen bytes.
func (c *Calls) appendValue(b []byte, v fetch.Value) []byte {
	if s := v.Str(); c.opts.StringLen > 0 && v.Type() == fetch.TypeString && len(s) > c.opts.StringLen {
		return append(fetch.StringValue(s[:c.opts.StringLen]).AppendText(b), "..."...)
	}
	return v.AppendText(b)
}

func (c *Calls) Comment(s string) error {
	if c.finished {
		// (The tracer's notes come after the trace's end.)
		_, err := fmt.Fprintf(c.w, "# %s\n", s)
		return err
	}
	c.notes = append(c.notes, s)
	return nil
}

func (c *Calls) Flush() error { return c.w.Flush() }

// Finish writes the calls that never returned, the -c table, the notes.
func (c *Calls) Finish() error {
	c.finished = true
	for _, lane := range slices.Sorted(maps.Keys(c.open)) {
		for depth, call := range c.open[lane] {
			if !c.opts.Summary && !call.printed {
				c.line(&call.rec, depth, " <no return ...>\n")
			}
		}
	}
	c.open = map[int64][]*callOpen{}
	if c.opts.Summary {
		c.table()
	}
	for _, n := range c.notes {
		fmt.Fprintf(c.w, "# %s\n", n)
	}
	c.notes = nil
	return c.w.Flush()
}

// table is ltrace -c's: by time, most first.
func (c *Calls) table() {
	names := slices.Collect(maps.Keys(c.stats))
	var total callStat
	for _, st := range c.stats {
		total.calls, total.errors, total.ns = total.calls+st.calls, total.errors+st.errors, total.ns+st.ns
	}
	slices.SortFunc(names, func(a, b string) int {
		if c := cmp.Compare(c.stats[b].ns, c.stats[a].ns); c != 0 {
			return c
		}
		return strings.Compare(a, b)
	})
	const rule = "------ ----------- ----------- --------- --------- --------------------\n"
	c.w.WriteString("% time     seconds  usecs/call     calls    errors function\n" + rule)
	for _, n := range names {
		st := c.stats[n]
		share := 0.0
		if total.ns > 0 {
			share = 100 * float64(st.ns) / float64(total.ns)
		}
		fmt.Fprintf(c.w, "%6.2f %11.6f %11d %9d %9d %s\n", share, float64(st.ns)/1e9, st.ns/1000/max(st.calls, 1), st.calls, st.errors, n)
	}
	c.w.WriteString(rule)
	fmt.Fprintf(c.w, "100.00 %11.6f %11s %9d %9d total\n", float64(total.ns)/1e9, "", total.calls, total.errors)
}
