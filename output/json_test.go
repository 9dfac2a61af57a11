package output

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"testing"

	"github.com/probedbg/probe/fetch"
)

// referenceJSON is a record's line as encoding/json writes it from a
// struct in the documented key order: what the hand-built lines must
// equal byte for byte.
func referenceJSON(t *testing.T, r *Record) string {
	type event struct {
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
	e := event{Time: r.Time, Pid: r.Pid, Tid: r.Tid, Comm: r.Comm, CPU: r.CPU, Goroutine: r.Goroutine, Stack: r.Stack}
	var fields map[string]any
	if len(r.Fields) > 0 {
		fields = map[string]any{}
		for _, f := range r.Fields {
			fields[f.Name] = fieldValue(f.Value)
		}
	}
	switch r.Kind {
	case KindProbe:
		e.Event, e.Location, e.Fields = r.Event, r.Where, fields
		if d, ok := returnDuration(r); ok {
			e.Duration = &d
		}
	case KindEntry, KindReturn, KindLost:
		e.Event = jsonFuncEvent[r.Kind]
		e.Func, e.Caller, e.Depth, e.Fields = r.Func, r.Caller, &r.Depth, fields
		if r.Kind == KindReturn {
			d := r.Time - r.EntryTime
			e.Duration = &d
		}
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(&e); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// TestJSONAsEncodingJSON checks the hand-built lines against
// encoding/json's on records of every kind with awkward strings: quotes,
// control characters, HTML, invalid UTF-8, U+2028, repeated field names.
func TestJSONAsEncodingJSON(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	words := []string{"", "main", "a\"b", `back\slash`, "tab\there", "nl\n", "<html>&", "\xff\xfe", "caf\u00e9", "line\u2028sep", "\x01\x1f", "日本"}
	word := func() string { return words[rng.IntN(len(words))] }
	value := func() fetch.Value {
		switch rng.IntN(7) {
		case 0:
			return fetch.UintValue(fetch.TypeU64, rng.Uint64())
		case 1:
			return fetch.UintValue(fetch.TypeS32, uint64(rng.Uint32()))
		case 2:
			return fetch.StringValue(word())
		case 3:
			return fetch.FaultValue(fetch.TypeString)
		case 4:
			return fetch.UintValue(fetch.TypeX16, uint64(rng.Uint32()))
		case 5:
			return fetch.DwarfValue([]string{"-12.5", "true", `"q\"x"`, "(*int)(0x10)", "1e400x", "07"}[rng.IntN(6)])
		}
		return fetch.UintValue(fetch.TypeChar, uint64('A'+rng.IntN(60)))
	}
	var b bytes.Buffer
	w := NewJSON(&b)
	for i := range 5000 {
		r := Record{Kind: Kind(rng.IntN(5)), Time: rng.Int64N(1e12), CPU: rng.IntN(4), Pid: rng.IntN(1e5), Tid: rng.IntN(1e5),
			Comm: word(), Event: word(), Where: word(), Func: word(), Caller: word(), Depth: rng.IntN(9),
			EntryTime: rng.Int64N(1e12), Goroutine: rng.Int64N(3)}
		for range rng.IntN(4) {
			r.Fields = append(r.Fields, fetch.Field{Name: []string{"a", "b", "a", word()}[rng.IntN(4)], Value: value()})
		}
		for range rng.IntN(3) {
			r.Stack = append(r.Stack, word())
		}
		b.Reset()
		if err := w.Write(&r); err != nil {
			t.Fatal(err)
		}
		w.Flush()
		if want := referenceJSON(t, &r); b.String() != want {
			t.Fatalf("record %d (%+v):\n got %s\nwant %s", i, r, b.String(), want)
		}
	}
	b.Reset()
	w.Comment("3 <lost> \"events\"\n")
	w.Flush()
	if want := `{"comment":"3 <lost> \"events\"\n"}` + "\n"; b.String() != want {
		t.Errorf("comment: got %s want %s", b.String(), want)
	}
}
