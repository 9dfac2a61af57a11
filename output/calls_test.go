package output

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/probedbg/probe/fetch"
)

// TestCallsLines: ltrace's lines, exactly: the result at column 40
// (counted in characters, not bytes), a call cut by one inside it
// ("<unfinished ...>", then "<... resumed>"), a failed call's errno as
// strace shows it, and a call that never returned.
func TestCallsLines(t *testing.T) {
	s32 := func(v int64) fetch.Value { return fetch.UintValue(fetch.TypeS32, uint64(v)) }
	entry := func(tid int, fn string, args ...fetch.Value) Record {
		r := Record{Kind: KindEntry, Tid: tid, Lane: int64(tid), Func: fn}
		for _, a := range args {
			r.Fields = append(r.Fields, fetch.Field{Name: "arg", Value: a})
		}
		return r
	}
	ret := func(tid int, fn string, fields ...fetch.Field) Record {
		return Record{Kind: KindReturn, Tid: tid, Lane: int64(tid), Func: fn, Fields: fields}
	}
	recs := []Record{
		entry(7, "open", fetch.StringValue("/nonexistent"), s32(2)),
		ret(7, "open", fetch.Field{Name: "retval", Value: s32(-1)}, fetch.Field{Name: "errno", Value: fetch.DwarfValue("ENOENT")}),
		entry(7, "puts", fetch.StringValue("héllo wörld")),
		ret(7, "puts", fetch.Field{Name: "retval", Value: s32(12)}),
		entry(7, "qsort", s32(3)),
		entry(7, "cmp", s32(1), s32(2)),
		ret(7, "cmp", fetch.Field{Name: "retval", Value: s32(-1)}),
		ret(7, "qsort"),
		entry(7, "exit", s32(0)),
		{Kind: KindLost, Tid: 7, Lane: 7, Func: "exit"},
		entry(8, "pause"),
	}
	var b bytes.Buffer
	writeAll(t, NewCalls(&b, CallsOptions{}), recs)
	want := `[pid 7] open("/nonexistent", 2)         = -1 ENOENT (No such file or directory)
[pid 7] puts("héllo wörld")             = 12
[pid 7] qsort(3 <unfinished ...>
[pid 7] cmp(1, 2)                       = -1
[pid 7] <... qsort resumed>             = <void>
[pid 7] exit(0)                         = <no return ...>
[pid 8] pause( <no return ...>
# 3 events lost (buffer full)
`
	if b.String() != want {
		t.Errorf("got:\n%s\nwant:\n%s", b.String(), want)
	}
}

// TestCallsTimes: ltrace's -t, -tt, -ttt and -r at the start of a line
// (after the pid), -T at its end: a call's line begins at its entry, a
// resumed one's at its return; -r counts from the line before (the
// first: 0), and never back. -n indents a call inside another.
func TestCallsTimes(t *testing.T) {
	local := time.Local
	time.Local = time.UTC
	defer func() { time.Local = local }()
	const wall = int64(1795882885)*1e9 - 1e9 // the records' clock 1 s after boot is this Unix time
	at := func(r Record, ns int64) Record { r.Time = 1e9 + ns; return r }
	s32 := func(v int64) fetch.Value { return fetch.UintValue(fetch.TypeS32, uint64(v)) }
	recs := []Record{
		at(Record{Kind: KindEntry, Tid: 7, Lane: 7, Func: "qsort"}, 0),
		at(Record{Kind: KindEntry, Tid: 7, Lane: 7, Func: "strcmp"}, 1500),
		at(Record{Kind: KindReturn, Tid: 7, Lane: 7, Func: "strcmp", Fields: []fetch.Field{{Name: "retval", Value: s32(3)}}}, 4500),
		at(Record{Kind: KindReturn, Tid: 7, Lane: 7, Func: "qsort"}, 2_345_678_000),
	}
	for _, c := range []struct {
		opts CallsOptions
		want string
	}{
		{CallsOptions{Stamp: 1, Durations: true}, `[pid 7] 16:21:25 qsort( <unfinished ...>
[pid 7] 16:21:25 strcmp()               = 3 <0.000003>
[pid 7] 16:21:27 <... qsort resumed>    = <void> <2.345678>
`},
		{CallsOptions{Stamp: 2}, `[pid 7] 16:21:25.000000 qsort( <unfinished ...>
[pid 7] 16:21:25.000001 strcmp()        = 3
[pid 7] 16:21:27.345678 <... qsort resumed> = <void>
`},
		{CallsOptions{Indent: 2}, `[pid 7] qsort( <unfinished ...>
[pid 7]   strcmp()                      = 3
[pid 7] <... qsort resumed>             = <void>
`},
		{CallsOptions{Stamp: 3, Relative: true}, `[pid 7]   0.000000 1795882885.000000 qsort( <unfinished ...>
[pid 7]   0.000001 1795882885.000001 strcmp() = 3
[pid 7]   2.345676 1795882887.345678 <... qsort resumed> = <void>
`},
	} {
		c.opts.WallOffset = wall
		var b bytes.Buffer
		writeAll(t, NewCalls(&b, c.opts), recs)
		if got, _, _ := strings.Cut(b.String(), "#"); got != c.want { // (writeAll's note)
			t.Errorf("%+v: got:\n%s\nwant:\n%s", c.opts, got, c.want)
		}
	}
}

// TestCallsStringLen: -s N cuts a string argument or result longer than
// N bytes, as ltrace: the first N, quoted, then "...".
func TestCallsStringLen(t *testing.T) {
	recs := []Record{
		{Kind: KindEntry, Tid: 7, Lane: 7, Func: "strdup", Fields: []fetch.Field{{Name: "s", Value: fetch.StringValue("abcdefgh")}}},
		{Kind: KindReturn, Tid: 7, Lane: 7, Func: "strdup", Fields: []fetch.Field{{Name: "retval", Value: fetch.StringValue("abcdefgh")}}},
		{Kind: KindEntry, Tid: 7, Lane: 7, Func: "puts", Fields: []fetch.Field{{Name: "s", Value: fetch.StringValue("abcd")}}},
		{Kind: KindReturn, Tid: 7, Lane: 7, Func: "puts", Fields: []fetch.Field{{Name: "retval", Value: fetch.UintValue(fetch.TypeS32, 5)}}},
	}
	var b bytes.Buffer
	writeAll(t, NewCalls(&b, CallsOptions{StringLen: 4}), recs)
	want := `[pid 7] strdup("abcd"...)               = "abcd"...
[pid 7] puts("abcd")                    = 5
`
	if got, _, _ := strings.Cut(b.String(), "#"); got != want {
		t.Errorf("got:\n%s\nwant:\n%s", got, want)
	}
}
