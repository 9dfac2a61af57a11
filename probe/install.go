package probe

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/probedbg/probe/fetch"
	"github.com/probedbg/probe/singlestep"
	"github.com/probedbg/probe/symbols"
)

// stepState is the displaced instructions in flight, and where they run.
type stepState struct {
	threads      map[int]*site         // threads whose displaced instruction is in flight
	restarting   map[int]*restartState // threads stepped out of a Go restartable sequence (gorestart.go)
	restartSlots map[uint64]uint64     // the copies they step from, by the instruction's address
	xol          []*xolArea
}

// xolArea is a page range injected into the tracee holding out-of-line
// copies of displaced instructions, one slot each.
type xolArea struct {
	base, size, used uint64
}

// xolMagic begins every XOL area: int3s (arm64: brk), should anything
// jump there, and the maker's name.
var xolMagic = func() (m [singlestep.SlotSize]byte) {
	for i := range m {
		m[i] = singlestep.BreakpointInsn[i%len(singlestep.BreakpointInsn)]
	}
	copy(m[len(singlestep.BreakpointInsn):], "probe xol")
	return m
}()

const (
	xolAreaSize = 256 << 10
	// How far slots may be from the code they were copied from.
	xolReach = singlestep.XOLReach
)

// install resolves spec and writes its breakpoints. anchor is a thread
// held stopped, through which an XOL area can be mapped.
func (t *Tracer) install(anchor int, s *fetch.Spec, h Handler) (*Probe, error) {
	if s.Kind == fetch.KindDelete {
		p := t.probes[s.Group+"/"+s.Event]
		if p == nil {
			return nil, badInput(fmt.Errorf("no event %s/%s", s.Group, s.Event))
		}
		return p, t.uninstall(p)
	}
	name := s.Group + "/" + s.Event
	if t.probes[name] != nil {
		return nil, badInput(fmt.Errorf("event %s already exists", name))
	}
	if name, nr, ok, err := t.syscallLoc(s); err != nil || ok {
		if err != nil {
			return nil, err
		}
		return t.installSyscall(s, name, nr, h)
	}
	p := &Probe{Spec: s, Group: s.Group, Event: s.Event, Kind: s.Kind, handler: h, hits: new(atomic.Uint64)}
	if ok, err := t.addPending(anchor, p); ok || err != nil {
		if err != nil {
			return nil, err
		}
		t.probes[name] = p
		return p, nil
	}
	if err := t.installIn(anchor, p); err != nil {
		return nil, err
	}
	p.enabled.Store(true)
	t.probes[name] = p
	return p, nil
}

// installIn resolves p's spec in the program the process runs now and
// writes its breakpoints; on failure nothing of p is left.
func (t *Tracer) installIn(anchor int, p *Probe) error {
	if err := t.placeProbe(anchor, p, p.Spec); err != nil {
		return err
	}
	p.placed.Store(true)
	if p.Module != t.space.Main().Name {
		t.armLinkerWatch(anchor) // its library may be unloaded
	}
	return nil
}

// placeProbe resolves s (p's spec, or a copy naming its library by path) and
// writes p's breakpoints; on failure nothing of p is left.
func (t *Tracer) placeProbe(anchor int, p *Probe, s *fetch.Spec) error {
	if s.Kind == fetch.KindReturn && s.Loc.Symbol != "" && s.Loc.Offset != 0 {
		// Said before the offset is checked: no offset would do.
		return badInput(fmt.Errorf("%s: a return probe must be at a function's entry (no +offset)", s.Loc))
	}
	if s.Loc.SDT {
		return t.placeSDT(anchor, p, s)
	}
	rs, err := t.resolve(s)
	if err != nil {
		return err
	}
	r := rs[0]
	p.shownAt = ""
	if s.Kind == fetch.KindEntry && r.sym.Name != "" && r.addr == r.sym.Addr+r.module.Bias && isGo(r.module) {
		// A Go function that grows its stack comes back to its first
		// instruction from runtime.morestack: after the stack check,
		// each call is seen once. The check leaves the argument
		// registers alone; the probe is still reported at +0.
		if off := singlestep.GoStackCheckEnd(r.code); off > 0 {
			p.shownAt = r.where
			r = funcSite(r.module, r.sym, r.code, off)
			rs = []resolved{r}
		}
	}
	if s.Kind == fetch.KindEntry && s.Loc.Symbol != "" && s.Loc.Offset == 0 && !s.Loc.HasLine && fetch.ReadsDWARF(s.Args) {
		// As perf probe: variables are read after the prologue, where
		// gcc's frame-based locations hold them.
		if after, err := t.captureSite(r); err == nil {
			r, rs = after, []resolved{after}
		}
	}
	p.Addr, p.Where, p.Module, p.captures = r.addr, cmp.Or(p.shownAt, r.where), r.module.Name, nil
	switch {
	case s.Kind == fetch.KindReturn:
		err = t.installReturn(anchor, p, r)
	case s.Kind == fetch.KindOverride:
		if err = t.compileOverride(p, r); err == nil {
			err = t.attachSite(anchor, p, r, func(st *site) { st.overrides = append(st.overrides, p) })
		}
	default:
		if err = t.compileArgs(p, r, 0); err != nil {
			break
		}
		// A source line may have code in several places (inlined copies,
		// several functions); the probe fires at each.
		for _, at := range rs {
			if err = t.attachSite(anchor, p, at, func(st *site) { st.probes = append(st.probes, p) }); err != nil {
				break
			}
		}
	}
	if err != nil {
		t.detachSites(p)
		return err
	}
	return nil
}

// installReturn hooks the function's returns: through the trampoline, or
// for Go at each RET instruction.
func (t *Tracer) installReturn(anchor int, p *Probe, r resolved) error {
	if r.sym.Name == "" || r.addr != r.sym.Addr+r.module.Bias {
		return badInput(fmt.Errorf("%s: a return probe must be on a function's entry", r.where))
	}
	p.funcName = r.sym.Name
	if !isGo(r.module) {
		if ok, why := r.module.CallEntry(r.sym); !ok {
			// Its [sp] is no return address: a trampoline there would
			// overwrite whatever the word is (argc, a caller's local).
			return badInput(fmt.Errorf("%s: no return probe on %s: %s", r.where, r.sym.Name, why))
		}
		capture := r
		if fetch.ReadsDWARF(p.Spec.Args) {
			var err error
			if capture, err = t.captureSite(r); err != nil {
				return badInput(fmt.Errorf("%s: %w", r.where, err))
			}
		}
		if err := t.compileArgs(p, r, capture.addr); err != nil {
			return err
		}
		if err := t.ensureTrampoline(anchor, r.addr); err != nil {
			return err
		}
		err := t.attachSite(anchor, p, r, func(st *site) {
			st.returns = append(st.returns, p)
			st.funcName = r.sym.Name
		})
		if err != nil || len(p.captures) == 0 {
			return err
		}
		return t.attachSite(anchor, p, capture, func(st *site) { st.captures = append(st.captures, p) })
	}
	if err := t.compileArgs(p, r, 0); err != nil {
		return err
	}
	rets, err := goRetAddrs(r.code, r.addr)
	if err != nil {
		return badInput(fmt.Errorf("%s: %w", r.where, err))
	}
	for _, a := range rets {
		at := funcSite(r.module, r.sym, r.code, int(a-r.addr))
		if err := t.attachSite(anchor, p, at, func(st *site) { st.retInsns = append(st.retInsns, p) }); err != nil {
			return err
		}
	}
	return nil
}

// attachSite adds p to the site at r (created if new) with add.
func (t *Tracer) attachSite(anchor int, p *Probe, r resolved, add func(*site)) error {
	st, err := t.siteAt(anchor, r)
	if err != nil {
		return err
	}
	add(st)
	st.post = st.post || p.handler.Post != nil
	p.sites = append(p.sites, st)
	t.keepRecording(st)
	return nil
}

// keepRecording turns a site that records in the tracee back into an
// int3 at once when what it records no longer serves its probes: no hit
// of it traps to make keepPlain see it.
func (t *Tracer) keepRecording(st *site) {
	if st.opt != nil && st.opt.record != nil {
		t.keepPlain(st)
		if st.opt == nil {
			st.trapWhy = "its probes changed after the start"
		}
	}
	if st.opt == nil && st.trapWhy == "" && t.isReady() {
		st.trapWhy = "added after the start"
	}
	notePaths(st)
}

// addSite analyses the instruction at r and gives it an XOL slot; its slot
// and breakpoint are written with the rest of b (writeSites).
func (t *Tracer) addSite(anchor int, r resolved, b *siteBatch) (*site, error) {
	insn, err := singlestep.Analyze(r.code, r.addr)
	if err != nil {
		return nil, badInput(fmt.Errorf("%s: %w", r.where, err))
	}
	t.unoptimizeAround(r.addr)
	st := &site{addr: r.addr, insn: insn, where: r.where, run: t.runMode(insn), module: r.module, sym: r.sym}
	if r.module != nil {
		r.module.PrefetchBranchTargets() // (for the detour's plan at Start)
	}
	// Emulated instructions get a slot too, when they can run out of line
	// (all but relative branches): the fallback when emulation cannot
	// touch the stack. A boosted copy can be stepped as well: the step
	// stops before the jump back.
	if slot, err := t.allocSlot(anchor, r.addr); err != nil {
		return nil, err
	} else if code, boosted, err := slotCode(insn, slot); err != nil {
		if insn.Kind != singlestep.Emulate {
			return nil, badInput(fmt.Errorf("%s: %w", r.where, err))
		}
		t.freeSlot(slot)
	} else {
		b.slots = append(b.slots, slotWrite{slot, code})
		st.slot = slot
		if st.run == runBoost && !boosted {
			st.run = runStep
		}
	}
	// What we must put back: writeBreakpoints checks that memory still
	// holds the file's bytes. The breakpoint covers the whole instruction
	// (padBreakpoint): no thread runs its tail in place while it is in.
	st.orig = insn.Bytes
	b.sites = append(b.sites, st)
	t.sites[r.addr] = st
	return st, nil
}

// runMode picks the cheapest way to run insn: emulation when it touches
// registers only; otherwise a boosted copy when it can run out of line
// without a stop; otherwise emulation or a single-step.
func (t *Tracer) runMode(insn *singlestep.Insn) runMode {
	switch {
	case insn.Kind == singlestep.Emulate && insn.RegistersOnly():
		return runEmulate
	case !t.tuning.NoBoost && insn.CanBoost():
		return runBoost
	case insn.Kind == singlestep.Emulate:
		return runEmulate
	}
	return runStep
}

// slotCode is what goes in insn's slot: the boosted copy when it has one
// and the jump back reaches (arm64's b: ±128 MiB), else the plain copy.
func slotCode(insn *singlestep.Insn, slot uint64) (code []byte, boosted bool, err error) {
	if insn.CanBoost() {
		code, err := insn.XOLBoosted(slot)
		var oe *singlestep.OutOfRangeError
		if !errors.As(err, &oe) {
			return code, err == nil, err
		}
	}
	code, err = insn.XOL(slot)
	return code, false, err
}

// allocSlot returns a free XOL slot within reach of addr, mapping a new
// area near it when none has room.
func (t *Tracer) allocSlot(anchor int, addr uint64) (uint64, error) {
	slot, _, err := t.allocDetour(anchor, addr, singlestep.SlotSize)
	return slot, err
}

// newXOLArea maps an XOL area near addr, through the stopped thread
// anchor, empty.
func (t *Tracer) newXOLArea(anchor int, addr uint64) (*xolArea, error) {
	if anchor == 0 {
		return nil, errors.New("no stopped thread to map an XOL area through")
	}
	base, err := t.proc.MapExecutable(anchor, addr, xolAreaSize)
	if err != nil {
		t.rescueMaking(0, 0)
		return nil, fmt.Errorf("map XOL area: %w", err)
	}
	// Its first slot says whose it is: a probe killed before it could
	// detach leaves it behind, and the next one takes it back
	// (restoreLeftovers).
	t.proc.WriteAt(xolMagic[:], int64(base))
	t.rescueMaking(0, 0)
	t.proc.DontDump(anchor, base, xolAreaSize)
	a := &xolArea{base: base, size: xolAreaSize, used: singlestep.SlotSize}
	t.step.xol = append(t.step.xol, a)
	t.maps.made = append(t.maps.made, mappedRange{base, xolAreaSize})
	return a, nil
}

// freeSlot returns the slot allocSlot just gave, unused.
func (t *Tracer) freeSlot(slot uint64) {
	for _, a := range t.step.xol {
		if slot == a.base+a.used-singlestep.SlotSize {
			a.used -= singlestep.SlotSize
			return
		}
	}
}

func within(a, b, d uint64) bool {
	if a > b {
		return a-b < d
	}
	return b-a < d
}

// uninstall removes a probe and puts the original byte back wherever no
// other probe shares the address. A thread already trapped on it is
// handled in onForeignTrap; one stepping its copy finishes normally; a
// frame already hijacked still returns through the trampoline.
func (t *Tracer) uninstall(p *Probe) error {
	delete(t.probes, p.Name())
	t.lowerSemaphores(p)
	if p.onEnable != nil {
		t.uninstallSyscall(p)
		return nil
	}
	return t.detachSites(p)
}

// detachSites takes p off each of its sites, removing those left empty.
func (t *Tracer) detachSites(p *Probe) error {
	sites, own := t.sitesOf(p)
	for _, st := range sites {
		st.probes = without(st.probes, p)
		st.returns = without(st.returns, p)
		st.retInsns = without(st.retInsns, p)
		st.captures = without(st.captures, p)
		delete(st.sdtArgs, p)
		st.overrides = without(st.overrides, p)
		st.post = false
		for _, q := range st.probes {
			st.post = st.post || q.handler.Post != nil
		}
		if st.hasProbes() {
			t.keepRecording(st)
		}
	}
	err := t.dropEmpty(sites)
	if own {
		p.sites = nil
	}
	return err
}

// sitesOf returns p's sites in t's process, and whether p.sites are
// they. A fork child shares the probes of its parent (followFork), whose
// sites are the parent's: the child's are its copies, those of its own
// sites that hold p.
func (t *Tracer) sitesOf(p *Probe) (sites []*site, own bool) {
	own = len(p.sites) > 0 // (none: the parent's removal may have taken them)
	for _, st := range p.sites {
		own = own && t.sites[st.addr] == st
	}
	if own {
		return p.sites, true
	}
	for _, st := range t.sites {
		if slices.ContainsFunc(st.probeLists(), func(ps []*Probe) bool { return slices.Contains(ps, p) }) {
			sites = append(sites, st)
		}
	}
	return sites, len(p.sites) == 0
}

func without(ps []*Probe, p *Probe) []*Probe {
	for i, q := range ps {
		if q == p {
			return append(ps[:i:i], ps[i+1:]...)
		}
	}
	return ps
}

// resolve turns a spec's location into addresses on instruction
// boundaries (one, except for a source line with code in several places),
// with the code there read from the file.
func (t *Tracer) resolve(s *fetch.Spec) ([]resolved, error) {
	if s.Loc.HasLine {
		return t.resolveLine(s.Loc)
	}
	r, err := t.resolveOne(s.Loc)
	if err != nil {
		return nil, err
	}
	return []resolved{r}, nil
}

// resolveLine resolves FILE:LINE in the modules whose DWARF has that file,
// and FUNC:RLINE in the module defining FUNC.
func (t *Tracer) resolveLine(loc fetch.Location) ([]resolved, error) {
	var mods []*symbols.Mapped
	if loc.File == "" {
		m, _, err := t.space.Lookup(loc.Symbol)
		if err != nil {
			return nil, badInput(err)
		}
		mods = []*symbols.Mapped{m}
	} else {
		mods = t.space.Mapped
	}
	var firstErr error
	for _, m := range mods {
		d, err := m.Debug()
		if err != nil {
			if loc.File == "" {
				return nil, badInput(fmt.Errorf("%s: %s: %w", loc, m.Name, err))
			}
			continue
		}
		var addrs []uint64
		if loc.File != "" {
			addrs, err = d.LineAddrs(loc.File, loc.Line)
		} else {
			addrs, err = d.FuncLineAddrs(loc.Symbol, loc.Line)
		}
		if err != nil {
			if firstErr == nil || !strings.HasPrefix(err.Error(), "no source file") {
				firstErr = err
			}
			continue
		}
		rs := make([]resolved, 0, len(addrs))
		for _, a := range addrs {
			r, err := t.atLinkAddr(m, a-m.Bias)
			if err != nil {
				return nil, err
			}
			rs = append(rs, r)
		}
		return rs, nil
	}
	if firstErr == nil {
		firstErr = fmt.Errorf("no module with debug info has %s", loc.File)
	}
	return nil, badInput(firstErr)
}

// resolveOne resolves a location naming one address.
func (t *Tracer) resolveOne(loc fetch.Location) (resolved, error) {
	bad := func(err error) (resolved, error) { return resolved{}, badInput(err) }
	switch {
	case loc.Symbol != "":
		var m *symbols.Mapped
		var sym symbols.Symbol
		var err error
		if loc.Module != "" {
			if m, err = t.space.FindModule(loc.Module); err != nil {
				return bad(err)
			}
			var ok bool
			// (A library's exported function first: its debug file's
			// table, read for one name, was a sixth of a start.)
			if sym, ok = m.LookupExported(loc.Symbol); !ok {
				sym, ok = m.Lookup(loc.Symbol)
			}
			if !ok {
				return bad(&symbols.UnknownSymbolError{Name: loc.Symbol, Suggestions: m.Suggest(loc.Symbol, 3)})
			}
		} else if m, sym, err = t.space.Lookup(loc.Symbol); err != nil {
			return bad(err)
		}
		if !sym.Func {
			return bad(fmt.Errorf("%q is a data object, not a function", loc.Symbol))
		}
		if sym.IFunc && loc.Offset == 0 {
			if r, why := t.ifuncImplementation(m, sym); why == "" {
				return r, nil
			}
		}
		if sym.Size > 0 && loc.Offset >= sym.Size {
			return bad(fmt.Errorf("offset %#x is beyond the end of %s (size %#x)", loc.Offset, sym.Name, sym.Size))
		}
		return t.inFunction(m, sym, sym.Addr+loc.Offset)
	case loc.HasFileOff:
		m, err := t.space.FindModule(loc.Module)
		if err != nil {
			return bad(err)
		}
		link, err := m.OffsetToAddr(loc.FileOffset)
		if err != nil {
			return bad(fmt.Errorf("%s: %w", loc, err))
		}
		return t.atLinkAddr(m, link)
	default:
		m := t.space.ModuleAt(loc.Addr)
		if m == nil {
			return bad(fmt.Errorf("%#x is not in any mapped file", loc.Addr))
		}
		return t.atLinkAddr(m, loc.Addr-m.Bias)
	}
}

// atLinkAddr resolves an address given without a symbol: checked against
// the function that covers it when there is one.
func (t *Tracer) atLinkAddr(m *symbols.Mapped, link uint64) (resolved, error) {
	if sym, ok := m.SymbolAt(link); ok {
		if !sym.Func {
			return resolved{}, badInput(fmt.Errorf("%#x is in %q, a data object, not a function", link+m.Bias, sym.Name))
		}
		return t.inFunction(m, sym, link)
	}
	// A static function of a stripped file: its FDE's range, checked
	// as a symbol's.
	if sym, ok := m.FunctionCovering(link); ok {
		return t.inFunction(m, sym, link)
	}
	// No symbol to decode from: trust the user's address.
	code, err := m.ReadCode(link, 16)
	if err != nil {
		return resolved{}, badInput(fmt.Errorf("%#x: %w", link+m.Bias, err))
	}
	return resolved{addr: link + m.Bias, module: m, where: fmt.Sprintf("0x%x", link+m.Bias), code: code}, nil
}

// inFunction checks that link (inside sym) is an instruction boundary by
// decoding sym from its start.
func (t *Tracer) inFunction(m *symbols.Mapped, sym symbols.Symbol, link uint64) (resolved, error) {
	off := link - sym.Addr
	where := fmt.Sprintf("%s+%#x/%#x", sym.Name, off, sym.Size)
	size := sym.Size
	if size == 0 {
		size = off + 16
	}
	code, err := m.ReadCode(sym.Addr, size)
	if err != nil {
		return resolved{}, badInput(fmt.Errorf("%s: %w", where, err))
	}
	if err := singlestep.CheckBoundary(code, sym.Addr, link); err != nil {
		var nb *singlestep.NotBoundaryError
		if errors.As(err, &nb) {
			err = fmt.Errorf("%s+%#x is not an instruction boundary (nearest: %s+%#x, %s+%#x)",
				sym.Name, off, sym.Name, nb.Prev-sym.Addr, sym.Name, nb.Next-sym.Addr)
		}
		return resolved{}, badInput(err)
	}
	return resolved{addr: link + m.Bias, module: m, sym: sym, where: where, code: code[off:]}, nil
}
