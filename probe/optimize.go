package probe

import (
	"bytes"
	"cmp"
	"fmt"
	"maps"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"github.com/probedbg/probe/codegen"
	"github.com/probedbg/probe/singlestep"
	"github.com/probedbg/probe/symbols"
)

// Jump optimisation, as the kernel's optprobes: a plain entry probe's int3
// becomes a jmp to a detour in the XOL area, which starts with an int3.
// The thread traps there with rip already on the copies of the
// instructions the jmp covers, followed by a jmp back, so the hit costs
// GETREGS + CONT: no SETREGS. Handlers still see rip at the probe address.
//
// The jmp spans several instructions, so it is written only while every
// thread is stopped and none is inside the range (at Start); probes added
// later stay int3 + boost. A site whose needs change (a return probe or
// post-handler added at its address) goes back to an int3 at its next hit
// (keepPlain). Detours are never freed: a thread may be in one, or in a signal handler
// that returns into one, long after the probe is gone; each ends in a
// jmp back to the original code.

// A return-hooked entry in C (a return probe, function_graph) gets a
// detour that hijacks the return address itself (codegen.Detour's
// ReturnHook): the tracer reads the return address from r11 (the
// thread's own r11 waits in the red zone) and, for a
// call it hooks, resumes without any write; for one it does not, it sets
// rip past the hijack. Go code never gets one: r11 is an argument there.

// jumpOpt is a site's jump optimisation.
type jumpOpt struct {
	detour *codegen.Detour
	base   uint64      // where the detour's code starts
	at     uint64      // the detour's int3
	skip   uint64      // on from the int3 without the return hook (Detour.Skip)
	copies uint64      // on for a thread that never ran the detour (Detour.Copies)
	stub   uint64      // its mailbox stub, in front of base, where the jmp goes; 0 if none
	record *recordSite // its record stub, in front of base, if it records in the tracee
	site   *site
}

// hook reports whether the detour hijacks the return address.
func (o *jumpOpt) hook() bool { return o.detour.ReturnHook != 0 }

// savesR11 reports whether the detour keeps the thread's %r11 in the red
// zone while %r11 holds the return address (a return hook, or a load of
// the return address alone).
func (o *jumpOpt) savesR11() bool { return o.detour.SavesR11() }

// origBytes is what the site's patch replaced: the byte under the int3,
// or every byte the jmp covers.
func (s *site) origBytes() []byte {
	if s.opt == nil {
		return s.orig
	}
	return coveredBytes(s.opt.detour)
}

// coveredBytes is the original code d's jmp covers.
func coveredBytes(d *codegen.Detour) []byte {
	b := make([]byte, 0, d.Covered)
	for _, in := range d.Insns {
		b = append(b, in.Bytes...)
	}
	return b
}

// onlyEntryWork reports whether a hit at s needs, besides the entry
// probes' handlers, at most a return hook or the return address: no
// post-handler, ret-instruction probe, capture, o: probe, Go return,
// unwinder or linker watch, none of which a detour can do.
func (s *site) onlyEntryWork() bool {
	return !s.post && len(s.retInsns) == 0 && len(s.captures) == 0 && len(s.overrides) == 0 && s.fnRet == nil && s.unwind == 0 && !s.linker
}

// plainEntry reports whether a hit at s needs nothing but the entry
// probes' handlers, so nothing sets the thread's registers.
func (s *site) plainEntry() bool {
	return s.onlyEntryWork() && len(s.returns) == 0 && s.fn == nil
}

// cFunc reports whether the function tracer traces s's C function, and
// with returns (function_graph) or not.
func (t *Tracer) cFunc(s *site) (traced, returns bool) {
	traced = s.fn != nil && !s.fn.isGo && t.ft != nil
	return traced, traced && t.ft.opts.Returns
}

// returnHookEntry reports whether a hit at s needs nothing but its entry
// probes' handlers and the return hook of a C function (its return probes,
// function_graph): what a return-hook detour does without register writes.
func (t *Tracer) returnHookEntry(s *site) bool {
	_, returns := t.cFunc(s)
	return s.onlyEntryWork() && (len(s.returns) > 0 || returns)
}

// callerEntry reports whether a hit at s needs nothing but its entry
// probes' handlers and the return address, to name the caller: a C
// function under the function tracer without function_graph. Its detour
// loads the return address into %r11 for the tracer (LoadReturn).
func (t *Tracer) callerEntry(s *site) bool {
	traced, returns := t.cFunc(s)
	return s.onlyEntryWork() && traced && !returns && len(s.returns) == 0
}

// fits reports whether s's needs are still what its detour o was made
// for.
func (t *Tracer) fits(s *site, o *jumpOpt) bool {
	switch {
	case o.record != nil:
		return t.recordFits(s, o.record)
	case o.hook():
		return t.returnHookEntry(s)
	case o.detour.LoadReturn:
		return t.callerEntry(s)
	}
	return s.plainEntry()
}

// loadedReturn is the return address a detour that only loads it (via)
// put in %r11 for a thread trapped at s, or 0.
func (t *Tracer) loadedReturn(s *site, via *jumpOpt, regs *unix.PtraceRegs) uint64 {
	if via != nil && via.detour.LoadReturn && t.callerEntry(s) {
		return scratch(regs)
	}
	return 0
}

// inReturnHook reports whether a thread trapped at s came through a
// return-hook detour (via) that may do the hijack for enter.
func (t *Tracer) inReturnHook(s *site, via *jumpOpt) bool {
	return via != nil && via.hook() && via.detour.ReturnHook == t.ret.trampoline && t.returnHookEntry(s)
}

// optimizeSites turns the plain entry sites into jumps, with every thread
// of the process stopped; anchor is already held. Where it cannot, the
// int3 stays: the result is the same, only slower.
func (t *Tracer) optimizeSites(anchor int) {
	held, ok := t.installHeld, true
	t.installHeld = nil
	defer func() {
		for _, tid := range held {
			t.proc.Cont(tid, 0)
		}
		if t.proc.TookDoorbell() {
			// Its command is still queued: ring again for the loop.
			unix.Kill(t.ownBell(), unix.SIGSTOP)
		}
	}()
	defer func() {
		notePaths(slices.Collect(maps.Values(t.sites))...)
		t.noteFuncPaths()
	}()
	if why := t.noJumps(); why != "" {
		for _, st := range t.sites {
			st.trapWhy = why
		}
		return
	}
	var cands []*site
	for _, st := range t.sites {
		want := len(st.probes) > 0 && st.plainEntry() || t.ret.trampoline != 0 && t.returnHookEntry(st) || t.callerEntry(st)
		if want && (!trapDetours || st.frame && !st.plainEntry()) {
			// (arm64, and past mcount's call, where a detour's hook
			// would read [sp]) A detour only for a stub that records.
			_, why := t.recordPlan(st)
			want, st.trapWhy = why == "", why
		}
		if st.opt == nil && want && st.module != nil && st.sym.Size > 0 && !isGo(st.module) {
			cands = append(cands, st)
		}
	}
	if len(cands) == 0 {
		return
	}
	// Planned before any thread is stopped for it: planning reads files
	// (a library's first sweep for branch targets takes milliseconds),
	// not the tracee. (Threads held since the first breakpoint went in
	// before Start stay held: holdForInstall.)
	addrs := make([]uint64, 0, len(t.sites))
	for a := range t.sites {
		addrs = append(addrs, a)
	}
	slices.Sort(addrs)
	plans := map[*site]*codegen.Detour{}
	ahead := t.jumps.ahead
	t.jumps.ahead = nil
	for i, p := range planDetours(cands, ahead) {
		if d := t.planDetour(cands[i], addrs, p); d != nil {
			plans[cands[i]] = d
		}
	}
	if len(plans) == 0 {
		return
	}
	if held == nil {
		held, ok = t.stopOthers(anchor)
	}
	if !ok {
		return
	}
	inside := func(rip uint64) bool {
		for st, d := range plans {
			if st.addr < rip && rip < st.addr+uint64(d.Covered) {
				return true
			}
		}
		return false
	}
	var rips []uint64
	for _, tid := range append(held, anchor) {
		rip, ok := t.stepOut(tid, inside)
		if !ok {
			return
		}
		rips = append(rips, rip)
	}
	t.prepareRings(anchor, held, maps.Keys(plans))
	t.optimizeAll(anchor, plans, rips)
	t.inproc.prefaulted() // before the threads go on
}

// optimizeLate gives sites added after the start (a probe added from
// the REPL or the library) what Start gives its own: a jump, a stub, a
// record in the tracee, with every thread held for it as at the start.
// Not while a thread is in the middle of a step of ours (its trap is
// still to come): then the int3 stays, as it does where anything else
// stands in the way.
func (t *Tracer) optimizeLate(anchor int) {
	if !t.isReady() || t.detached || anchor == 0 || len(t.step.threads) > 0 {
		return
	}
	// The anchor stopped for the doorbell may have met an int3 of ours
	// just before: its trap is still to be served, with rip one past it
	// (a step out of the range a jmp covers would swallow the trap and
	// run the bytes after the int3 as an instruction).
	if t.trapPending(anchor) || t.proc.GetRegs(anchor, &t.stop.regs) != nil || t.sites[t.stop.regs.PC()-singlestep.BreakpointPCAdjust] != nil {
		return
	}
	t.optimizeSites(anchor)
	t.top().startDrain() // if the rings are new (the root's drain drains all)
}

// noJumps says why no site gets a jmp, or "".
func (t *Tracer) noJumps() string {
	switch {
	case t.tuning.NoBoost:
		return "--no-boost"
	case t.tuning.NoOptimize:
		return "--no-optimize"
	case isGo(t.space.Main()):
		return "Go program"
	}
	return ""
}

// branchAt is where PlanDetour's reasons name a branch's address.
var branchAt = regexp.MustCompile(` at 0x[0-9a-f]+`)

// funcPlan is what codegen.PlanDetour says of a site's function.
type funcPlan struct {
	d      *codegen.Detour
	err    error
	unread bool // the function's code could not be read
}

// planQueue is the detour plans of a list of sites, made by whoever
// works on it: each function's analysis reads only its file.
type planQueue struct {
	sites []*site
	out   []funcPlan
	next  atomic.Int64
	wg    sync.WaitGroup
}

// start works on q on every CPU, and finds the branch targets of its
// modules, which planDetour asks next, meanwhile.
func (q *planQueue) start(cpus int) {
	seen := map[*symbols.Mapped]bool{}
	for _, st := range q.sites {
		if m := st.module; !seen[m] {
			seen[m] = true
			q.wg.Go(func() { m.BranchTargets() })
		}
	}
	for range min(cpus, len(q.sites)) {
		q.wg.Go(q.work)
	}
}

func (q *planQueue) work() {
	for i := int(q.next.Add(1) - 1); i < len(q.sites); i = int(q.next.Add(1) - 1) {
		q.out[i] = planFunc(q.sites[i])
	}
}

func newPlanQueue(sites []*site) *planQueue {
	return &planQueue{sites: sites, out: make([]funcPlan, len(sites))}
}

// planAhead starts the plans of sites just hooked (hookCandidates) on
// another thread, while the tracer goes on with the start (the
// trampoline, the mailbox, the probes still to add): they were all made
// at Start, ~5 ms of CPU on Lua's ~700 functions. planDetours finishes
// them.
func (t *Tracer) planAhead(sites []*site) {
	if t.noJumps() != "" {
		return
	}
	var some []*site
	for _, st := range sites {
		if st.module != nil && st.sym.Size > 0 && !isGo(st.module) {
			some = append(some, st)
		}
	}
	if len(some) > 0 {
		q := newPlanQueue(some)
		q.start(1)
		t.jumps.ahead = append(t.jumps.ahead, q)
	}
}

// planDetours asks codegen.PlanDetour about each of sites, on every CPU
// (Lua: ~700 functions, ~10 ms), taking the plans made ahead (ahead,
// planAhead's) and finishing them first.
func planDetours(sites []*site, ahead []*planQueue) []funcPlan {
	made := map[*site]funcPlan{}
	for _, q := range ahead {
		q.start(runtime.GOMAXPROCS(0) - 1)
		q.work()
		q.wg.Wait()
		for i, st := range q.sites {
			made[st] = q.out[i]
		}
	}
	var rest []*site
	for _, st := range sites {
		if _, ok := made[st]; !ok {
			rest = append(rest, st)
		}
	}
	q := newPlanQueue(rest)
	q.start(runtime.GOMAXPROCS(0))
	q.wg.Wait()
	for i, st := range rest {
		made[st] = q.out[i]
	}
	out := make([]funcPlan, len(sites))
	seen := map[*symbols.Mapped]bool{}
	for i, st := range sites {
		out[i] = made[st]
		seen[st.module] = true
	}
	for m := range seen {
		m.KeepFunctionFlows()
	}
	return out
}

// planDetour returns st's detour if its function allows one (p, from
// planFunc), no other site (addrs: every site's address, sorted) is
// inside the range its jmp would cover, and nothing else in the module
// lands there (landsInside).
func (t *Tracer) planDetour(st *site, addrs []uint64, p funcPlan) *codegen.Detour {
	d, err := p.d, p.err
	if p.unread {
		return nil
	}
	if err != nil {
		// (-v says it, counted by why: without the address or
		// instruction the error starts with)
		why := err.Error()
		if i := strings.LastIndex(why, ": "); i >= 0 {
			why = why[i+2:]
		}
		st.trapWhy = "no jump fits: " + branchAt.ReplaceAllString(why, "")
		return nil
	}
	if !st.plainEntry() && !st.frame { // (past mcount: only a record stub hooks, through the frame)
		if !st.atEntry() {
			return nil // the hook reads [sp] as the return address: entries only
		}
		if t.callerEntry(st) {
			d.LoadReturn = true
		} else {
			d.ReturnHook = t.ret.trampoline
		}
	}
	next, _ := slices.BinarySearch(addrs, st.addr+1)
	if next < len(addrs) && addrs[next] < st.addr+uint64(d.Covered) {
		st.trapWhy = "another probe's site is inside the bytes its jump would cover"
		return nil
	}
	for _, r := range d.Redirects {
		if nearRedirect(addrs, r, st.addr) {
			// Another site's int3 or jmp would take the branch's
			// original bytes out of line.
			st.trapWhy = "a branch its jump needs re-aimed is at another probe's site"
			return nil
		}
	}
	if why := cmp.Or(t.guardedPad(st, d), t.landsInside(st, d)); why != "" {
		st.trapWhy = why // (-v says it)
		t.jumps.refused.mu.Lock()
		t.jumps.refused.sites = append(t.jumps.refused.sites, why)
		t.jumps.refused.mu.Unlock()
		return nil
	}
	return d
}

// landsInside says what reaches the instructions st's jmp (d) would
// cover other than through its first byte, or "" if nothing does, as far
// as can be told: PlanDetour has seen the function's own branches; any
// other direct branch of the module, or a function starting there, would
// land in the middle of the jmp (glibc's __mempcpy_* jumps to +3 of
// __memcpy_*). A module whose code cannot be swept may jump anywhere.
func (t *Tracer) landsInside(st *site, d *codegen.Detour) string {
	if d.Covered == len(singlestep.BreakpointInsn) {
		return "" // arm64: one word, and nothing lands inside a word
	}
	m := st.module
	bt, err := m.BranchTargets()
	if err != nil {
		return fmt.Sprintf("%s: cannot tell where %s's code jumps: %v", t.space.Describe(st.addr), m.Name, err)
	}
	link := st.addr - m.Bias
	for _, l := range bt.Landings(link, link+uint64(d.Covered)) {
		redirected := slices.ContainsFunc(d.Redirects, func(r codegen.Redirect) bool { return r.From == l.From+m.Bias })
		switch {
		case l.Entry:
			return fmt.Sprintf("%s: a function starts at %s", t.space.Describe(st.addr), t.space.Describe(l.At+m.Bias))
		case !redirected:
			return fmt.Sprintf("%s: a branch at %s lands at %s", t.space.Describe(st.addr), t.space.Describe(l.From+m.Bias), t.space.Describe(l.At+m.Bias))
		}
	}
	return ""
}

// jumpState is the sites jump-optimised, and what was done around them.
type jumpState struct {
	// refused: sites kept as int3s because something else lands inside
	// their jmp's bytes, for Stats().JumpsRefused.
	refused struct {
		mu    sync.Mutex
		sites []string
	}
	// btiText: whether a module's code is BTI-guarded (arm64), by the
	// module, read from smaps once (optimize_arm64.go).
	btiText      map[*symbols.Mapped]bool
	detours      map[uint64]*jumpOpt // by the detour's address
	ahead        []*planQueue        // plans started before Start (planAhead)
	placed       atomic.Int64        // sites jump-optimised
	detourExits  atomic.Int64        // threads moved out of detours at detach
	hookJumps    atomic.Int64        // jumps to return-hook detours
	swappedExits atomic.Int64        // of detourExits, those past a return hook's swap
	// funcPaths is what FuncPaths says, as the jumps were last placed.
	funcPaths struct {
		mu          sync.Mutex
		in          int
		ways, stops map[string]int
		stopping    map[string][]string // the functions that stop, by why
	}
	// redirects are the branches re-aimed into detours, by address, put
	// back at detach (putBackRedirects).
	redirects map[uint64]redirect
}

// placedDetour is a detour made and its slots taken, to be written.
type placedDetour struct {
	st        *site
	d         *codegen.Detour
	have      []byte // the int3 and the covered bytes, as in memory
	at        uint64 // its slots, the first (where the jmp goes)
	slots     int
	base      uint64 // the detour proper, past a stub
	code, jmp []byte
	rec       *codegen.RecordStub
	rs        *recordSite
	stub      *codegen.MailboxStub
	id        uint64 // stub's mailbox id
}

// optimizeAll writes the detours of plans and their jmps, but where a
// thread's rip (rips) is inside the range a jmp would cover. Like
// writeSites, in a few large accesses: each stretch of text read once,
// the detours' slots in one write per run of adjacent slots, the jmps
// patched into the copies and each stretch written back once (Lua's
// ~700 functions: ~2000 accesses of /proc/PID/mem were a sixth of the
// start). Every thread is stopped: no thread sees a jmp before its
// detour, or half of one.
func (t *Tracer) optimizeAll(anchor int, plans map[*site]*codegen.Detour, rips []uint64) {
	sts := slices.SortedFunc(maps.Keys(plans), func(a, b *site) int { return cmp.Compare(a.addr, b.addr) })
	runs, _ := t.readRunsOf(sts, func(st *site) int { return plans[st].Covered })
	var placed []*placedDetour
	for _, r := range runs {
		if r.orig == nil {
			continue // (unreadable: the int3s stay)
		}
		for _, st := range r.sites {
			if p := t.placeDetour(anchor, st, plans[st], r.orig[st.addr-r.lo:][:plans[st].Covered], rips); p != nil {
				placed = append(placed, p)
			}
		}
	}
	if len(placed) == 0 {
		return
	}
	// Freed last first, as allocDetour took them (freeSlot gives back
	// only an area's last).
	free := func(ps []*placedDetour) {
		for i := len(ps) - 1; i >= 0; i-- {
			t.freeSlots(ps[i].at, ps[i].slots)
		}
	}
	writes := make([]slotWrite, len(placed))
	for i, p := range placed {
		writes[i] = slotWrite{p.at, p.code}
	}
	if t.writeSlots(writes) != nil {
		free(placed)
		return
	}
	byAddr := map[uint64]*placedDetour{}
	for _, p := range placed {
		byAddr[p.st.addr] = p
		t.rescueText(p.st.addr, coveredBytes(p.d))
		t.rescuePC(p.d.Trap(p.base)+singlestep.BreakpointPCAdjust, p.d.Skip(p.base), codegen.RescueGoOn)
	}
	for i, r := range runs {
		touched := false
		for _, st := range r.sites {
			if p := byAddr[st.addr]; p != nil {
				copy(r.bytes[st.addr-r.lo:], p.jmp)
				touched = true
			}
		}
		if !touched {
			continue
		}
		if _, err := t.proc.WriteAt(r.bytes, int64(r.lo)); err != nil {
			// Best effort: the int3s back, and none of these detours
			// used (their slots stay taken).
			t.proc.WriteAt(r.orig, int64(r.lo))
			for _, st := range r.sites {
				delete(byAddr, st.addr)
			}
			for _, later := range runs[i+1:] {
				for _, st := range later.sites {
					delete(byAddr, st.addr)
				}
			}
			break
		}
	}
	for _, p := range placed {
		if byAddr[p.st.addr] == p {
			t.finishDetour(p)
		}
	}
}

// placeDetour makes st's detour d: its stub, its slots and its code, and
// its jmp; nil where it cannot be placed (a thread's rip, at rips, is
// inside the range the jmp covers; memory, have, does not hold the int3
// and then the file's bytes; the site does not record; ...).
func (t *Tracer) placeDetour(anchor int, st *site, d *codegen.Detour, have []byte, rips []uint64) *placedDetour {
	end := st.addr + uint64(d.Covered)
	for _, rip := range rips {
		if st.addr < rip && rip < end {
			return nil
		}
	}
	// Memory must hold the int3 and then the file's bytes: nobody else
	// patched the range.
	want := append(padBreakpoint(len(st.orig)), coveredBytes(d)[len(st.orig):]...)
	if !bytes.Equal(have, want) {
		return nil
	}
	rec, rs := t.recordStub(st)
	if rec == nil && (!trapDetours || st.frame && !st.plainEntry()) {
		return nil // the site's trapWhy says why it does not record
	}
	var stub *codegen.MailboxStub
	if rec != nil {
		// The stub hooks the return, or records the return address,
		// itself.
		d.ReturnHook, d.LoadReturn = 0, false
	}
	size, stubSize := d.Size(), 0 // (a stub's size is its code made once)
	if rec != nil {
		stubSize = rec.Size()
	} else if stub = t.entryStub(anchor, st); stub != nil {
		stubSize = stub.Size()
	}
	size += stubSize
	at, slots, err := t.allocDetour(anchor, st.addr, size)
	if err != nil {
		return nil
	}
	base, id := at, uint64(0)
	var code []byte
	if rec != nil {
		base += uint64(stubSize)
		rec.Next = d.Copies(base)
		rec.Routine, err = t.routineNear(anchor, at)
		if err == nil {
			code, err = rec.Code(at)
		}
		if err != nil {
			// The detour was planned for the stub: the int3 stays.
			st.trapWhy = err.Error()
			t.freeSlots(at, slots)
			return nil
		}
	}
	if stub != nil {
		base += uint64(stubSize)
		stub.Next, stub.Done = base, d.Copies(base)
		code, id, err = stub.Code(at)
		if err != nil {
			// Out of the routine's reach: without the stub.
			stub, base, code, err = nil, at, nil, nil
		}
	}
	tail, err := d.Code(base)
	var jmp []byte
	if err == nil {
		jmp, err = d.Jump(at)
	}
	if err != nil {
		t.freeSlots(at, slots)
		return nil
	}
	return &placedDetour{st: st, d: d, have: have, at: at, slots: slots, base: base, code: append(code, tail...), jmp: jmp, rec: rec, rs: rs, stub: stub, id: id}
}

// finishDetour re-aims the branches into the range p's jmp covers, now
// written, and notes the detour; if the branches cannot be, it puts the
// int3 and the covered bytes back.
func (t *Tracer) finishDetour(p *placedDetour) {
	st, d := p.st, p.d
	redirects, ok := t.redirectBranches(st, d, p.base)
	if !ok || t.writeRedirects(redirects) != nil {
		t.proc.WriteAt(p.have, int64(st.addr)) // best effort: the int3 and the covered bytes back
		t.freeSlots(p.at, p.slots)
		return
	}
	base := p.base
	st.opt = &jumpOpt{detour: d, base: base, at: d.Trap(base), skip: d.Skip(base), copies: d.Copies(base), site: st}
	t.jumps.detours[st.opt.at] = st.opt
	if rs := p.rs; rs != nil {
		rs.stub, rs.end = p.at, base
		st.opt.record = rs
		t.inproc.sites[p.rec.Site] = rs
		if rs.tallies != nil || rs.filtered {
			t.inproc.tallied = append(t.inproc.tallied, rs)
		}
	}
	if p.stub != nil {
		st.opt.stub = p.at
		t.mail.stubs[p.id] = st.opt
	}
	t.jumps.placed.Add(1)
	if d.ReturnHook != 0 {
		t.jumps.hookJumps.Add(1)
	}
}

// entryStub returns a mailbox stub for the detour of st, to be filled in,
// if st is a C function's entry (the stub uses the stack below the red
// zone, free only there) and the process has a mailbox; else nil.
func (t *Tracer) entryStub(anchor int, st *site) *codegen.MailboxStub {
	if !st.atEntry() || st.frame || t.ensureMailbox(anchor, st.addr) == nil {
		return nil
	}
	routine, _ := t.mailboxRoutine(anchor, codegen.MailboxEntry)
	if routine == 0 {
		return nil
	}
	return &codegen.MailboxStub{Kind: codegen.MailboxEntry, Routine: routine}
}

// allocDetour returns room for size bytes of detour near addr: adjacent
// XOL slots, as many as it takes (a return-hook detour or a record stub
// may not fit one), from the first area near addr with room for them
// all, or a new one: an area's last few slots, too few for a detour, must
// not keep every later detour out.
func (t *Tracer) allocDetour(anchor int, addr uint64, size int) (base uint64, slots int, err error) {
	slots = max(1, (size+singlestep.SlotSize-1)/singlestep.SlotSize)
	need := uint64(slots * singlestep.SlotSize)
	if need > xolAreaSize-singlestep.SlotSize {
		return 0, 0, fmt.Errorf("a detour of %d bytes: larger than an XOL area", size)
	}
	for _, a := range t.step.xol {
		if a.used+need <= a.size && within(a.base, addr, xolReach) {
			base = a.base + a.used
			a.used += need
			return base, slots, nil
		}
	}
	a, err := t.newXOLArea(anchor, addr)
	if err != nil {
		return 0, 0, err
	}
	base = a.base + a.used
	a.used += need
	return base, slots, nil
}

// freeSlots gives back the slots allocDetour took, last first.
func (t *Tracer) freeSlots(base uint64, slots int) {
	for i := slots - 1; i >= 0; i-- {
		t.freeSlot(base + uint64(i*singlestep.SlotSize))
	}
}
