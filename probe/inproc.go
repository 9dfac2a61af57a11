package probe

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"maps"
	"os"
	"reflect"
	"slices"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/probedbg/probe/codegen"
	"github.com/probedbg/probe/fetch"
	"github.com/probedbg/probe/ring"
	"github.com/probedbg/probe/tracee"
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

// DefaultRingSize is each thread's ring, in bytes.
const DefaultRingSize = 16 << 20

// defaultRings is how many threads get a ring; the rest count as lost.
const defaultRings = 512

// inproc is one process's rings and the code that writes them.
type inproc struct {
	rings    *ring.Rings
	clock    *ring.Clock
	routines []uint64 // copies of codegen.RecordRoutine's code, one within a call's reach of each stub
	// The return trampoline the hooks write (the first copy's), and its
	// int3.
	trampoline, trap uint64
	size             int // the routine's length
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

// stackWords serves reads of the words recorded at sp, and of the
// memory the stub copied (snippets).
type stackWords struct {
	sp     uint64
	words  []uint64
	snips  []snippet
	nsnips int // in use
}

// snippet is memory a stub copied: got of want bytes at addr (fewer: the
// copy faulted there). A string copied whole to its bound was cut there:
// it reads on as NULs.
type snippet struct {
	addr      uint64
	data      []byte
	got, want int
	str       bool
}

// fromSnippet serves a read at addr from the snippets, if one has it:
// from the bytes a snippet copied; or, with tails, past the end of a
// string copied whole to its bound, which reads on as NULs up to the
// longest string a fetch reads (only that: another read there is of
// other memory, not recorded).
func (s *stackWords) fromSnippet(p []byte, addr uint64, tails bool) (int, bool) {
	for i := range s.snips[:s.nsnips] {
		sn := &s.snips[i]
		cut := sn.str && sn.got == sn.want
		end := sn.addr + uint64(sn.want)
		if tails && cut {
			end = sn.addr + fetch.MaxStringSize
		}
		if addr < sn.addr || addr >= end {
			continue
		}
		n := 0
		for ; n < len(p); n++ {
			switch o := addr - sn.addr + uint64(n); {
			case o < uint64(sn.got):
				p[n] = sn.data[o]
			case cut:
				p[n] = 0
			default:
				return n, true
			}
		}
		return n, true
	}
	return 0, false
}

// ReadAt reads what the stub copied: the memory a read copied, the
// words at sp, or the NULs past a string cut at its bound, in that order.
func (s *stackWords) ReadAt(p []byte, addr int64) (int, error) {
	if n, ok := s.fromSnippet(p, uint64(addr), false); ok {
		return s.snipped(p, addr, n)
	}
	if n, err := s.fromStack(p, addr); n > 0 || s.tailless(uint64(addr)) {
		return n, err
	}
	n, _ := s.fromSnippet(p, uint64(addr), true)
	return s.snipped(p, addr, n)
}

// snipped is ReadAt's answer for n bytes of p read from a snippet.
func (s *stackWords) snipped(p []byte, addr int64, n int) (int, error) {
	if n < len(p) {
		return n, fmt.Errorf("%#x: the copy faulted", uint64(addr)+uint64(n))
	}
	return n, nil
}

// tailless reports whether no string's NUL tail covers addr.
func (s *stackWords) tailless(addr uint64) bool {
	_, ok := s.fromSnippet(nil, addr, true)
	return !ok
}

// fromStack reads the words recorded at sp.
func (s *stackWords) fromStack(p []byte, addr int64) (int, error) {
	n := 0
	for n < len(p) {
		at := uint64(addr) + uint64(n)
		i := (at - s.sp) / 8
		if at < s.sp || i >= uint64(len(s.words)) {
			break
		}
		p[n] = byte(s.words[i] >> (8 * ((at - s.sp) % 8)))
		n++
	}
	if n < len(p) {
		return n, fmt.Errorf("%#x: not recorded", uint64(addr)+uint64(n))
	}
	return n, nil
}

func (s *stackWords) WriteAt(p []byte, addr int64) (int, error) {
	return 0, fmt.Errorf("%#x: a record is read-only", addr)
}

// regWords is r as words, the one at byte offset off word off/8: as a
// stub records registers.
func regWords(r *unix.PtraceRegs) *[unsafe.Sizeof(unix.PtraceRegs{}) / 8]uint64 {
	return (*[unsafe.Sizeof(unix.PtraceRegs{}) / 8]uint64)(unsafe.Pointer(r))
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

// recordPlan says what st's stub must record, or why st traps.
func (t *Tracer) recordPlan(st *site) (need recordNeeds, why string) {
	traced, returns := t.cFunc(st)
	switch {
	case t.tuning.NoInProcess:
		return need, "--no-inprocess"
	case t.noRecordWhy != "":
		return need, t.noRecordWhy
	case st.module == nil || isGo(st.module):
		return need, "Go code"
	case st.addr != st.sym.Addr+st.module.Bias:
		return need, "not at a function's entry"
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
		low := p.args.Lower()
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
	if t.switcher.m != m.Module { // (read once a program)
		t.switcher.m, t.switcher.yes = m.Module, m.Imports("swapcontext", "setcontext")
	}
	if t.switcher.yes {
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

// ensureRings maps the rings, once; nil (with t.inprocWhy set) where
// in-process probes cannot work here. The routine goes near each stub
// (routineNear).
func (t *Tracer) ensureRings(anchor int, held []int) *inproc {
	if t.inproc != nil || t.inprocWhy != "" {
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
		t.inprocWhy = why
		return nil
	}
	tidOff, why := t.findTidOffset(append([]int{anchor}, held...))
	if why != "" {
		t.inprocWhy = why
		return nil
	}
	clock, err := ring.NewClock(t.now)
	if err != nil {
		t.inprocWhy = err.Error()
		return nil
	}
	l := ring.Layout{Slots: defaultRings, RingSize: uint64(t.ringSize()), TidOff: tidOff}
	if cpuFromRseq {
		l.CPUOff = t.rseqCPUOffset()
	}
	if err := l.Check(); err != nil {
		t.inprocWhy = err.Error()
		return nil
	}
	// Anywhere the kernel likes: the stubs reach the rings by their
	// absolute address, and gigabytes of them near the program could
	// cover an address it holds unmapped.
	addr, mem, err := t.proc.MapShared(anchor, 0, l.Size())
	if err != nil {
		t.inprocWhy = fmt.Sprintf("map the rings: %v", err)
		return nil
	}
	l.Base = addr
	t.mapped = append(t.mapped, mappedRange{addr, l.Size()})
	t.inproc = t.newInproc(ring.New(mem, l), clock)
	t.proc.Prefault(t.inproc.rings.OwnerPages()) // only the first record's faults are at stake
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

// ringSize is each thread's ring in bytes: Tuning.RingSize, or the default.
func (t *Tracer) ringSize() int {
	if t.tuning.RingSize > 0 {
		return t.tuning.RingSize
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
		why = cmp.Or(t.inprocWhy, "no rings")
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
		rec := &codegen.RecordStub{Site: in.nextID, Tallies: code, Rings: in.rings.Layout().Base}
		return rec, &recordSite{site: st, code: rec, tallies: need.tallies}
	}
	in.nextID++
	rec := &codegen.RecordStub{Site: in.nextID, Regs: need.Regs, StackWords: need.Words, Hook: need.hook,
		Reads: need.Reads, Rings: in.rings.Layout().Base}
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

// startDrain starts the goroutine that drains the rings, if there are
// any, once Start is done with the tracer's state: from then on the
// drain and the loop take turns (withHandlers).
func (t *Tracer) startDrain() {
	if t.inproc == nil && !t.follow || t.drainStop != nil {
		return
	}
	t.drainStop, t.drainDone = make(chan struct{}), make(chan struct{})
	go func() {
		defer close(t.drainDone)
		defer func() {
			if r := recover(); r != nil {
				// A handler's panic (ours, or a library user's): the
				// ptrace thread takes it over and detaches, as from its
				// own (serve).
				go t.do(func(int) error { panic(r) })
			}
		}()
		wait := time.Millisecond
		var taken <-chan struct{} // the output's room, when it had none
		for {
			select {
			case <-t.drainStop:
				return
			case <-time.After(wait):
			case <-taken:
			}
			n, woke := t.drainPass()
			// Busy rings are drained every millisecond; idle ones
			// less often, up to every 20.
			wait = min(20*time.Millisecond, max(time.Millisecond, wait*2))
			if n > 0 {
				wait = time.Millisecond
			}
			if n >= drainPassMax || woke {
				wait = 0 // more waiting, or a thread that waits for room
			}
			if taken = t.noRoom(); taken != nil {
				wait = 20 * time.Millisecond // (or when it makes room)
			}
		}
	}()
}

// drainPassMax bounds a pass of the draining goroutine: between two,
// the pages the threads are about to write are mapped for them.
const drainPassMax = 1 << 14

// drainPass drains at most drainPassMax records of each process of the
// family, then has the pages of their rings that their threads are about
// to write for the first time mapped in the tracee (ring.Rings.Ahead):
// outside the lock, as it takes ~1 ms a megabyte. woke: it woke a
// thread that waited for room.
func (t *Tracer) drainPass() (n int, woke bool) {
	var ahead []ringAhead
	t.withHandlers(func() {
		before := t.wakes()
		n = t.drainFamily(drainPassMax)
		woke = t.wakes() != before
		ahead = t.ringsAhead()
	})
	for _, a := range ahead {
		a.proc.Prefault(a.pages) // only a first write's fault is at stake
	}
	return n, woke
}

// wakes is ring.Rings.Wakes of t and the processes it follows. The
// caller holds hmu.
func (t *Tracer) wakes() uint64 {
	var n uint64
	for _, tr := range t.family() {
		if tr.inproc != nil {
			n += tr.inproc.rings.Wakes()
		}
	}
	return n
}

// stopDrain stops the draining goroutine, drains what is left and gives
// back the rings' memory.
func (t *Tracer) stopDrain() {
	if t.drainStop != nil {
		close(t.drainStop)
		<-t.drainDone
		t.drainStop = nil
	}
	t.withHandlers(t.retireRings)
}

// withHandlers runs fn holding the lock under which handlers run: the
// ptrace loop's and the drain's hits never run at once. A followed
// process's are under the root's lock.
func (t *Tracer) withHandlers(fn func()) {
	mu := &t.top().hmu
	mu.Lock()
	defer mu.Unlock()
	fn()
}

// RecordOutput is where the handlers of in-process probes' records send
// them, as the drain sees it.
type RecordOutput interface {
	// Room is how many records it can take now.
	Room() int
	// Written is how many records it has written so far: its progress.
	Written() uint64
	// Taken is closed when it next makes room.
	Taken() <-chan struct{}
}

// SetRecordOutput tells the tracer about its handlers' output: the drain
// hands them no more records than it has room for, leaving the rest in
// the rings, which hold them, rather than have them dropped downstream,
// and waits for room as long as the output makes progress.
func (t *Tracer) SetRecordOutput(out RecordOutput) error {
	return t.do(func(int) error {
		t.recordOut = out
		return nil
	})
}

// written is how many records the output has written so far.
func (t *Tracer) written() uint64 {
	if out := t.top().recordOut; out != nil {
		return out.Written()
	}
	return 0
}

// room is how many records the handlers can take now; -1: no bound.
func (t *Tracer) room() int {
	out := t.top().recordOut
	if out == nil {
		return -1
	}
	return max(out.Room(), 0)
}

// noRoom is, when the output has no room, a channel closed when it
// makes some; else nil.
func (t *Tracer) noRoom() <-chan struct{} {
	out := t.top().recordOut
	if out == nil {
		return nil
	}
	taken := out.Taken() // before the look: room made after it closes it
	if out.Room() > 0 {
		return nil
	}
	return taken
}

// waitRoom waits until the output has made room, or for at most d.
func (t *Tracer) waitRoom(d time.Duration) {
	taken := t.noRoom()
	if taken == nil {
		return // made since the caller looked
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-taken:
	case <-timer.C:
	}
}

// drainRecords runs the handlers of the committed records, as many as
// the handlers have room for and at most limit (0: no bound) (all:
// whenever stamped, as drainUpTo); the caller holds hmu.
func (t *Tracer) drainRecords(all bool, limit int) int {
	room := t.room()
	if t.inproc == nil || room == 0 {
		return 0
	}
	if limit > 0 && (room < 0 || room > limit) {
		room = limit
	}
	return t.drainUpTo(max(room, 0), all)
}

// drainUpTo runs the handlers of at most limit committed records (0: no
// bound), those stamped before the pass began unless all (ring.Drain,
// DrainAll), and gives back the rings of gone threads it emptied.
func (t *Tracer) drainUpTo(limit int, all bool) int {
	in := t.inproc
	in.clock.Refresh()
	t.lookAtMemory(false)
	drain := in.rings.Drain
	if all {
		drain = in.rings.DrainAll
	}
	n := drain(limit, t.deliverRecord)
	t.collectTallies()
	if len(in.gone) > 0 {
		t.freeGone()
	}
	return n
}

// drainUntil runs the handlers of what the threads recorded before
// stamp, in the order they recorded it, then of the rest of tid's
// records: tid is stopped, or gone, at stamp, for a hit or an exit that
// comes after them. It waits for the room.
func (t *Tracer) drainUntil(tid int, stamp uint64) {
	in := t.inproc
	in.tids = t.proc.Tids(in.tids[:0])
	if !slices.Contains(in.tids, tid) {
		in.tids = append(in.tids, tid) // gone
	}
	t.untilDrained(func(limit int) bool {
		return in.rings.DrainBefore(in.tids, stamp, limit, t.deliverRecord) == limit && limit != 0
	})
	t.drainThread(tid)
}

// drainThread runs the handlers of every record tid has committed: tid
// is stopped for a hit that comes after them, and waits for the room.
func (t *Tracer) drainThread(tid int) {
	t.untilDrained(func(limit int) bool {
		_, more := t.inproc.rings.DrainThread(tid, limit, t.deliverRecord)
		return more
	})
}

// DrainRecords runs the handlers of the records the tracee has
// committed until now (in-process probes' hits are handed on a few
// milliseconds late), one pass, as many as the output takes (a hot
// probe must not keep the caller waiting): before a caller changes what
// its handlers do with them, or reads what they counted.
func (t *Tracer) DrainRecords() {
	t.withHandlers(func() { t.drainFamily(0) })
}

// drainFamily is drainRecords of t and of every process it follows, at
// most limit records each (0: no bound); it returns how many records it
// handed on. The caller holds hmu.
func (t *Tracer) drainFamily(limit int) int {
	n := 0
	for _, tr := range t.family() {
		n += tr.drainRecords(false, limit)
	}
	return n
}

// ringAhead is the pages of a process's rings its threads are about to
// write for the first time (ring.Rings.Ahead).
type ringAhead struct {
	proc  *tracee.Process
	pages []uint64
}

// ringsAhead is ring.Rings.Ahead of t and the processes it follows. The
// caller holds hmu.
func (t *Tracer) ringsAhead() []ringAhead {
	var all []ringAhead
	for _, tr := range t.family() {
		if tr.inproc == nil {
			continue
		}
		if pages := tr.inproc.rings.Ahead(); len(pages) > 0 {
			all = append(all, ringAhead{tr.proc, pages})
		}
	}
	return all
}

// family is t, the root, and the processes it follows.
func (t *Tracer) family() []*Tracer {
	return append([]*Tracer{t}, slices.Collect(maps.Values(t.followed))...)
}

// drainAll runs the handlers of every committed record, waiting for
// room. The caller holds hmu.
func (t *Tracer) drainAll() {
	if t.inproc != nil {
		t.untilDrained(func(limit int) bool { return t.drainUpTo(limit, true) > 0 })
	}
}

// untilDrained calls drain with how many records the handlers have room
// for (0: no bound) until it says there are no more, waiting for room
// while the output makes progress; after two seconds without any (a
// reader that stopped reading) it goes on with no bound, and the output
// drops and counts what it cannot take.
func (t *Tracer) untilDrained(drain func(limit int) (more bool)) {
	stuck, seen := time.Now(), t.written()
	for {
		room := t.room()
		if room == 0 {
			if w := t.written(); w != seen {
				stuck, seen = time.Now(), w
			}
			if time.Since(stuck) < 2*time.Second {
				t.waitRoom(10 * time.Millisecond)
				continue
			}
		}
		if !drain(max(room, 0)) {
			return
		}
		stuck = time.Now()
	}
}

// deliverRecord runs the handlers of one record's probes.
func (t *Tracer) deliverRecord(rec *ring.Record) {
	in := t.inproc
	if in.quiet[rec.Tid] {
		// A vfork child's hit: not reported, as the stopping path
		// does not report it (and uprobes do not).
		return
	}
	if rec.Site == codegen.ReturnRecord {
		in.regs = unix.PtraceRegs{}
		in.stack.sp, in.stack.words, in.stack.nsnips = 0, nil, 0
		t.replayReturn(rec, t.replayHit(rec))
		return
	}
	rs := in.sites[rec.Site]
	if rs == nil {
		return
	}
	in.regs = unix.PtraceRegs{}
	in.regs.SetPC(rs.site.addr)
	words := regWords(&in.regs)
	for i, off := range rs.code.Regs {
		if i < len(rec.Values) {
			words[off/8] = rec.Values[i]
		}
	}
	hooked, ok := in.stack.load(rec.Values, rs.code)
	if !ok {
		return
	}
	in.stack.sp = tracee.SP(&in.regs)
	hit := t.replayHit(rec)
	for _, p := range rs.site.probes {
		if !p.enabled.Load() {
			continue
		}
		p.hits.Add(1)
		if p.args != nil {
			in.fields = p.args.Fetch(t.envFor(hit), in.fields[:0])
			hit.Fields = in.fields
			if !p.args.Keep(in.fields) {
				continue
			}
		} else {
			hit.Fields = nil
		}
		if p.handler.Pre != nil {
			faultPoint("entry")
			hit.Probe, hit.Where = p, cmp.Or(p.shownAt, rs.site.where)
			p.handler.Pre(hit)
		}
	}
	hit.Fields = nil
	s := rs.site
	switch traced, returns := t.cFunc(s); {
	case traced && !returns:
		if caller, ok := recordedCaller(&in.regs, in.stack.words); ok {
			t.traceEntryOnly(&in.regs, s, hit, caller)
		}
	case rs.code.Hook:
		if ret, ok := recordedCaller(&in.regs, in.stack.words); ok {
			t.replayEnter(s, hit, ret, hooked)
		}
	}
}

// load takes a record's values after its registers: the stack words,
// whether the return was hooked, the memory copied. false: the record is
// short of what stub c records.
func (s *stackWords) load(vals []uint64, c *codegen.RecordStub) (hooked, ok bool) {
	at := len(c.Regs)
	if len(vals) < at+c.StackWords {
		return false, false
	}
	s.words = vals[at : at+c.StackWords]
	at += c.StackWords
	if c.Hook {
		if len(vals) <= at {
			return false, false
		}
		hooked = vals[at] == 1
		at++
	}
	s.nsnips = 0
	for _, r := range c.Reads {
		if len(vals) < at+r.Words() {
			return false, false
		}
		if s.nsnips == len(s.snips) {
			s.snips = append(s.snips, snippet{data: make([]byte, codegen.MemReadMax+8)})
		}
		sn := &s.snips[s.nsnips]
		s.nsnips++
		sn.addr, sn.want, sn.str = vals[at], r.Len, r.Len == codegen.MemReadMax
		sn.got = max(min(int(int64(vals[at+1])), r.Len), 0)
		for w, v := range vals[at+2 : at+r.Words()] {
			binary.LittleEndian.PutUint64(sn.data[8*w:], v)
		}
		at += r.Words()
	}
	return hooked, true
}

// replayHit is the hit of a record, its registers and stack words in
// in.regs and in.stack.
func (t *Tracer) replayHit(rec *ring.Record) *Hit {
	in := t.inproc
	in.hit = Hit{Pid: t.pid, Tid: rec.Tid, Comm: t.threadComm(rec.Tid), Time: in.clock.Time(rec.TSC), CPU: rec.CPU, Regs: &in.regs, Mem: &in.stack, tracer: t}
	if rec.CPU == ring.UnknownCPU {
		in.hit.CPU = t.cpuOf(rec.Tid) // no rseq area (arm64): where the thread runs now
	}
	return &in.hit
}

// leaveRecordCode takes a held thread inside the record routine or a
// stub back to the probed instruction, every register as it was (from
// the stub's saves): the original bytes go back before it runs again,
// and it runs the function from its start. A record it had committed is
// drained; one it had only reserved is not, nor counted lost: the call
// runs again, untraced. A thread in the return trampoline goes on to
// where the function returns. No step: a step over the stub's pushfq
// would save the trap flag for its popfq to set again once we are gone.
func (t *Tracer) leaveRecordCode(tid int) {
	in := t.inproc
	if in == nil || t.proc.GetRegs(tid, &t.regs) != nil {
		return
	}
	rip := t.regs.PC()
	var rw codegen.StubRewind
	to, back := uint64(0), false        // where the thread goes; back: a return
	stubAt := func(ret uint64) uint64 { // the probed instruction of the stub a call returns to
		for _, rs := range in.sites {
			if ret > rs.stub && ret <= rs.end {
				return rs.site.addr
			}
		}
		return 0
	}
	if r, ok := in.routineAt(rip); ok {
		ret, ok := t.routineReturn(&t.regs)
		switch {
		case codegen.Trampoline(r) != 0 && rip >= codegen.Trampoline(r) && rip <= codegen.TrampolineTrap(r):
			rw, back = codegen.TrampolineRewind(r, rip, tracee.SP(&t.regs), false)
		case !ok:
			return
		case codegen.Trampoline(r) != 0 && ret >= codegen.Trampoline(r) && ret < codegen.TrampolineTrap(r):
			rw, back = codegen.TrampolineRewind(r, rip, tracee.SP(&t.regs), true)
		default:
			rw, to = codegen.RoutineRewind(tracee.SP(&t.regs)), stubAt(ret)
		}
	}
	if to == 0 && !back {
		for _, rs := range in.sites {
			if r, ok := rs.code.Rewind(rs.stub, rip, tracee.SP(&t.regs)); ok {
				rw, to = r, rs.site.addr
				break
			}
		}
	}
	if rw.Saved {
		words := regWords(&t.regs)
		for i, off := range codegen.SavedRegs() {
			v, ok := t.readWord(rw.Area + uint64(8*i))
			if !ok {
				return
			}
			words[off/8] = v
		}
	}
	if back {
		// (arm64: x30 is the return address once the trampoline has
		// popped the frame, and as a ret leaves it.)
		if lr := linkRegister(&t.regs); !returnInSlot && lr != in.trampoline {
			to = lr
		} else {
			to = t.returnTo(tid, rw.SP-returnPops)
		}
		setLinkRegister(&t.regs, to)
	}
	if to == 0 {
		return
	}
	tracee.SetSP(&t.regs, rw.SP)
	t.regs.SetPC(to)
	// A thread stopped in a stub's process_vm_readv must not have the
	// kernel restart it where it goes now.
	tracee.NoRestart(&t.regs)
	if t.proc.SetRegs(tid, &t.regs) == nil {
		t.detourExits.Add(1)
	}
}

// inRecordCode reports whether rip is in a record stub or routine.
func (t *Tracer) inRecordCode(rip uint64) bool {
	in := t.inproc
	if in == nil {
		return false
	}
	if _, ok := in.routineAt(rip); ok {
		return true
	}
	for _, rs := range in.sites {
		if rip >= rs.stub && rip < rs.end {
			return true
		}
	}
	return false
}

// routineAt returns the copy of the record routine rip is in.
func (in *inproc) routineAt(rip uint64) (uint64, bool) {
	for _, r := range in.routines {
		if rip >= r && rip < r+uint64(in.size) {
			return r, true
		}
	}
	return 0, false
}

// returnTo is where a thread in the in-process trampoline returns, from
// the call whose frame's key is slot: the slot has the return address
// back (x86-64), or the thread's newest frame there has it.
func (t *Tracer) returnTo(tid int, slot uint64) uint64 {
	if w, ok := t.readWord(slot); ok && w != t.inproc.trampoline && returnInSlot {
		return w
	}
	frames := t.shadowOf(tid)
	for i := len(frames) - 1; i >= 0; i-- {
		if frames[i].Slot == slot {
			return frames[i].Ret &^ ring.UnhookedBit
		}
	}
	return 0
}

// recordThreadGone gives tid's ring back once what it holds is handed
// on: now, or after a later drain (then it reports true, and tid's comm
// is forgotten then).
func (t *Tracer) recordThreadGone(tid int) (later bool) {
	in := t.inproc
	if in == nil {
		return false
	}
	in.gone[tid] = true
	t.drainRecords(false, 0)
	t.freeGone()
	return in.gone[tid]
}

// freeGone gives back the rings of gone threads that are drained.
func (t *Tracer) freeGone() {
	in := t.inproc
	t.collectTallies() // what the gone threads counted, before their counters go
	for tid := range in.gone {
		if !in.rings.Drained(tid) {
			continue
		}
		delete(in.gone, tid)
		delete(t.comms, tid)
		delete(in.tallyLast, tid)
		if lost, ok := in.rings.Free(tid); ok && lost > 0 {
			in.freed[tid] += lost
		}
	}
}

// onClone stops in-process recording in the process if the new thread
// tid that thread parent made (stopped at its clone event) has no TLS of
// its own (clone without CLONE_SETTLS): it reads its parent's thread id
// where the stubs look for its own, and would write its parent's ring,
// and push its hooked returns on its parent's shadow stack, at the same
// time as the parent (a program's returns sent to another thread's
// callers).
func (t *Tracer) onClone(parent, tid int) {
	if t.inproc == nil || t.noRecordWhy != "" || t.proc.GetRegs(parent, &t.regs) != nil {
		return
	}
	if cloneSetsTLS(&t.regs, t.readWord) {
		return
	}
	why := fmt.Sprintf("thread %d has no TLS of its own (clone without CLONE_SETTLS)", tid)
	fmt.Fprintf(os.Stderr, "probe: %s: from now on every probe stops the thread\n", why)
	t.stopRecording(why)
}

// stopRecording turns every site that records in the tracee back into a
// stop, while threads run: the jmps become int3s (unoptimize); a thread
// inside a stub or detour goes on through it (the detours stay), and
// returns hooked in the tracee come back through its trampoline, each
// thread's from its own ring. No site records in the tracee after.
func (t *Tracer) stopRecording(why string) {
	t.noRecordWhy = why
	sts := t.recordSites()
	t.unoptimize(sts)
	for _, st := range sts {
		st.opt, st.trapWhy = nil, why
	}
	notePaths(sts...)
}

// recordSites are the sites whose jmp leads to a record stub.
func (t *Tracer) recordSites() []*site {
	var sts []*site
	for _, st := range t.sites {
		if st.opt != nil && st.opt.record != nil {
			sts = append(sts, st)
		}
	}
	return sts
}

// recordVfork notes that thread parent is stopped until its vfork child
// execs or exits: the child shares its control block, so what its ring
// gets meanwhile is the child's, not reported (as the trapping path).
func (t *Tracer) recordVfork(parent, child int) {
	if in := t.inproc; in != nil {
		t.drainAll()
		in.vforked[child] = parent
		in.quiet[parent] = true
	}
}

// recordVforkParentDone is recordVforkDone of the vfork child of thread
// parent, which is stopped at the end of its vfork.
func (t *Tracer) recordVforkParentDone(parent int) {
	if in := t.inproc; in != nil {
		for child, p := range in.vforked {
			if p == parent {
				t.recordVforkDone(child)
			}
		}
	}
}

// recordVforkDone ends what recordVfork began, at the child's exec or
// exit, or at the end of the parent's vfork, whichever comes first.
func (t *Tracer) recordVforkDone(child int) {
	in := t.inproc
	if in == nil {
		return
	}
	parent, ok := in.vforked[child]
	if !ok {
		return
	}
	t.drainAll()
	delete(in.vforked, child)
	delete(in.quiet, parent)
}

// retireRings hands on what the rings hold, frees their pages and
// forgets them: at the end, or at an exec (the new program has none).
func (t *Tracer) retireRings() {
	in := t.inproc
	if in == nil {
		t.inprocWhy = ""
		return
	}
	t.drainAll()
	in.stopWaiting()
	r := t.top()
	r.lostPast = addLost(r.lostPast, in.rings.Lost(in.freed))
	r.waitedPast += in.clock.Duration(in.rings.Waited())
	in.rings.Release()
	t.inproc, t.inprocWhy = nil, ""
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
		l = t.lostPast
		for _, tr := range t.family() {
			if in := tr.inproc; in != nil {
				l = addLost(l, in.rings.Lost(in.freed))
			}
		}
	})
	return l
}

// Path says how p's hits are taken: in the tracee (inProcess), or with a
// stop, and then why not in the tracee; in the tracee, why is
// "counted in the tracee" for a probe whose hits make no record (tally.go).
func (p *Probe) Path() (inProcess bool, why string) {
	p.pathMu.Lock()
	defer p.pathMu.Unlock()
	return p.inProcess, p.trapWhy
}

// path says whether st's hits record in the tracee, or else why not.
func (st *site) path() (inProcess bool, why string) {
	if st.opt != nil && st.opt.record != nil {
		if st.opt.record.tallies != nil {
			return true, "counted in the tracee"
		}
		return true, ""
	}
	if len(st.overrides) > 0 {
		return false, overrideStops
	}
	return false, cmp.Or(st.trapWhy, "not jump-optimised")
}

// notePaths records, for each probe at sites, whether it records in the
// tracee or traps, and why.
func notePaths(sites ...*site) {
	for _, st := range sites {
		rec, why := st.path()
		for _, p := range slices.Concat(st.probes, st.returns, st.retInsns, st.overrides) {
			p.pathMu.Lock()
			p.inProcess, p.trapWhy = rec, why
			p.pathMu.Unlock()
		}
	}
}

// FuncPaths says how the function tracer's entries are taken (read it
// after Ready): how many functions record in the tracee, and how many
// stop the thread, by why. As the jumps were placed: a program that has
// ended since still has its answer.
func (t *Tracer) FuncPaths() (inProcess int, stops map[string]int) {
	t.funcPaths.mu.Lock()
	defer t.funcPaths.mu.Unlock()
	return t.funcPaths.in, maps.Clone(t.funcPaths.stops)
}

// noteFuncPaths keeps what FuncPaths says, once the jumps are placed.
func (t *Tracer) noteFuncPaths() {
	in, stops := 0, map[string]int{}
	for _, st := range t.sites {
		if st.fn == nil {
			continue
		}
		if rec, why := st.path(); rec {
			in++
		} else {
			stops[why]++
		}
	}
	t.funcPaths.mu.Lock()
	t.funcPaths.in, t.funcPaths.stops = in, stops
	t.funcPaths.mu.Unlock()
}
