package output

import (
	"bytes"
	"testing"

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
	writeAll(t, NewCalls(&b, false), recs)
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
