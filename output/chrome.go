package output

import (
	"bufio"
	"encoding/json"
	"io"
	"maps"
	"slices"
	"strconv"
)

// Chrome writes the Chrome trace-event format (JSON object form), which
// Perfetto UI and chrome://tracing open. Each call stack is a thread
// track; a traced call is a complete event ("X") written when it returns,
// a probe hit an instant event ("i") with its fields as args. Calls still
// open when the trace ends, and frames lost to longjmp or an exception,
// are closed at the last time seen, so every track nests.
type Chrome struct {
	w        *bufio.Writer
	calls    bool // entries are calls that return (function_graph), not instants (function)
	started  bool
	n        int                   // events written
	lanes    map[int64]*chromeLane // by Record.Lane
	tracks   map[chromeTrack]bool  // named
	last     int64                 // latest time seen, ns
	comments []string
	finished bool
	closed   bool
	err      error
}

type chromeTrack struct{ pid, tid int }

type chromeLane struct {
	chromeTrack
	open []chromeCall // by depth
}

type chromeCall struct {
	fn    string
	start int64
	args  map[string]any // --args: its parameters
}

// chromeEvent is one trace event; ts and dur are microseconds.
type chromeEvent struct {
	Name  string         `json:"name"`
	Cat   string         `json:"cat,omitempty"`
	Ph    string         `json:"ph"`
	Ts    float64        `json:"ts"`
	Dur   *float64       `json:"dur,omitempty"`
	Pid   int            `json:"pid"`
	Tid   int            `json:"tid"`
	Scope string         `json:"s,omitempty"`
	Args  map[string]any `json:"args,omitempty"`
}

// NewChrome returns a Chrome trace writer; calls says that function entries
// will be followed by their returns (function_graph), so that they are
// drawn as calls rather than as instants (the function tracer).
func NewChrome(w io.Writer, calls bool) *Chrome {
	return &Chrome{w: bufio.NewWriterSize(w, 64<<10), calls: calls, lanes: map[int64]*chromeLane{}, tracks: map[chromeTrack]bool{}}
}

func micros(ns int64) float64 { return float64(ns) / 1e3 }

// track returns the thread track of r, naming it when first seen: a
// thread is its tid, a Go goroutine gets a track of its own beyond any
// tid.
func (c *Chrome) track(r *Record) chromeTrack {
	k := chromeTrack{pid: r.Pid, tid: r.Tid}
	name := r.Comm + "-" + strconv.Itoa(r.Tid)
	if r.Goroutine != 0 {
		k.tid = goroutineTrack + int(r.Goroutine)
		name = r.Comm + "-g" + strconv.FormatInt(r.Goroutine, 10)
	}
	if !c.tracks[k] {
		c.tracks[k] = true
		c.emit(&chromeEvent{Name: "thread_name", Ph: "M", Pid: k.pid, Tid: k.tid, Args: map[string]any{"name": name}})
	}
	return k
}

// lane returns the open calls of r's call stack.
func (c *Chrome) lane(r *Record, k chromeTrack) *chromeLane {
	l := c.lanes[r.Lane]
	if l == nil {
		l = &chromeLane{chromeTrack: k}
		c.lanes[r.Lane] = l
	}
	return l
}

// goroutineTrack puts goroutine tracks above any Linux tid (at most 2^22).
const goroutineTrack = 1 << 30

func (c *Chrome) Write(r *Record) error {
	c.last = max(c.last, r.Time)
	k := c.track(r)
	switch r.Kind {
	case KindProbe:
		l := k
		args := fieldMap(r.Fields)
		if args == nil {
			args = map[string]any{}
		}
		args["location"] = r.Where
		if len(r.Stack) > 0 {
			args["stack"] = r.Stack
		}
		c.emit(&chromeEvent{Name: r.Event, Cat: "probe", Ph: "i", Scope: "t", Ts: micros(r.Time), Pid: l.pid, Tid: l.tid, Args: args})
	case KindEntry:
		l := c.lane(r, k)
		if !c.calls {
			args := map[string]any{}
			if r.Caller != "" {
				args["caller"] = r.Caller
			}
			maps.Copy(args, fieldMap(r.Fields))
			c.emit(&chromeEvent{Name: r.Func, Cat: "function", Ph: "i", Scope: "t", Ts: micros(r.Time), Pid: l.pid, Tid: l.tid, Args: args})
			break
		}
		// Calls left open below this depth never returned (their
		// records were lost): close them here, so the track still nests.
		c.closeFrom(l, r.Depth, r.Time, "unfinished")
		for len(l.open) < r.Depth {
			l.open = append(l.open, chromeCall{})
		}
		l.open = append(l.open, chromeCall{fn: r.Func, start: r.Time, args: fieldMap(r.Fields)})
	case KindReturn:
		l := c.lane(r, k)
		c.closeFrom(l, r.Depth+1, r.Time, "unfinished")
		start := r.EntryTime
		var args map[string]any
		if r.Depth < len(l.open) {
			args = l.open[r.Depth].args
			l.open = l.open[:r.Depth]
		}
		if ret := fieldMap(r.Fields); ret != nil {
			if args == nil {
				args = map[string]any{}
			}
			maps.Copy(args, ret)
		}
		c.complete(l, r.Func, start, r.Time, "", args)
	case KindLost:
		l := c.lane(r, k)
		c.closeFrom(l, r.Depth, r.Time, "return lost")
	}
	return c.err
}

// closeFrom ends the lane's calls at depth and deeper at time end.
func (c *Chrome) closeFrom(l *chromeLane, depth int, end int64, why string) {
	for i := len(l.open) - 1; i >= depth; i-- {
		if call := l.open[i]; call.fn != "" {
			c.complete(l, call.fn, call.start, end, why, call.args)
		}
	}
	if depth < len(l.open) {
		l.open = l.open[:depth]
	}
}

func (c *Chrome) complete(l *chromeLane, fn string, start, end int64, why string, args map[string]any) {
	d := micros(end - start)
	e := chromeEvent{Name: fn, Cat: "function", Ph: "X", Ts: micros(start), Dur: &d, Pid: l.pid, Tid: l.tid, Args: args}
	if why != "" {
		if e.Args == nil {
			e.Args = map[string]any{}
		}
		e.Args["note"] = why
	}
	c.emit(&e)
}

func (c *Chrome) emit(e *chromeEvent) {
	if c.err != nil || c.closed {
		return
	}
	if !c.started {
		c.started = true
		c.w.WriteString(`{"displayTimeUnit":"ns","traceEvents":[` + "\n")
	}
	if c.n > 0 {
		c.w.WriteString(",\n")
	}
	c.n++
	b, err := json.Marshal(e)
	if err != nil {
		c.err = err
		return
	}
	_, c.err = c.w.Write(b)
}

// Comment goes to the trace's metadata (otherData.comments).
func (c *Chrome) Comment(s string) error {
	c.comments = append(c.comments, s)
	return nil
}

// Flush writes out what is buffered; the first flush after Finish ends
// the JSON document, with the comments made until then.
func (c *Chrome) Flush() error {
	if c.finished && !c.closed {
		if !c.started {
			c.emit(&chromeEvent{Name: "process_name", Ph: "M", Args: map[string]any{"name": "probe"}})
		}
		c.closed = true
		other, err := json.Marshal(map[string]any{"comments": append([]string{}, c.comments...)})
		if err != nil {
			return err
		}
		c.w.WriteString("\n],\n\"otherData\":")
		c.w.Write(other)
		c.w.WriteString("}\n")
	}
	if c.err != nil {
		return c.err
	}
	return c.w.Flush()
}

// Finish closes the calls still open at the last time seen; the next
// Flush ends the document, so that comments may still follow.
func (c *Chrome) Finish() error {
	for _, lane := range slices.Sorted(maps.Keys(c.lanes)) {
		c.closeFrom(c.lanes[lane], 0, c.last, "still running at the end of the trace")
	}
	c.finished = true
	return c.err
}
