package probe

import (
	"cmp"
	"fmt"
	"reflect"
	"slices"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/probedbg/probe/codegen"
	"github.com/probedbg/probe/fetch"
	"github.com/probedbg/probe/ring"
	"github.com/probedbg/probe/symbols"
)

// In-process probes: a jump-optimised entry whose probes only read
// registers, the words at sp and memory at a register (Args.Lower),
// and whose handlers only need the values (Handler.Recorded: print,
// count, hist), gets a record stub instead of a trap
// (codegen.RecordStub); its return probes and function tracer hook
// the return in the tracee too (inreturn.go). The thread writes a record
// into its own ring in memory shared with us and goes on: no stop. A
// goroutine of ours drains the rings every few milliseconds and runs the
// handlers on what the thread saw: its registers, stack words and the
// memory its stub copied, replayed through the same fetch-args and
// filter as a trapped hit, so the values print as they would have.
//
// What stays trapping, per probe, and why, is in Probe.Path.

// DefaultRingSize is each thread's ring, in bytes, when a full ring
// drops its records: it absorbs a burst the drain is late for.
const DefaultRingSize = 16 << 20

// DefaultWaitingRingSize is each thread's ring when a full ring's thread
// waits for room (Tuning.WaitForRoom): nothing is lost either way, and a
// ring that size keeps ~40,000 calls of function_graph, a few of the
// drain's passes. The pages a ring has are mapped for the thread ahead
// of it and freed at the end, a few µs each, and a thread that records
// flat out goes through all of them: probe record of Lua under
// function_graph took 129 ms of CPU with 16 MiB rings and 102 with 4
// (wall 120 and 100 ms, medians of 9, side by side, no wait either way);
// 2M calls of a one-line function, ~10 ms of CPU less, a few ms waited
// at times.
const DefaultWaitingRingSize = 4 << 20

// defaultRings is how many threads get a ring; the rest count as lost.
const defaultRings = 512

// recordingState is why sites do not record in the tracee, and what
// their stubs counted.
type recordingState struct {
	noRingsWhy string // why there are no rings, once ensureRings found a reason
	// stoppedWhy is why no site records in the tracee any more, once a
	// thread came that would share a ring (stopRecording).
	stoppedWhy string
	// switcher: whether program m calls swapcontext (switchesStacks).
	switcher struct {
		m   *symbols.Module
		yes bool
	}
	copyFaults atomic.Int64 // stubs' copies of memory that faulted (memread.go)
}

// inproc is one process's rings and the code that writes them.
type inproc struct {
	rings    *ring.Rings
	clock    *ring.Clock
	routines []uint64 // copies of codegen.RecordRoutine's code, one within a call's reach of each stub
	// The return trampoline the hooks write (the first copy's), and its
	// int3.
	trampoline, trap uint64
	size             int           // the routine's length
	prefaulting      chan struct{} // closed when the rings' owner pages are faulted in; nil once waited for
	sites            map[uint32]*recordSite
	mapsSeen         time.Time // when the table of readable memory was last written (lookAtMemory)
	nextID           uint32
	freed            map[int]uint64 // records lost in rings given back, by thread
	gone             map[int]bool   // threads gone whose rings are to be given back once drained
	tids             []int          // drainUntil's, reused
	vforked          map[int]int    // a vfork child sharing our memory -> the thread it stopped
	quiet            map[int]bool   // threads whose records are a vfork child's, not shown
	// The counters of tallying stubs (tally.go): how many words of each
	// ring's are taken, the sites that add to them, and what each thread's
	// held at the last look.
	tallyWords int
	tallied    []*recordSite
	tallyLast  map[int][]uint64
	// The replay of one record: registers and stack words as the
	// thread had them.
	regs   unix.PtraceRegs
	stack  stackWords
	env    fetch.HitEnv
	fields []fetch.Field
	hit    Hit
	// errnoOff is errno's place from the thread pointer, which the
	// trampoline records with each return (0: unknown), and errno the
	// value the return being replayed recorded.
	errnoOff int32
	errno    int32
	// The goroutine that shows waiting threads the tracer lives
	// (roomwait.go): closed to stop it, closed when it has.
	aliveStop, aliveDone chan struct{}
}

// recordSite is a site whose stub records: what the stub records is
// its code's (Regs, StackWords, Hook, Reads).
type recordSite struct {
	site      *site
	stub, end uint64 // the stub's code
	code      *codegen.RecordStub
	tallies   []siteTally // what the stub counts, if it counts instead of recording
	// filtered: the stub tests its probes' filters and records only what
	// one of them lets through; rejected is the word of ring.TallyOff that
	// counts the rest.
	filtered bool
	rejected int
}

// recordNeeds is what a site's stub records, and whether it hooks the
// return.
type recordNeeds struct {
	fetch.Inputs
	hook bool
	// tallies, if not nil, are what the stub counts instead: no record.
	tallies []siteTally
	// filter, if not nil, is tested before the record: what none of the
	// site's probes would let through is not recorded.
	filter *codegen.Filter
}

// stackKnown reports whether the call frame information has a rule for
// st's address: the compiler's own frame, sp a stack.
func stackKnown(st *site) bool {
	if st.module == nil {
		return false
	}
	_, ok := st.module.CallerRule(st.addr)
	return ok
}

// recordPlan says what st's stub must record, or why st traps.
func (t *Tracer) recordPlan(st *site) (need recordNeeds, why string) {
	traced, returns := t.cFunc(st)
	switch {
	case t.tuning.NoInProcess:
		return need, "--no-inprocess"
	case t.recording.stoppedWhy != "":
		return need, t.recording.stoppedWhy
	case st.module == nil || isGo(st.module):
		return need, "Go code"
	case st.frame && len(st.probes) > 0:
		// The stub records the entry seen through the frame; the
		// probes want the registers at their address.
		return need, "a probe shares the address past the call of mcount"
	case !st.atEntry() && !st.frame && (traced || len(st.returns) > 0):
		return need, "not at a function's entry" // (a return is hooked at the entry's [sp])
	case !st.atEntry() && !st.frame && !stackKnown(st):
		// The stub runs on the thread's stack, below its red zone: at an
		// entry the ABI says that is free; inside a function, only code
		// whose frame the call frame information describes keeps sp a
		// stack a signal could land on (hand-written assembly may use
		// it as anything: TestExact's mov %rdi,%rsp).
		return need, "inside a function, where no call frame information describes its stack"
	case len(st.overrides) > 0:
		return need, overrideStops
	case !st.onlyEntryWork():
		return need, "a post-handler, capture or internal probe shares the address"
	case len(st.probes) == 0 && len(st.returns) == 0 && !traced:
		return need, "no probe"
	}
	if plan := t.tallyPlan(st, traced || returns); plan != nil {
		need.tallies = plan
		return need, ""
	}
	for _, p := range st.probes {
		if !p.handler.Recorded || p.handler.Post != nil {
			return need, fmt.Sprintf("%s: its actions need the thread stopped", p.Name())
		}
		low := p.argsAt(st).Lower()
		if low.NoRecord != "" {
			return need, fmt.Sprintf("%s: %s", p.Name(), low.NoRecord)
		}
		need.Add(low.Record)
	}
	for _, p := range st.returns {
		if why := t.returnRecordable(p); why != "" {
			return need, fmt.Sprintf("%s: %s", p.Name(), why)
		}
	}
	if traced && st.fn.args != nil && st.fn.args.varFormat >= 0 {
		return need, "its arguments after the format are read at a stop"
	}
	if traced && st.fn.args != nil && st.fn.args.arrays {
		return need, "the strings of its arrays are read at a stop"
	}
	if traced && returns && st.fn.args != nil && st.fn.args.outSlot > 0 {
		return need, "the buffer it fills is read at its return, a stop"
	}
	if traced && st.fn.args != nil {
		low := st.fn.args.params.Lower()
		if low.NoRecord != "" {
			return need, "--args: " + low.NoRecord
		}
		need.Add(low.Record)
	}
	if !traced && !returns && len(st.returns) == 0 {
		need.filter = siteFilter(st)
	}
	// The return address, for the caller's name or the return hook.
	if traced {
		need.Add(callerInputs())
	}
	if returns || len(st.returns) > 0 {
		if why := t.switchesStacks(); why != "" {
			return need, why
		}
		need.Add(hookInputs())
		need.hook = true
	}
	return need, ""
}

// switchesStacks says, if the program calls swapcontext or its kin,
// that returns are hooked by the tracer: its call stacks follow a thread
// from stack to stack (stackswitch.go), the tracee's in-process shadow
// stack does not, and would lose the returns of a stack left. Only the
// program's own imports count: libraries that can switch stacks but
// rarely do (OpenSSL's async jobs) would take every program that links
// them off the fast path; where one does switch, returns are lost and
// reported, and every thread still returns home.
func (t *Tracer) switchesStacks() string {
	m := t.space.Main()
	if m == nil {
		return ""
	}
	if t.recording.switcher.m != m.Module { // (read once a program)
		t.recording.switcher.m, t.recording.switcher.yes = m.Module, m.Imports("swapcontext", "setcontext")
	}
	if t.recording.switcher.yes {
		return fmt.Sprintf("%s switches stacks (swapcontext): returns are hooked by the tracer", m.Name)
	}
	return ""
}

// recordFits reports whether st still records what its stub rs was made
// for.
func (t *Tracer) recordFits(st *site, rs *recordSite) bool {
	need, why := t.recordPlan(st)
	c := rs.code
	switch {
	case why != "":
		return false
	case need.tallies != nil || rs.tallies != nil:
		return sameTallies(need.tallies, rs.tallies)
	case need.Words > c.StackWords || need.hook != c.Hook || !reflect.DeepEqual(need.filter, c.Filter):
		return false
	}
	for _, r := range need.Reads {
		if !slices.Contains(c.Reads, r) {
			return false
		}
	}
	for _, off := range need.Regs {
		if !slices.Contains(c.Regs, off) {
			return false
		}
	}
	return true
}

// ensureRings maps the rings, once; nil (with t.recording.noRingsWhy set) where
// in-process probes cannot work here. The routine goes near each stub
// (routineNear).
func (t *Tracer) ensureRings(anchor int, held []int) *inproc {
	if t.inproc != nil || t.recording.noRingsWhy != "" {
		return t.inproc
	}
	why := func() string {
		switch {
		case readsFSBase && !hasFSGSBase():
			return "the kernel does not let a thread read its %fs base (FSGSBASE)"
		case !t.proc.SamePidNamespace():
			return "the process is in another pid namespace"
		case t.proc.Seccomp():
			// The rings are mapped by system calls run in a thread.
			return "a thread runs under seccomp"
		}
		if why := ring.InvariantTSC(); why != "" {
			return why
		}
		return ""
	}()
	if why != "" {
		t.recording.noRingsWhy = why
		return nil
	}
	tidOff, why := t.findTidOffset(append([]int{anchor}, held...))
	if why != "" {
		t.recording.noRingsWhy = why
		return nil
	}
	clock, err := ring.NewClock(t.now)
	if err != nil {
		t.recording.noRingsWhy = err.Error()
		return nil
	}
	l := ring.Layout{Slots: defaultRings, RingSize: uint64(t.ringSize()), TidOff: tidOff}
	if cpuFromRseq {
		l.CPUOff = t.rseqCPUOffset()
	}
	if err := l.Check(); err != nil {
		t.recording.noRingsWhy = err.Error()
		return nil
	}
	// Anywhere the kernel likes: the stubs reach the rings by their
	// absolute address, and gigabytes of them near the program could
	// cover an address it holds unmapped.
	addr, mem, err := t.proc.MapShared(anchor, 0, l.Size())
	if err != nil {
		t.recording.noRingsWhy = fmt.Sprintf("map the rings: %v", err)
		return nil
	}
	l.Base = addr
	t.maps.made = append(t.maps.made, mappedRange{addr, l.Size()})
	t.inproc = t.newInproc(ring.New(mem, l), clock)
	// Only the first record's faults are at stake. The pages are
	// faulted in on another thread while the detours are written (~3 ms
	// of Lua's start, in the kernel), and waited for before any thread
	// runs (prefaulted).
	pages, done := t.inproc.rings.OwnerPages(), make(chan struct{})
	t.inproc.prefaulting = done
	go func() {
		defer close(done)
		t.proc.Prefault(pages)
	}()
	if off, err := t.errnoOffset(); err == nil && int64(off) == int64(int32(off)) && off != 0 {
		t.inproc.errnoOff = int32(off)
	}
	t.inproc.size = (&codegen.RecordRoutine{Layout: l}).Size()
	t.lookAtMemory(true)
	t.startWaiting(t.inproc)
	// Records are read after their thread may be gone: the names now
	// (then of each new thread as it starts, in dispatch).
	for _, tid := range append([]int{anchor}, held...) {
		t.threadComm(tid)
	}
	return t.inproc
}

// readControlBlock reads buf from start, and returns where in it what
// it read begins, -1 if nothing could be. Below the thread pointer
// (arm64), the search's start may lie before the mapping that holds the
// control block (the main thread's sits near the start of the dynamic
// linker's: Lua's did): then the pages from there up to tp are read.
func (t *Tracer) readControlBlock(buf []byte, start, tp int64) int {
	if n, _ := t.proc.ReadAt(buf, start); n == len(buf) {
		return 0
	}
	if start >= tp {
		return -1
	}
	for cut := start&^0xfff + 0x1000; cut < tp; cut += 0x1000 {
		if n, _ := t.proc.ReadAt(buf[cut-start:], cut); n == len(buf[cut-start:]) {
			return int(cut - start)
		}
	}
	return -1
}

// rseqCPUOffset is where each thread's CPU number is, from its thread
// pointer: the cpu_id (at 4) of the struct rseq the C library registered
// for it, which the kernel keeps up to date. glibc 2.35 and later export
// its offset as __rseq_offset, and __rseq_size, 0 where it registered
// none. 0: not known.
func (t *Tracer) rseqCPUOffset() int32 {
	for _, m := range t.space.Mapped {
		off, ok := m.Lookup("__rseq_offset")
		size, ok2 := m.Lookup("__rseq_size")
		if !ok || !ok2 || off.Addr == 0 || size.Addr == 0 {
			continue
		}
		o, ok := t.readWord(off.Addr + m.Bias)
		n, ok2 := t.readWord(size.Addr + m.Bias)
		if !ok || !ok2 || uint32(n) == 0 {
			return 0
		}
		if cpu := int64(o) + 4; cpu == int64(int32(cpu)) && cpu != 0 {
			return int32(cpu)
		}
		return 0
	}
	return 0
}

// ringSize is each thread's ring in bytes: Tuning.RingSize, or the
// default of whether threads wait for room.
func (t *Tracer) ringSize() int {
	switch {
	case t.tuning.RingSize > 0:
		return t.tuning.RingSize
	case t.tuning.WaitForRoom:
		return DefaultWaitingRingSize
	}
	return DefaultRingSize
}

// findTidOffset finds where the thread control block at each thread's
// thread pointer holds its thread id: glibc's struct pthread keeps it at
// 0x2d0 from the %fs base on x86-64, 0x670 below tpidr_el0 on arm64
// (glibc 2.36-2.41); elsewhere the one offset, among tidSearch's, where
// every thread's id is.
func (t *Tracer) findTidOffset(tids []int) (int32, string) {
	const span = tidSearchEnd - tidSearch
	var common []int32
	for i, tid := range tids {
		var regs unix.PtraceRegs
		if err := t.proc.GetRegs(tid, &regs); err != nil {
			return 0, fmt.Sprintf("read thread %d's registers: %v", tid, err)
		}
		tp, err := t.proc.ThreadPointer(tid, &regs)
		if err != nil || tp == 0 {
			return 0, fmt.Sprintf("thread %d has no thread control block (thread pointer 0)", tid)
		}
		buf := make([]byte, span)
		from := t.readControlBlock(buf, int64(tp)+tidSearch, int64(tp))
		if from < 0 {
			return 0, fmt.Sprintf("cannot read thread %d's control block", tid)
		}
		var here []int32
		for at := from; at+4 <= span; at += 4 {
			off := int32(at + tidSearch)
			if *(*uint32)(unsafe.Pointer(&buf[at])) == uint32(tid) && (i == 0 || slices.Contains(common, off)) {
				here = append(here, off)
			}
		}
		common = here
	}
	switch {
	case slices.Contains(common, glibcTidOff):
		return glibcTidOff, ""
	case len(common) == 1:
		return common[0], ""
	}
	return 0, "cannot tell where the thread control block keeps the thread id"
}

// recordStub returns st's record stub (Routine and Next to be filled
// in, once its place is known), or nil
// with the reason kept in st.trapWhy. The rings are made already
// (prepareRings).
func (t *Tracer) recordStub(st *site) (*codegen.RecordStub, *recordSite) {
	need, why := t.recordPlan(st)
	if why == "" && t.inproc == nil {
		why = cmp.Or(t.recording.noRingsWhy, "no rings")
	}
	if why != "" {
		st.trapWhy = why
		return nil, nil
	}
	in := t.inproc
	if need.tallies != nil {
		code, ok := in.placeTallies(need.tallies)
		if !ok {
			st.trapWhy = "the rings' counters are all taken"
			return nil, nil
		}
		in.nextID++
		rec := &codegen.RecordStub{Site: in.nextID, Tallies: code, Rings: in.rings.Layout().Base, FrameEntry: st.frame, FrameAbove: st.frameAbove, FrameKey: st.frameKey}
		return rec, &recordSite{site: st, code: rec, tallies: need.tallies}
	}
	in.nextID++
	rec := &codegen.RecordStub{Site: in.nextID, Regs: need.Regs, StackWords: need.Words, Hook: need.hook,
		Reads: need.Reads, Rings: in.rings.Layout().Base, FrameEntry: st.frame, FrameAbove: st.frameAbove, FrameKey: st.frameKey}
	rs := &recordSite{site: st, code: rec}
	if need.filter != nil && in.tallyWords < ring.TallyWords {
		rec.Filter, rec.Rejected = need.filter, in.tallyWords
		rs.filtered, rs.rejected = true, in.tallyWords
		in.tallyWords++
	}
	return rec, rs
}

// newInproc is t's in-process state with rings and clock, nothing
// placed yet.
func (t *Tracer) newInproc(rings *ring.Rings, clock *ring.Clock) *inproc {
	rings.SetPid(t.pid) // for the stubs' reads of memory
	in := &inproc{
		rings: rings, clock: clock,
		sites: map[uint32]*recordSite{}, tallyLast: map[int][]uint64{}, freed: map[int]uint64{}, gone: map[int]bool{}, vforked: map[int]int{}, quiet: map[int]bool{},
	}
	in.env = fetch.HitEnv{Mem: &in.stack, Symbolize: t.symbolize}
	return in
}

// routineNear returns a copy of the record routine within a call's reach
// of at (a stub's place), placing one in the XOL area near at if none is:
// stubs live near their module, and modules are far apart.
func (t *Tracer) routineNear(anchor int, at uint64) (uint64, error) {
	in := t.inproc
	for _, r := range in.routines {
		if within(r, at, xolReach) {
			return r, nil
		}
	}
	base, slots, err := t.allocDetour(anchor, at, in.size)
	if err != nil {
		return 0, fmt.Errorf("place the record routine: %w", err)
	}
	code, err := (&codegen.RecordRoutine{Layout: in.rings.Layout(), Trampoline: in.trampoline, Errno: in.errnoOff}).Code(base)
	if err == nil {
		err = t.writeSlots([]slotWrite{{base, code}})
	}
	if err != nil || !within(base, at, xolReach) {
		t.freeSlots(base, slots)
		return 0, fmt.Errorf("place the record routine near %#x: %v", at, err)
	}
	in.routines = append(in.routines, base)
	if in.trampoline == 0 {
		in.trampoline, in.trap = codegen.Trampoline(base), codegen.TrampolineTrap(base)
	}
	return base, nil
}

// prepareRings makes the rings if a site about to be optimised
// records; the threads are held.
func (t *Tracer) prepareRings(anchor int, held []int, sites func(func(*site) bool)) {
	for st := range sites {
		if _, why := t.recordPlan(st); why == "" {
			t.ensureRings(anchor, held)
			return
		}
	}
}

// prefaulted waits for the rings' owner pages to be faulted in
// (ensureRings), if they are being.
func (in *inproc) prefaulted() {
	if in != nil && in.prefaulting != nil {
		<-in.prefaulting
		in.prefaulting = nil
	}
}

// retireRings hands on what the rings hold, frees their pages and
// forgets them: at the end, or at an exec (the new program has none).
func (t *Tracer) retireRings() {
	in := t.inproc
	if in == nil {
		t.recording.noRingsWhy = ""
		return
	}
	in.prefaulted() // (not to fault in pages given back)
	t.drainAll()
	in.stopWaiting()
	r := t.top()
	r.drain.lostPast = addLost(r.drain.lostPast, in.rings.Lost(in.freed))
	r.drain.waitedPast += in.clock.Duration(in.rings.Waited())
	in.rings.Release()
	t.inproc, t.recording.noRingsWhy = nil, ""
}

func addLost(a, b ring.Lost) ring.Lost {
	out := ring.Lost{Full: map[int]uint64{}, NoRing: a.NoRing + b.NoRing, NoTid: a.NoTid + b.NoTid}
	for _, m := range []map[int]uint64{a.Full, b.Full} {
		for tid, n := range m {
			out.Full[tid] += n
		}
	}
	return out
}

// RecordsLost says what the in-process probes' rings could not hold
// (read it after Wait or Detach): by thread, records dropped on a full
// ring; and the hits of threads that found no ring, or whose thread id
// could not be read.
func (t *Tracer) RecordsLost() ring.Lost {
	var l ring.Lost
	t.withHandlers(func() {
		l = t.drain.lostPast
		for _, tr := range t.family() {
			if in := tr.inproc; in != nil {
				l = addLost(l, in.rings.Lost(in.freed))
			}
		}
	})
	return l
}
