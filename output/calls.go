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
	w       *bufio.Writer
	summary bool
	open    map[int64][]*callOpen // per lane, the calls not returned
	stats   map[string]*callStat
	notes   []string
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

// NewCalls returns the writer; summary: the -c table only.
func NewCalls(w io.Writer, summary bool) *Calls {
	return &Calls{w: bufio.NewWriterSize(w, 64<<10), summary: summary, open: map[int64][]*callOpen{}, stats: map[string]*callStat{}}
}

// callColumn is where " = result" goes, as ltrace aligns it.
const callColumn = 40

func (c *Calls) Write(r *Record) error {
	switch r.Kind {
	case KindEntry:
		stack := c.open[r.Lane]
		if len(stack) > 0 && !c.summary {
			// A call inside a call: the outer one's line is cut here.
			if top := stack[len(stack)-1]; !top.printed {
				top.printed = true
				c.line(&top.rec, " <unfinished ...>\n")
			}
		}
		c.open[r.Lane] = append(stack, &callOpen{rec: *r})
	case KindReturn, KindLost:
		stack := c.open[r.Lane]
		if len(stack) == 0 {
			return nil // entered before the trace began
		}
		call := stack[len(stack)-1]
		c.open[r.Lane] = stack[:len(stack)-1]
		failed := len(r.Fields) > 1 && r.Fields[1].Name == "errno"
		if r.Kind == KindReturn { // (a call that never returned, __libc_start_main's: not in the table, as ltrace -c)
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
		if c.summary {
			return nil
		}
		// ltrace's line: the call, then at column callColumn its result.
		b := append(c.buf[:0], "[pid "...)
		b = strconv.AppendInt(b, int64(r.Tid), 10)
		if call.printed {
			b = append(append(append(b, "] <... "...), r.Func...), " resumed> "...)
		} else {
			b = append(append(append(b, "] "...), r.Func...), '(')
			b = append(appendCallArgs(b, call.rec.Fields), ") "...)
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
			b = r.Fields[0].Value.AppendText(b)
		}
		if failed && r.Kind != KindLost {
			// As strace shows a failed call: -1 ENOENT (No such file or directory).
			name := r.Fields[1].Value.String()
			b = append(append(b, ' '), name...)
			if text := fetch.ErrnoText(name); text != "" {
				b = append(append(append(b, " ("...), text...), ')')
			}
		}
		c.buf = append(b, '\n')
		c.w.Write(c.buf)
	}
	return nil
}

// line writes the start of call's line, "[pid N] func(args", and end.
func (c *Calls) line(call *Record, end string) {
	b := append(c.buf[:0], "[pid "...)
	b = strconv.AppendInt(b, int64(call.Tid), 10)
	b = append(append(append(b, "] "...), call.Func...), '(')
	c.buf = append(appendCallArgs(b, call.Fields), end...)
	c.w.Write(c.buf)
}

// appendCallArgs appends the arguments as ltrace shows them: values only.
func appendCallArgs(b []byte, fields []fetch.Field) []byte {
	for i, f := range fields {
		if i > 0 {
			b = append(b, ", "...)
		}
		b = f.Value.AppendText(b)
	}
	return b
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
		for _, call := range c.open[lane] {
			if !c.summary && !call.printed {
				c.line(&call.rec, " <no return ...>\n")
			}
		}
	}
	c.open = map[int64][]*callOpen{}
	if c.summary {
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
