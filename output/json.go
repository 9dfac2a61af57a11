package output

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/probedbg/probe/fetch"
)

// JSON writes one JSON object per event (JSON lines), for jq and scripts:
//
//	{"time":5123000123000,"pid":4242,"tid":4242,"comm":"loop","cpu":1,"event":"p_work_0","location":"work+0x0/0x12","fields":{"x":5}}
//
// Times and durations are CLOCK_MONOTONIC nanoseconds. Function tracer
// records are events "func_entry", "func_exit" (with "duration") and
// "func_lost"; a comment is {"comment":"..."}.
type JSON struct {
	w    *bufio.Writer
	buf  []byte      // the line being built, reused
	keys []jsonField // a record's fields, sorted, reused
	// slow encodes the strings that need escaping, as encoding/json
	// does (the lines are built by hand: a line in a fifth of the time).
	slow    bytes.Buffer
	slowEnc *json.Encoder
}

// jsonField is a field by name, as the "fields" object lists them
// (sorted by name, as encoding/json writes a map).
type jsonField struct {
	name  string
	value fetch.Value
}

// NewJSON returns a JSON lines writer.
func NewJSON(w io.Writer) *JSON {
	j := &JSON{w: bufio.NewWriterSize(w, 64<<10)}
	j.slowEnc = json.NewEncoder(&j.slow)
	j.slowEnc.SetEscapeHTML(false)
	return j
}

var jsonFuncEvent = [...]string{KindEntry: "func_entry", KindReturn: "func_exit", KindLost: "func_lost"}

// Write writes the record's line; its keys come in the order users read:
// time, pid, tid, comm, cpu, event, location, func, caller, depth,
// duration, goroutine, fields, stack (the empty ones left out).
func (j *JSON) Write(r *Record) error {
	b := append(j.buf[:0], `{"time":`...)
	b = strconv.AppendInt(b, r.Time, 10)
	b = strconv.AppendInt(append(b, `,"pid":`...), int64(r.Pid), 10)
	b = strconv.AppendInt(append(b, `,"tid":`...), int64(r.Tid), 10)
	b = j.appendString(append(b, `,"comm":`...), r.Comm)
	b = strconv.AppendInt(append(b, `,"cpu":`...), int64(r.CPU), 10)
	duration, hasDuration, fields := int64(0), false, r.Fields
	switch r.Kind {
	case KindProbe:
		b = j.appendString(append(b, `,"event":`...), r.Event)
		if r.Where != "" {
			b = j.appendString(append(b, `,"location":`...), r.Where)
		}
		duration, hasDuration = returnDuration(r)
	case KindEntry, KindReturn, KindLost:
		b = j.appendString(append(b, `,"event":`...), jsonFuncEvent[r.Kind])
		if r.Func != "" {
			b = j.appendString(append(b, `,"func":`...), r.Func)
		}
		if r.Caller != "" {
			b = j.appendString(append(b, `,"caller":`...), r.Caller)
		}
		b = strconv.AppendInt(append(b, `,"depth":`...), int64(r.Depth), 10)
		duration, hasDuration = r.Time-r.EntryTime, r.Kind == KindReturn
	default:
		b, fields = append(b, `,"event":""`...), nil
	}
	if hasDuration {
		b = strconv.AppendInt(append(b, `,"duration":`...), duration, 10)
	}
	if r.Goroutine != 0 {
		b = strconv.AppendInt(append(b, `,"goroutine":`...), r.Goroutine, 10)
	}
	if len(fields) > 0 {
		b = j.appendFields(append(b, `,"fields":`...), fields)
	}
	if len(r.Stack) > 0 {
		b = append(b, `,"stack":[`...)
		for i, f := range r.Stack {
			if i > 0 {
				b = append(b, ',')
			}
			b = j.appendString(b, f)
		}
		b = append(b, ']')
	}
	return j.line(append(b, "}\n"...))
}

// line writes b, the line built in j.buf.
func (j *JSON) line(b []byte) error {
	j.buf = b
	_, err := j.w.Write(b)
	return err
}

// appendFields appends fields as an object, its keys sorted; of fields
// of one name the last counts (as in a map).
func (j *JSON) appendFields(b []byte, fields []fetch.Field) []byte {
	keys := j.keys[:0]
	for _, f := range fields {
		keys = append(keys, jsonField{f.Name, f.Value})
	}
	slices.SortStableFunc(keys, func(x, y jsonField) int { return strings.Compare(x.name, y.name) })
	b = append(b, '{')
	for i, k := range keys {
		if i+1 < len(keys) && keys[i+1].name == k.name {
			continue
		}
		if b[len(b)-1] != '{' {
			b = append(b, ',')
		}
		b = append(j.appendString(b, k.name), ':')
		b = j.appendValue(b, fieldValue(k.value))
	}
	j.keys = keys
	return append(b, '}')
}

// appendValue appends what fieldValue gives.
func (j *JSON) appendValue(b []byte, v any) []byte {
	switch v := v.(type) {
	case nil:
		return append(b, "null"...)
	case uint64:
		return strconv.AppendUint(b, v, 10)
	case int64:
		return strconv.AppendInt(b, v, 10)
	case bool:
		return strconv.AppendBool(b, v)
	case json.Number:
		return append(b, v...)
	case string:
		return j.appendString(b, v)
	case []any:
		b = append(b, '[')
		for i, e := range v {
			if i > 0 {
				b = append(b, ',')
			}
			b = j.appendValue(b, e)
		}
		return append(b, ']')
	}
	panic(fmt.Sprintf("output: no JSON for a %T", v))
}

// appendString appends s quoted; one with anything to escape is
// encoded by encoding/json, for its exact rules (invalid UTF-8, U+2028).
func (j *JSON) appendString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' {
			j.slow.Reset()
			j.slowEnc.Encode(s)
			return append(b, bytes.TrimSuffix(j.slow.Bytes(), []byte("\n"))...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
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
	b := j.appendString(append(j.buf[:0], `{"comment":`...), s)
	return j.line(append(b, "}\n"...))
}

func (j *JSON) Flush() error  { return j.w.Flush() }
func (j *JSON) Finish() error { return j.w.Flush() }

// fieldMap gives a probe's fields their JSON types: decimal types are
// numbers, hex, chars, strings and symbols are strings as ftrace prints
// them, arrays are arrays, and a fault is null.
func fieldMap(fields []fetch.Field) map[string]any {
	if len(fields) == 0 {
		return nil
	}
	m := make(map[string]any, len(fields))
	for _, f := range fields {
		m[f.Name] = fieldValue(f.Value)
	}
	return m
}

func fieldValue(v fetch.Value) any {
	if n := v.Len(); n > 0 {
		a := make([]any, n)
		for i := range a {
			a[i] = scalarValue(v.Elem(i))
		}
		return a
	}
	return scalarValue(v)
}

func scalarValue(v fetch.Value) any {
	if v.Faulted() {
		return nil
	}
	switch t := v.Type(); {
	case t >= fetch.TypeU8 && t <= fetch.TypeU64:
		return v.Uint()
	case t.Signed():
		return v.Int()
	case t.IsString():
		return v.Str()
	case t == fetch.TypeDwarf:
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
