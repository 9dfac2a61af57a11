package probe

import (
	"cmp"
	"fmt"
	"sync/atomic"

	"github.com/probedbg/probe/codegen"
	"github.com/probedbg/probe/fetch"
	"github.com/probedbg/probe/ring"
	"github.com/probedbg/probe/symbols"
)

// Decoder turns raw records (raw.go) into the function tracer's events,
// as the tracer would have made them live: it is a Tracer with no
// process, whose records come from a recording, run through the same
// replay (deliverRecord, the call stacks, the function tracer's
// filters).
type Decoder struct {
	t *Tracer
	// lost are the threads whose rings dropped records (RingLost), for
	// lose's count of returns not recorded.
	lost   map[int]bool
	rec    ring.Record // handed to deliverRecord, reused
	probes map[int]*Probe
	onHit  func(*Hit)
	// space is the modules given (Module), by which return probes' hits
	// describe their callers; modIDs their ids, in its order.
	space  *symbols.Space
	modIDs []int
}

// DecodeHandlers take what a Decoder makes: the function tracer's
// events, and the hits of probes recorded raw, as the live handlers
// would have (a Hit valid during the call).
type DecodeHandlers struct {
	Func  func(*FuncEvent)
	Probe func(*Hit)
}

// NewDecoder makes the decoder of a tracer's raw records, which hands
// its events and hits to h.
func NewDecoder(tables RawTables, h DecodeHandlers) *Decoder {
	t := &Tracer{pid: tables.Pid, probes: map[string]*Probe{}}
	t.newAddressSpace()
	t.inproc = &inproc{sites: map[uint32]*recordSite{}, trampoline: tables.Trampoline}
	t.inproc.env = fetch.HitEnv{Mem: &t.inproc.stack} // (no process: memory is what the records copied)
	t.ret.trampoline, t.ret.wheres = tables.TracerTrampoline, map[whereKey]string{}
	if !tables.NoFunctions {
		opts := FuncTraceOptions{Returns: true, MaxDepth: tables.MaxDepth, Handler: h.Func}
		if tables.GraphFunctions {
			opts.GraphFunction = []string{"(recorded)"} // (only whether there are any matters here)
		}
		t.ft = &funcTracer{opts: opts, callers: map[uint64]string{}}
	}
	d := &Decoder{t: t, lost: map[int]bool{}, probes: map[int]*Probe{}, onHit: h.Probe, space: &symbols.Space{Pid: tables.Pid}}
	t.decoding = d
	return d
}

// Probe compiles a probe's fetch-args and filter from their text.
func (d *Decoder) Probe(rp RawProbe) error {
	if d.probes[rp.ID] != nil {
		return fmt.Errorf("probe %d given twice", rp.ID)
	}
	args, err := fetch.Compile(rp.Args, fetch.CompileEnv{Return: rp.Return})
	if err != nil {
		return fmt.Errorf("probe %s/%s: %v", rp.Group, rp.Event, err)
	}
	if len(rp.Args) == 0 {
		args = nil
	}
	kind := fetch.KindEntry
	if rp.Return {
		kind = fetch.KindReturn
	}
	p := &Probe{Group: rp.Group, Event: rp.Event, Kind: kind, args: args, shownAt: rp.ShownAt, hits: new(atomic.Uint64)}
	p.enabled.Store(true)
	p.handler = Handler{Recorded: true, Raw: true, Pre: d.onHit}
	d.probes[rp.ID] = p
	return nil
}

// Site takes what a site's records hold.
func (d *Decoder) Site(s RawSite) error {
	if s.ID == codegen.ReturnRecord || d.t.inproc.sites[s.ID] != nil {
		return fmt.Errorf("site %d given twice", s.ID)
	}
	for _, off := range s.Regs {
		if off < 0 || off%8 != 0 || off/8 >= regsWords {
			return fmt.Errorf("site %d: no register at offset %d", s.ID, off)
		}
	}
	if s.StackWords < 0 || s.StackWords > codegen.RecordStackMax {
		return fmt.Errorf("site %d: %d stack words", s.ID, s.StackWords)
	}
	for _, r := range s.Reads {
		if r.Len <= 0 || r.Len > codegen.MemReadMax {
			return fmt.Errorf("site %d: a copy of %d bytes", s.ID, r.Len)
		}
	}
	st := &site{addr: s.Addr, funcName: cmp.Or(s.Func, s.ReturnOf), where: s.Where}
	if s.Func != "" || len(s.Probes) == 0 && len(s.Returns) == 0 {
		st.fn = &traceFunc{name: s.Func, graph: s.Graph, notrace: s.Notrace}
	}
	for _, id := range s.Probes {
		p := d.probes[id]
		if p == nil {
			return fmt.Errorf("site %d: probe %d never described", s.ID, id)
		}
		if p.Kind != fetch.KindEntry {
			return fmt.Errorf("site %d: probe %d is a return probe", s.ID, id)
		}
		st.probes = append(st.probes, p)
	}
	if len(s.Returns) > 0 && !s.Hook {
		return fmt.Errorf("site %d: return probes, and its returns not hooked", s.ID)
	}
	for _, id := range s.Returns {
		p := d.probes[id]
		if p == nil || p.Kind != fetch.KindReturn {
			return fmt.Errorf("site %d: return probe %d never described", s.ID, id)
		}
		p.funcName = st.funcName
		st.returns = append(st.returns, p)
	}
	d.t.inproc.sites[s.ID] = &recordSite{site: st, code: &codegen.RecordStub{Site: s.ID, Regs: s.Regs, StackWords: s.StackWords, Hook: s.Hook, Reads: s.Reads}}
	return nil
}

// ThreadName names a thread.
func (d *Decoder) ThreadName(tid int, comm string) {
	d.t.comms[tid] = comm
}

// Record decodes one record. One of a site never described is dropped,
// as deliverRecord drops it live (its jump went in after the drain took
// its records).
func (d *Decoder) Record(r RawRecord) error {
	if !d.named(r.Tid) {
		return fmt.Errorf("a record of thread %d, never named", r.Tid)
	}
	d.record(r)
	return nil
}

func (d *Decoder) named(tid int) bool {
	_, ok := d.t.comms[tid]
	return ok
}

// record decodes a record of a named thread.
func (d *Decoder) record(r RawRecord) {
	d.rec = ring.Record{Tid: r.Tid, Site: r.Site, CPU: r.CPU, TSC: uint64(r.Time), Values: r.Values}
	d.t.deliverRecord(&d.rec)
}

// ThreadGone closes the calls a gone thread left open: lost.
func (d *Decoder) ThreadGone(tid, cpu int, time int64) {
	d.t.threadGoneAt(tid, cpu, time)
	delete(d.lost, tid)
}

// RingLost notes that a thread's ring dropped records.
func (d *Decoder) RingLost(tid int) { d.lost[tid] = true }

// Stats are the returns lost and not recorded, and, at the end of a
// recording made attached (detached at its end), the calls still in
// progress: what the tracer's Stats say of them live.
func (d *Decoder) Stats() Stats {
	open := d.t.callsOpen(func(int) bool { return true }) // (the threads not gone)
	return Stats{LostReturns: d.t.ret.lost, UnrecordedReturns: d.t.ret.unrecorded, CallsInProgress: uint64(open)}
}
