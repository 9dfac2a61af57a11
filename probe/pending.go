package probe

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"

	"golang.org/x/sys/unix"

	"github.com/probedbg/probe/fetch"
	"github.com/probedbg/probe/symbols"
	"github.com/probedbg/probe/tracee"
)

// Libraries loaded and unloaded after attach (dlopen, dlclose). As gdb
// does, we watch the dynamic linker's rendezvous, struct r_debug: it
// calls r_brk (_dl_debug_state) with r_state RT_ADD or RT_DELETE before
// it changes the link map and with RT_CONSISTENT after. An internal
// breakpoint there (never printed, never counted) lets us install the
// probes waiting for a library once it is mapped, and take a library's
// breakpoints out while its bytes are still mapped: between RT_DELETE and
// RT_CONSISTENT the unloading thread stops at its syscalls, and at each
// munmap's entry the sites in the range are restored and forgotten.
// Nothing is written to a range after it is unmapped: a later mmap may
// put something else there.

// pendingLib names the library a probe is in, when that library can come
// and go.
type pendingLib struct {
	name string // MOD as the user wrote it
	path string // the file, symlinks resolved, as /proc/PID/maps names it
}

// linkerWatch is the breakpoint on the dynamic linker's r_brk.
type linkerWatch struct {
	rDebug    uint64       // runtime address of struct r_debug
	unloading map[int]bool // threads between RT_DELETE and RT_CONSISTENT
	err       error        // why there is no watch, once tried
}

// struct r_debug (<link.h>) on 64-bit targets: r_version, r_map, r_brk,
// r_state.
const (
	rBrkOffset   = 16
	rStateOffset = 24

	rtConsistent = 0
	rtAdd        = 1
	rtDelete     = 2
)

// armLinkerWatch puts the internal breakpoint on r_brk, once. It is
// callable after any (re)resolution of the process's symbols, such as
// after an exec, where the tracer forgets the old watch first.
func (t *Tracer) armLinkerWatch(anchor int) error {
	if t.linker != nil {
		return t.linker.err
	}
	t.linker = &linkerWatch{unloading: map[int]bool{}}
	t.linker.err = t.placeLinkerWatch(anchor)
	return t.linker.err
}

func (t *Tracer) placeLinkerWatch(anchor int) error {
	for _, m := range t.space.Mapped {
		rd, ok := m.LookupExported("_r_debug") // (the dynamic linker's: no debug file read for it)
		if !ok {
			continue
		}
		rDebug := rd.Addr + m.Bias
		brk, ok := t.readWord(rDebug + rBrkOffset)
		if !ok || brk == 0 {
			// Not initialised yet (a static program before its
			// first dlopen): the function it will point to.
			sym, found := m.LookupExported("_dl_debug_state")
			if !found {
				continue
			}
			brk = sym.Addr + m.Bias
		}
		bm := t.space.ModuleAt(brk)
		if bm == nil {
			return fmt.Errorf("r_brk %#x is in no mapped file", brk)
		}
		r, err := t.atLinkAddr(bm, brk-bm.Bias)
		if err != nil {
			return fmt.Errorf("r_brk: %w", err)
		}
		st, err := t.siteAt(anchor, r)
		if err != nil {
			return fmt.Errorf("r_brk: %w", err)
		}
		st.linker = true
		t.linker.rDebug = rDebug
		return nil
	}
	return errors.New("the process has no dynamic linker to watch (_r_debug)")
}

// addPending makes p wait for its library when the library is not mapped
// but its file is where the dynamic linker could load it from; the
// location and fetch-args are checked against the file now, so that a
// mistake is reported at once. It reports whether p was taken.
func (t *Tracer) addPending(anchor int, p *Probe) (bool, error) {
	loc := p.Spec.Loc
	if loc.Module == "" || loc.HasLine || loc.Symbol == "" && !loc.HasFileOff && !loc.SDT {
		return false, nil
	}
	lib := t.libraryToCome(loc.Module)
	if lib == nil {
		return false, nil // resolving reports the unknown library
	}
	if err := t.checkOnDisk(p, lib); err != nil {
		return true, err
	}
	if err := t.armLinkerWatch(anchor); err != nil {
		return true, badInput(fmt.Errorf("%s is not loaded, and %w", loc.Module, err))
	}
	p.lib, p.Module, p.Where = lib, filepath.Base(lib.path), "(pending)"
	p.pending.Store(true)
	p.enabled.Store(true)
	return true, nil
}

// libraryToCome is the library mod names if it is not loaded but its
// file is where the dynamic linker could load it from (a dlopen to
// come); else nil.
func (t *Tracer) libraryToCome(mod string) *pendingLib {
	var unknown *symbols.UnknownModuleError
	if _, err := t.space.FindModule(mod); !errors.As(err, &unknown) {
		return nil
	}
	path, ok := t.space.FindLibraryFile(mod)
	if !ok {
		return nil
	}
	return &pendingLib{name: mod, path: path}
}

// checkOnDisk resolves p in its library's file, placed beside the
// modules mapped now (at ShelfBias: its DWARF can be read there): the
// checks of a loaded module (symbol, boundary, fetch-args, DWARF names)
// without writing anything.
func (t *Tracer) checkOnDisk(p *Probe, lib *pendingLib) error {
	disk, err := symbols.LoadBinaryAt(lib.path, symbols.ShelfBias)
	if err != nil {
		return badInput(fmt.Errorf("%s: %w", lib.name, err))
	}
	defer disk.Close()
	mapped := t.space
	t.space = &symbols.Space{Pid: mapped.Pid, Mapped: append(slices.Clone(mapped.Mapped), disk.Main())}
	defer func() { t.space = mapped }()
	s := lib.spec(p.Spec)
	scratch := &Probe{Spec: p.Spec, Kind: p.Kind}
	if s.Loc.SDT {
		sites, err := t.resolveSDT(s.Loc)
		if err != nil {
			return err
		}
		if scratch.sdtArgs, err = sdtFetchArgs(s, sites[0].note.Args); err != nil {
			return err
		}
		if err := t.compileArgs(scratch, sites[0].r, 0); err != nil {
			return err
		}
		p.args = scratch.args // for FieldNames until it is installed
		return nil
	}
	rs, err := t.resolve(s)
	if err != nil {
		return err
	}
	r := rs[0]
	if s.Kind == fetch.KindReturn && (r.sym.Name == "" || r.addr != r.sym.Addr+r.module.Bias) {
		return badInput(fmt.Errorf("%s: a return probe must be on a function's entry", r.where))
	}
	compile := func() error { return t.compileArgs(scratch, r, 0) }
	if s.Kind == fetch.KindOverride {
		compile = func() error { return t.compileOverride(scratch, r) }
	}
	if err := compile(); err != nil {
		return err
	}
	p.args, p.override = scratch.args, scratch.override // for FieldNames until it is installed
	return nil
}

// spec is s with its module named by the library's path, which matches
// the file however the user named it.
func (lib *pendingLib) spec(s *fetch.Spec) *fetch.Spec {
	c := *s
	c.Loc.Module = lib.path
	return &c
}

// onLinkerEvent runs at r_brk on thread tid, which stays stopped there.
func (t *Tracer) onLinkerEvent(tid int, regs *unix.PtraceRegs) {
	saved := *regs
	defer func() { *regs = saved }()
	word, ok := t.readWord(t.linker.rDebug + rStateOffset)
	if !ok {
		return
	}
	switch uint32(word) {
	case rtDelete:
		t.linker.unloading[tid] = true
		t.proc.SetThreadSyscallStops(tid, true)
	case rtConsistent:
		if t.linker.unloading[tid] {
			delete(t.linker.unloading, tid)
			t.proc.SetThreadSyscallStops(tid, false)
		}
		t.librariesChanged(tid)
	}
}

// onUnloadingSyscall sees a syscall-enter stop of a thread unloading
// libraries: a munmap takes out the breakpoints in its range first.
func (t *Tracer) onUnloadingSyscall(regs *unix.PtraceRegs) {
	start, size := tracee.SyscallArg(regs, 0), tracee.SyscallArg(regs, 1)
	if tracee.SyscallNr(regs) != unix.SYS_MUNMAP || size == 0 {
		return
	}
	end := start + size
	var lifted []*site
	for addr, st := range t.sites {
		if addr >= start && addr < end {
			lifted = append(lifted, st)
		}
	}
	t.restoreSites(lifted) // still mapped: the last write there
	t.jumps.forgetRedirects(start, end)
	var gone []*symbols.Mapped
	var next *symbols.Space
	next, gone = t.space.Without(start, end)
	t.setSpace(next)
	t.dropUnmapped(lifted, gone)
}

// librariesChanged re-reads the process's mappings once the link map is
// consistent again: sites in files no longer mapped are forgotten without
// a write (they should have been lifted at their munmap already), and the
// pending probes whose library has appeared are installed.
func (t *Tracer) librariesChanged(anchor int) {
	next, added, removed, err := t.space.Reload()
	if err != nil {
		return
	}
	t.setSpace(next)
	if len(removed) > 0 {
		var stale []*site
		for addr, st := range t.sites {
			for _, m := range removed {
				if m.Overlaps(addr, addr+1) {
					stale = append(stale, st)
				}
			}
		}
		t.dropUnmapped(stale, removed)
	}
	if len(removed) > 0 && t.ft != nil {
		clear(t.ft.callers) // (names of return addresses there)
	}
	if len(added) == 0 {
		return
	}
	placed := t.traceLoaded(anchor, added)
	for _, p := range t.probes {
		if !p.pending.Load() {
			continue
		}
		if _, err := t.space.FindModule(p.lib.path); err != nil {
			continue
		}
		if err := t.placeProbe(anchor, p, p.lib.spec(p.Spec)); err != nil {
			p.placeErr = err
			continue
		}
		p.placeErr = nil
		p.pending.Store(false)
		p.placed.Store(true)
		notePaths(p.sites...) // (what -v says of it)
		placed = true
	}
	if t.ret.trampoline != 0 {
		t.hookUnwinders(anchor) // the new libraries' own
	}
	if placed {
		// Not at this stop: anchor is at our breakpoint on r_brk, its
		// trap being served (optimizeLate). At the next command's.
		t.cmds.push(t.optimizeLate, t.bellPid)
	}
}

// dropUnmapped takes sites out of t.sites without touching memory, and
// sends the probes that used them back to pending on their library (one
// of gone, the modules unmapped).
func (t *Tracer) dropUnmapped(sites []*site, gone []*symbols.Mapped) {
	var probes []*Probe
	for _, st := range sites {
		if t.sites[st.addr] == st {
			delete(t.sites, st.addr)
		}
		for _, ps := range st.probeLists() {
			for _, p := range ps {
				if !slices.Contains(probes, p) {
					probes = append(probes, p)
				}
			}
		}
	}
	for _, p := range probes {
		if p.lib == nil {
			p.lib = &pendingLib{name: p.Module, path: p.Module}
			for _, m := range gone {
				if m.Name == p.Module {
					p.lib.path = m.FilePath()
				}
			}
		}
		t.detachSites(p) // its sites still in t.sites are mapped: restored
		p.pending.Store(true)
	}
	for _, m := range gone {
		if !slices.ContainsFunc(t.space.Mapped, func(o *symbols.Mapped) bool { return o.Module == m.Module }) {
			m.Close()
		}
	}
}

// Pending reports whether the probe waits for its library to be loaded
// (again).
func (p *Probe) Pending() bool { return p.pending.Load() }

// EverInstalled reports whether the probe's breakpoints were in place at
// some time.
func (p *Probe) EverInstalled() bool { return p.placed.Load() }
