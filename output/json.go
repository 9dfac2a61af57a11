package output

import (
	"bufio"
	"encoding/json"
	"io"
	"strconv"

	"github.com/probedbg/probe/probe"
)

// JSON writes one JSON object per event (JSON lines), for jq and scripts:
//
//	{"time":5123000123000,"pid":4242,"tid":4242,"comm":"loop","cpu":1,"event":"p_work_0","location":"work+0x0/0x12","fields":{"x":5}}
//
// Times and durations are CLOCK_MONOTONIC nanoseconds. Function tracer
// records are events "func_entry", "func_exit" (with "duration") and
// "func_lost"; a comment is {"comment":"..."}.
type JSON struct {
	w   *bufio.Writer
	enc *json.Encoder
}

// jsonEvent is one line; the field order is the one users read.
type jsonEvent struct {
	Time      int64          `json:"time"`
	Pid       int            `json:"pid"`
	Tid       int            `json:"tid"`
	Comm      string         `json:"comm"`
	CPU       int            `json:"cpu"`
	Event     string         `json:"event"`
	Location  string         `json:"location,omitempty"`
	Func      string         `json:"func,omitempty"`
	Caller    string         `json:"caller,omitempty"`
	Depth     *int           `json:"depth,omitempty"`
	Duration  *int64         `json:"duration,omitempty"`
	Goroutine int64          `json:"goroutine,omitempty"`
	Fields    map[string]any `json:"fields,omitempty"`
	Stack     []string       `json:"stack,omitempty"`
}

// NewJSON returns a JSON lines writer.
func NewJSON(w io.Writer) *JSON {
	b := bufio.NewWriterSize(w, 64<<10)
	enc := json.NewEncoder(b)
	enc.SetEscapeHTML(false)
	return &JSON{w: b, enc: enc}
}

func (j *JSON) Write(r *Record) error {
	e := jsonEvent{Time: r.Time, Pid: r.Pid, Tid: r.Tid, Comm: r.Comm, CPU: r.CPU, Goroutine: r.Goroutine, Stack: r.Stack}
	switch r.Kind {
	case KindProbe:
		e.Event, e.Location = r.Event, r.Where
		e.Fields = fieldMap(r.Fields)
		if d, ok := returnDuration(r); ok {
			e.Duration = &d
		}
	case KindEntry, KindReturn, KindLost:
		e.Event = [...]string{KindEntry: "func_entry", KindReturn: "func_exit", KindLost: "func_lost"}[r.Kind]
		e.Func, e.Caller, e.Depth = r.Func, r.Caller, &r.Depth
		e.Fields = fieldMap(r.Fields) // --args: the parameters, the result
		if r.Kind == KindReturn {
			d := r.Time - r.EntryTime
			e.Duration = &d
		}
	}
	return j.enc.Encode(&e)
}

// returnDuration is a return probe's duration, when the record carries the
// time of the call's entry.
func returnDuration(r *Record) (int64, bool) {
	if r.EntryTime == 0 || r.EntryTime > r.Time {
		return 0, false
	}
	return r.Time - r.EntryTime, true
}

func (j *JSON) Comment(s string) error {
	return j.enc.Encode(struct {
		Comment string `json:"comment"`
	}{s})
}

func (j *JSON) Flush() error  { return j.w.Flush() }
func (j *JSON) Finish() error { return j.w.Flush() }

// fieldMap gives a probe's fields their JSON types: decimal types are
// numbers, hex, chars, strings and symbols are strings as ftrace prints
// them, arrays are arrays, and a fault is null.
func fieldMap(fields []probe.Field) map[string]any {
	if len(fields) == 0 {
		return nil
	}
	m := make(map[string]any, len(fields))
	for _, f := range fields {
		m[f.Name] = fieldValue(f.Value)
	}
	return m
}

func fieldValue(v probe.Value) any {
	if n := v.Len(); n > 0 {
		a := make([]any, n)
		for i := range a {
			a[i] = scalarValue(v.Elem(i))
		}
		return a
	}
	return scalarValue(v)
}

func scalarValue(v probe.Value) any {
	if v.Faulted() {
		return nil
	}
	switch t := v.Type(); {
	case t >= probe.TypeU8 && t <= probe.TypeU64:
		return v.Uint()
	case t.Signed():
		return v.Int()
	case t.IsString():
		return v.Str()
	case t == probe.TypeDwarf:
		return dwarfValue(v.Str())
	}
	return v.String()
}

// dwarfValue gives a DWARF variable's text (delve's rendering) its JSON
// type where it has one: numbers, booleans and quoted strings; anything
// else (structs, pointers, chars) stays the text the trace prints.
func dwarfValue(s string) any {
	switch {
	case s == "true" || s == "false":
		return s == "true"
	case s != "" && (s[0] == '-' || s[0] >= '0' && s[0] <= '9') && json.Valid([]byte(s)):
		return json.Number(s)
	case len(s) >= 2 && s[0] == '"':
		if u, err := strconv.Unquote(s); err == nil {
			return u
		}
	}
	return s
}
