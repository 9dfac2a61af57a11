package probe

import (
	"maps"
	"slices"

	"golang.org/x/sys/unix"

	"github.com/probedbg/probe/codegen"
	"github.com/probedbg/probe/fetch"
	"github.com/probedbg/probe/ring"
	"github.com/probedbg/probe/symbols"
)

// Raw capture (probe record), as perf record and uftrace record keep
// what the tracee wrote and decode it when the trace is read: with a
// RawOutput set before Start, a function_graph (no --args, no -f, C
// functions; x86-64) and entry and return probes whose hits are only
// printed and whose fetch-args compile from their text alone
// (fetch.Portable; a return probe's returns hooked in the tracee), or
// such probes alone, hand on each ring's run of
// records as it lies there (ring.Chunk: their registers and stack words,
// their site's id, their time), and does nothing else with them
// (rawchunk.go encodes them). A Decoder makes of them, later, the events the
// tracer would have made live: it is the same code (deliverRecord and
// the call stacks after it) run on a Tracer with no process.
//
// Decoding live costs ~250 ns a record, against ~20 ns to take it from
// the rings and encode it (2M calls: probe record 0.93 s decoded live,
// uftrace record 0.26 s); it is what made probe record slower than the
// tracee it records.
//
// Live, the tracer then keeps no frames of the calls the tracee hooked:
// the tracee's own shadow stacks send its threads home. Its frames of
// the calls it hooks at a stop (functions no jump fits) stay, and what
// it learnt from the tracee's frames beside them it now asks the tracee
// (shadowFrame.returnsTo's home, returning's rawTramp). The entries and returns of those
// calls go among the tracee's records, made at the stops (rawEntry,
// rawReturn).

// RawOutput takes raw records, on the tracer's threads, under the lock
// its handlers run under.
type RawOutput interface {
	// Begin gives the tables, before anything else.
	Begin(RawTables)
	// Probe describes a probe, before a site names it.
	Probe(RawProbe)
	// Site says what the records of one site hold, before the first.
	Site(RawSite)
	// Module gives a module's symbol tables, where return probes are
	// recorded raw: their hits say where the call returned to.
	Module(RawModule)
	// ThreadName names a thread before its first record.
	ThreadName(tid int, comm string)
	// Record takes a record made at a stop.
	Record(RawRecord)
	// Chunk takes a run of a thread's records as its ring holds them,
	// timed by line; cpu is the CPU of those whose own is unknown (-1:
	// none is). The chunks of a drain's pass end with EndChunks.
	Chunk(line ring.Line, cpu int, c *ring.Chunk)
	EndChunks()
	// ThreadGone says a thread has exited (its calls left open are
	// lost), at time, after its last record; cpu is the CPU the live
	// trace would have shown.
	ThreadGone(tid, cpu int, time int64)
	// RingLost says a thread's ring has dropped records (full).
	RingLost(tid int)
	// Flush puts what it holds before what the handlers print next (a
	// probe's hit at a stop, printed live).
	Flush()
}

// RawTables are what decoding a tracer's raw records needs besides its
// sites: its process, the tracee's return trampoline, the function
// tracer's options.
type RawTables struct {
	Pid        int
	Trampoline uint64
	// MaxDepth and GraphFunctions are the function tracer's
	// (GraphFunctions: some function is a --graph-function).
	MaxDepth       int
	GraphFunctions bool
	// TracerTrampoline is where the tracer sends the returns it hooks
	// at a stop: a tail call from such a call finds it at sp.
	TracerTrampoline uint64
	// NoFunctions: the function tracer does not run (probes alone do).
	NoFunctions bool `json:",omitempty"`
}

// RawProbe is a probe whose hits are recorded raw: its name and its
// fetch-args and filter as text, compiled again by the Decoder; Return:
// a return probe ($retval).
type RawProbe struct {
	ID           int
	Group, Event string
	Args         []string
	ShownAt      string `json:",omitempty"`
	Return       bool   `json:",omitempty"`
}

// RawModule is a module mapped in the process, as a return probe's hit
// describes the address its call returned to ("main+0x24/0xa7 <- one"):
// where it is mapped and its symbol tables (symbols.TableMapped). A
// module given again with its ID replaces the first; with no Ranges, it
// is gone.
type RawModule struct {
	ID             int
	Name           string
	Bias           uint64
	Ranges         [][2]uint64
	Funcs, Objects []symbols.Symbol
}

// RawSite is what the records of a site hold (codegen.RecordStub), and
// the function it is the entry of.
type RawSite struct {
	ID         uint32
	Addr       uint64
	Func       string
	Graph      bool // a --graph-function
	Notrace    bool // --notrace: its calls hide the calls below
	Regs       []int
	StackWords int
	Hook       bool
	// Reads are the memory the records copy (after the hooked flag);
	// Where is the site as probes' hits show it; Probes, the ids of the
	// probes at it.
	Reads  []codegen.MemRead `json:",omitempty"`
	Where  string            `json:",omitempty"`
	Probes []int             `json:",omitempty"`
	// Returns are the ids of the return probes of the function entered
	// here (its records hook the return: Hook), ReturnOf its name as
	// their hits show it.
	Returns  []int  `json:",omitempty"`
	ReturnOf string `json:",omitempty"`
}

// RawRecord is one record as the tracee wrote it, its stamp turned into
// CLOCK_MONOTONIC nanoseconds and its CPU known. Values are valid only
// during the call that hands it on.
type RawRecord struct {
	Tid, CPU int
	Time     int64
	Site     uint32
	Values   []uint64
}

// ReturnSite is the site id of a return record (the trampoline's).
const ReturnSite = codegen.ReturnRecord

// rawState is the tracer's raw capture.
type rawState struct {
	out       RawOutput // SetRawOutput's
	on        bool      // capturing (decided at Start; off at an exec)
	began     bool      // it was on
	tables    RawTables
	announced []bool       // by site id: its RawSite given
	sitesSeen int          // len(inproc.sites) when announceSites last looked
	named     map[int]bool // threads named, not gone
	lastTid   int
	lost      map[int]bool      // threads whose ring's losses were said
	trapIDs   map[uint64]uint32 // the site ids of functions that stop the thread, by address
	probeIDs  map[*Probe]int    // the probes described, and their ids
	// Return probes recorded raw (a site of theirs given): the modules
	// are given (RawModule) before the next chunk, and anew when the
	// address space changes; by the drain, not at Start, where building
	// libc's tables held the program's start (~10 ms).
	returns bool
	space   *symbols.Space          // the address space last given
	modIDs  map[*symbols.Mapped]int // the modules given, and their ids
	modNext int                     // the last id given
	vals    []uint64                // a record made at a stop, reused
}

// SetRawOutput asks for raw capture into out, if what is traced allows
// it (see RawCapture); call it before Start.
func (t *Tracer) SetRawOutput(out RawOutput) error {
	return t.do(func(int) error {
		t.raw.out = out
		return nil
	})
}

// RawCapture reports whether the records went raw to the RawOutput
// (decided at Start: false before), and the tables their Decoder needs.
func (t *Tracer) RawCapture() (RawTables, bool) {
	if !t.isReady() {
		return RawTables{}, false
	}
	return t.raw.tables, t.raw.began
}

// startRaw turns raw capture on at Start if it was asked for and every
// traced function records in the tracee.
func (t *Tracer) startRaw() {
	if t.raw.out == nil || !t.rawCapturable() {
		return
	}
	r := &t.raw
	r.on, r.began, r.named, r.lost = true, true, map[int]bool{}, map[int]bool{}
	r.tables = RawTables{Pid: t.pid, Trampoline: t.inproc.trampoline, TracerTrampoline: t.ret.trampoline, NoFunctions: t.ft == nil}
	if t.ft != nil {
		r.tables.MaxDepth, r.tables.GraphFunctions = t.ft.opts.MaxDepth, len(t.ft.opts.GraphFunction) > 0
	}
	r.out.Begin(r.tables)
}

// rawCapturable reports whether the tracer's work is a function_graph,
// or entry and return probes (rawProbe), or these together, whose every
// function records in the tracee (and hooks there the returns of its
// return probes).
func (t *Tracer) rawCapturable() bool {
	ft := t.ft
	if t.inproc == nil || t.follow.on || len(t.follow.children) > 0 || !returnInSlot || ft == nil && len(t.probes) == 0 {
		// (arm64: the tracer's frames of the calls the tracee hooked
		// say where each function saved its return address, which the
		// detach gives back: without them the program died of SIGSEGV
		// at the first detach.)
		return false
	}
	if ft != nil {
		o := &ft.opts
		if !o.Returns || o.Callers || o.Args || o.FromMain || o.Stack || o.Handler == nil {
			return false
		}
	}
	for _, p := range t.probes {
		if !rawProbe(p) {
			return false
		}
	}
	for _, s := range t.sites {
		if s.fn == nil && s.fnRet == nil && len(s.probes) == 0 && len(s.returns) == 0 {
			continue // the tracer's own (an unwinder's entry, the linker's)
		}
		if s.fn != nil && s.fn.isGo || s.fnRet != nil {
			return false
		}
		// Return probes only where the tracee hooks their returns (the
		// records of a return the tracer hooks at a stop hold none of
		// a return probe's).
		if len(s.returns) > 0 && (s.opt == nil || s.opt.record == nil || !s.opt.record.code.Hook) {
			return false
		}
		if s.fn != nil && s.opt != nil && s.opt.record != nil && !s.opt.record.code.Hook {
			return false
		}
	}
	return true
}

// rawProbe reports whether p's hits may be recorded raw: an entry or
// return probe, in C, whose handler only prints them, whose fetch-args
// and filter compile from their text alone (a return probe's DWARF
// names, read at the entry, are not).
func rawProbe(p *Probe) bool {
	ret := p.Kind == fetch.KindReturn
	if p.Kind != fetch.KindEntry && !ret || !p.handler.Recorded || !p.handler.Raw || p.override != nil || p.syscall != 0 || len(p.captures) > 0 {
		return false
	}
	for _, s := range p.sites {
		if s.module != nil && isGo(s.module) || s.sdtArgs[p] != nil {
			return false // (a P frame has the probe's one set of fetch-args)
		}
	}
	return fetch.Portable(p.fetchTokens(), ret)
}

// rawPassMax bounds the records of a drain's pass under raw capture:
// its chunks are one frame (~1 MiB), which its reader merges whole.
const rawPassMax = 1 << 14

// captureChunk hands on raw a run of a thread's records, as its ring
// holds them.
func (t *Tracer) captureChunk(c *ring.Chunk) {
	in, r := t.inproc, &t.raw
	if len(in.quiet) > 0 && in.quiet[c.Tid] {
		return // a vfork child's
	}
	if len(in.sites) != r.sitesSeen {
		t.announceSites()
	}
	if r.returns && t.space != r.space {
		t.announceModules()
	}
	if c.Tid != r.lastTid {
		t.rawNamed(c.Tid)
		r.lastTid = c.Tid
	}
	cpu := -1
	if c.NoCPU {
		cpu = t.cpuOf(c.Tid) // no rseq area: where the thread runs now
	}
	r.out.Chunk(in.clock.Line(), cpu, c)
}

// announceSites describes the record sites not yet described, in the
// order of their ids. A record of a site not described (one whose jump
// went in after its records were taken) is dropped by the decoder, as
// deliverRecord drops it live.
func (t *Tracer) announceSites() {
	r := &t.raw
	r.sitesSeen = len(t.inproc.sites)
	for _, id := range slices.Sorted(maps.Keys(t.inproc.sites)) {
		for int(id) >= len(r.announced) {
			r.announced = append(r.announced, false)
		}
		if r.announced[id] {
			continue
		}
		r.announced[id] = true
		rs := t.inproc.sites[id]
		s := rawSite(id, rs.site)
		s.Regs, s.StackWords, s.Hook, s.Reads = rs.code.Regs, rs.code.StackWords, rs.code.Hook, rs.code.Reads
		for _, p := range rs.site.probes {
			s.Probes = append(s.Probes, t.announceProbe(p))
		}
		if rs.code.Hook {
			for _, p := range rs.site.returns {
				s.Returns = append(s.Returns, t.announceProbe(p))
			}
			if len(s.Returns) > 0 {
				s.ReturnOf, r.returns = rs.site.funcName, true
			}
		}
		r.out.Site(s)
	}
}

// announceProbe describes p if not yet done, and returns its id.
func (t *Tracer) announceProbe(p *Probe) int {
	r := &t.raw
	if id, ok := r.probeIDs[p]; ok {
		return id
	}
	if r.probeIDs == nil {
		r.probeIDs = map[*Probe]int{}
	}
	id := len(r.probeIDs) + 1
	r.probeIDs[p] = id
	r.out.Probe(RawProbe{ID: id, Group: p.Group, Event: p.Event, Args: p.fetchTokens(), ShownAt: p.shownAt, Return: p.Kind == fetch.KindReturn})
	return id
}

// announceModules gives the modules of the address space not given yet,
// and says which given are gone: the Decoder describes the addresses
// return probes' calls return to by them, as returnWhere does live, in
// the address space of the time.
func (t *Tracer) announceModules() {
	r := &t.raw
	if !r.returns || t.space == nil {
		return
	}
	r.space = t.space
	if r.modIDs == nil {
		r.modIDs = map[*symbols.Mapped]int{}
	}
	for m, id := range r.modIDs {
		if !slices.Contains(t.space.Mapped, m) {
			delete(r.modIDs, m)
			r.out.Module(RawModule{ID: id, Name: m.Name})
		}
	}
	for _, m := range t.space.Mapped {
		if _, ok := r.modIDs[m]; ok {
			continue
		}
		r.modNext++
		id := r.modNext
		r.modIDs[m] = id
		r.out.Module(RawModule{ID: id, Name: m.Name, Bias: m.Bias, Ranges: m.Ranges(), Funcs: m.Functions(), Objects: m.Objects()})
	}
}

// rawSite is site st as raw records name it, by id: its address and its
// function.
func rawSite(id uint32, st *site) RawSite {
	s := RawSite{ID: id, Addr: st.addr, Where: st.where}
	if fn := st.fn; fn != nil {
		s.Func, s.Graph, s.Notrace = fn.name, fn.graph, fn.notrace
	}
	return s
}

// rawThreadGone says that thread tid is gone, its records drained, as
// the live trace says it on cpu at time now.
func (t *Tracer) rawThreadGone(tid, cpu int, now int64) {
	r := &t.raw
	if !r.on || !r.named[tid] {
		return
	}
	t.noteRawLost()
	delete(r.named, tid)
	r.lastTid = 0
	r.out.ThreadGone(tid, cpu, now)
}

// noteRawLost says which threads' rings have dropped records since it
// last looked.
func (t *Tracer) noteRawLost() {
	r := &t.raw
	if !r.on || t.inproc == nil {
		return
	}
	for tid := range r.named {
		if !r.lost[tid] && t.inproc.rings.LostOf(tid) > 0 {
			r.lost[tid] = true
			r.out.RingLost(tid)
		}
	}
}

// Functions that stop the thread (no jump fits) are recorded too: their
// entries and returns, made at the stops, go among the tracee's records
// as records of sites of their own that record every register and the
// return address at sp; the tracer hooks their returns with
// its own trampoline (frameRaw), as it does live.

// rawTrapSite is the first site id of the functions that stop the
// thread, far above the tracee's record sites'.
const rawTrapSite = 1 << 30

// regsWords is how many words unix.PtraceRegs is.
var regsWords = len(regWords(nil))

// rawEntry records the entry of s at a stop: the registers, the return
// address ret read at the entry, whether the return was hooked.
func (t *Tracer) rawEntry(tid int, regs *unix.PtraceRegs, s *site, hit *Hit, ret uint64, hooked bool) {
	r := &t.raw
	id, ok := r.trapIDs[s.addr]
	if !ok {
		if r.trapIDs == nil {
			r.trapIDs = map[uint64]uint32{}
		}
		id = rawTrapSite + uint32(len(r.trapIDs))
		r.trapIDs[s.addr] = id
		rs := rawSite(id, s)
		rs.Regs, rs.StackWords, rs.Hook = make([]int, regsWords), 1, true
		for i := range rs.Regs {
			rs.Regs[i] = 8 * i
		}
		r.out.Site(rs)
	}
	// The registers, then the return address at sp (recordedCaller:
	// raw capture is x86-64's, rawCapturable).
	vals := append(append(r.vals[:0], regWords(regs)[:]...), ret)
	h := uint64(0)
	if hooked {
		h = 1
	}
	r.vals = append(vals, h)
	t.rawNamed(tid)
	r.out.Record(RawRecord{Tid: tid, CPU: hit.CPU, Time: hit.Time, Site: id, Values: r.vals})
}

// rawReturn records a return through the tracer's trampoline at slot,
// as the tracee's trampoline records one (codegen.ReturnValues).
func (t *Tracer) rawReturn(tid int, regs *unix.PtraceRegs, slot uint64, hit *Hit) {
	r := &t.raw
	w := regWords(regs)
	r.vals = append(r.vals[:0], slot, w[resultOff/8], w[result2Off/8], 0)
	t.rawNamed(tid)
	r.out.Record(RawRecord{Tid: tid, CPU: hit.CPU, Time: hit.Time, Site: ReturnSite, Values: r.vals})
}

// rawNamed names thread tid if its name has not been given.
func (t *Tracer) rawNamed(tid int) {
	if r := &t.raw; !r.named[tid] {
		r.named[tid] = true
		r.out.ThreadName(tid, t.threadComm(tid))
	}
}
