package probe

import (
	"fmt"
	"slices"
	"testing"

	"github.com/probedbg/probe/fetch"
	"github.com/probedbg/probe/ring"
	"github.com/probedbg/probe/symbols"
)

// TestRawReturnProbe: a return probe recorded raw, its site's entry and
// return as the rings held them, decodes to the hit the live trace
// shows: $retval from the return's %rax, where the call returned to
// described by the module's tables ("main+0x34/0x100 <- work"); a
// module's tables too large for a frame go in several, and a module
// gone describes nothing any more.
func TestRawReturnProbe(t *testing.T) {
	var kinds []byte
	var payloads [][]byte
	e := NewRawEncoder(func(kind byte, payload []byte) {
		kinds = append(kinds, kind)
		payloads = append(payloads, append([]byte(nil), payload...))
	})
	e.Begin(RawTables{Pid: 7, Trampoline: 0x1000, NoFunctions: true})
	// main's module, and a large one (60,000 functions: more than a
	// frame holds) whose last function is called.
	e.Module(RawModule{ID: 1, Name: "prog", Bias: 0x400000, Ranges: [][2]uint64{{0x401000, 0x402000}},
		Funcs: []symbols.Symbol{{Name: "main", Addr: 0x1000, Size: 0x100, Func: true}, {Name: "work", Addr: 0x1100, Size: 0x10, Func: true}}})
	var big []symbols.Symbol
	for i := range 60000 {
		big = append(big, symbols.Symbol{Name: fmt.Sprintf("function_with_a_long_name_%d", i), Addr: uint64(0x10000 + 0x10*i), Size: 0x10, Func: true})
	}
	e.Module(RawModule{ID: 2, Name: "libbig.so", Bias: 0x7f0000000000, Ranges: [][2]uint64{{0x7f0000010000, 0x7f0000100000}}, Funcs: big})
	e.Probe(RawProbe{ID: 1, Group: "probe", Event: "r_work_0", Args: []string{"$retval"}, Return: true})
	e.Site(RawSite{ID: 1, Addr: 0x401100, Regs: []int{spOff}, StackWords: 1, Hook: true, Returns: []int{1}, ReturnOf: "work"})
	e.ThreadName(8, "w")
	line := ring.Line{TSC: 1000, NS: 0, PerTSC: 1}
	chunk := slices.Concat(ringRecord(1, 1, 1100, 0x7ff0, 0x401034, 1), ringRecord(ReturnSite, 1, 1150, 0x7ff0, 42, 0, 0),
		ringRecord(1, 1, 1200, 0x7ff0, 0x7f0000010000+0x10*59999+4, 1), ringRecord(ReturnSite, 1, 1250, 0x7ff0, 43, 0, 0))
	e.Chunk(line, 3, &ring.Chunk{Tid: 8, Bytes: [2][]byte{chunk}, Records: 4})
	e.EndChunks()
	e.Module(RawModule{ID: 2, Name: "libbig.so"}) // (unloaded)
	chunk = slices.Concat(ringRecord(1, 1, 1300, 0x7fe0, 0x7f0000010000+0x10*59998, 1), ringRecord(ReturnSite, 1, 1350, 0x7fe0, 44, 0, 0))
	e.Chunk(line, 3, &ring.Chunk{Tid: 8, Bytes: [2][]byte{chunk}, Records: 2})
	e.EndChunks()
	e.Flush()
	if n := slices.Index(kinds, RawModuleFrame); n < 0 || kinds[n+1] != RawModuleFrame || kinds[n+2] != RawModuleFrame {
		t.Fatalf("frames %q: want the big module in two", kinds)
	}

	var hits []string
	rr := NewRawReader(DecodeHandlers{Probe: func(h *Hit) {
		hits = append(hits, fmt.Sprintf("%s (%s) %d %s", h.Probe.Event, h.Where, h.Time, fetch.AppendFields(nil, h.Fields)))
	}})
	for i, k := range kinds {
		if err := rr.Frame(k, payloads[i]); err != nil {
			t.Fatalf("frame %c: %v", k, err)
		}
	}
	want := []string{
		"r_work_0 (main+0x34/0x100 <- work) 150  arg1=0x2a",
		"r_work_0 (function_with_a_long_name_59999+0x4/0x10 <- work) 250  arg1=0x2b",
		"r_work_0 (0x7f00000fa5e0 <- work) 350  arg1=0x2c",
	}
	if !slices.Equal(hits, want) {
		t.Fatalf("hits\n%q\nwant\n%q", hits, want)
	}
}
