package probe

import (
	"encoding/binary"
	"fmt"
	"slices"
	"strings"

	"github.com/probedbg/probe/fetch"
	"github.com/probedbg/probe/symbols"
)

// Static probes (sdt:PROVIDER:NAME): the sites <sys/sdt.h> leaves in a
// program, each a nop described by a note (symbols.SDTProbe). A probe
// there is an entry probe at each site whose $argN are the note's
// arguments. Where a note has a semaphore, the program computes the
// arguments and reaches the site only while that counter is not zero:
// each probe adds one for each site while it is in, and takes it back
// when it goes (uninstall, detach).

// sdtSite is a resolved site and its note.
type sdtSite struct {
	r    resolved
	note symbols.SDTProbe
}

// resolveSDT finds the sites of loc: the notes matching its provider and
// name in the module it names, or in every module mapped.
func (t *Tracer) resolveSDT(loc fetch.Location) ([]sdtSite, error) {
	notes, known, err := sdtNotes(t.space, loc)
	if err != nil {
		return nil, err
	}
	var sites []sdtSite
	for _, mn := range notes {
		r, err := t.atLinkAddr(mn.m, mn.n.PC)
		if err != nil {
			return nil, err
		}
		sites = append(sites, sdtSite{r, mn.n})
	}
	if len(sites) == 0 {
		where := "any module"
		if loc.Module != "" {
			where = loc.Module
		}
		if len(known) == 0 {
			return nil, badInput(fmt.Errorf("sdt:%s: %s has no SDT probes", loc, where))
		}
		return nil, badInput(fmt.Errorf("sdt:%s: no such SDT probe in %s (it has %s)", loc, where, strings.Join(slices.Compact(known), ", ")))
	}
	return sites, nil
}

// moduleNote is an SDT note and the module it is in.
type moduleNote struct {
	m *symbols.Mapped
	n symbols.SDTProbe
}

// sdtNotes returns the notes loc matches in the module it names, or in
// every module of space, and the PROVIDER:NAME of all the notes there.
func sdtNotes(space *symbols.Space, loc fetch.Location) (matched []moduleNote, known []string, err error) {
	mods := space.Mapped
	if loc.Module != "" {
		m, err := space.FindModule(loc.Module)
		if err != nil {
			return nil, nil, badInput(err)
		}
		mods = []*symbols.Mapped{m}
	}
	for _, m := range mods {
		all, err := m.SDTProbes()
		if err != nil {
			return nil, nil, badInput(err)
		}
		for _, n := range all {
			known = append(known, n.Provider+":"+n.Name)
			if loc.MatchesSDT(n.Provider, n.Name) {
				matched = append(matched, moduleNote{m, n})
			}
		}
	}
	return matched, known, nil
}

// sdtFetchArgs is what s's fetch-args are at a site whose note has
// arguments args: $argN made the note's.
func sdtFetchArgs(s *fetch.Spec, args string) ([]string, error) {
	out, err := fetch.SDTFetchArgs(s.Args, fetch.ParseSDTArgs(args))
	if err != nil {
		return nil, badInput(fmt.Errorf("sdt:%s: %w", s.Loc, err))
	}
	return out, nil
}

// placeSDT resolves the sdt: spec s and puts p at each of its sites,
// then raises their semaphores; on failure nothing of p is left. A site
// whose note keeps the arguments elsewhere than the first's gets its own
// fetch-args (site.sdtArgs), with the same names.
func (t *Tracer) placeSDT(anchor int, p *Probe, s *fetch.Spec) error {
	sites, err := t.resolveSDT(s.Loc)
	if err != nil {
		return err
	}
	if p.sdtArgs, err = sdtFetchArgs(s, sites[0].note.Args); err != nil {
		return err
	}
	r := sites[0].r
	p.shownAt = ""
	p.Addr, p.Where, p.Module, p.captures = r.addr, r.where, r.module.Name, nil
	if err := t.compileArgs(p, r, 0); err != nil {
		return err
	}
	fail := func(err error) error {
		t.detachSites(p)
		return err
	}
	for _, st := range sites {
		var own *fetch.Args
		if st.note.Args != sites[0].note.Args {
			tokens, err := sdtFetchArgs(s, st.note.Args)
			if err == nil {
				own, err = fetch.Compile(tokens, t.compileEnv(p, st.r, st.r.addr))
			}
			if err == nil && !slices.Equal(own.Names(), p.FieldNames()) {
				err = badInput(fmt.Errorf("sdt:%s: its sites' arguments differ in number (%q, %q)", s.Loc, sites[0].note.Args, st.note.Args))
			}
			if err != nil {
				return fail(err)
			}
		}
		if err := t.attachSite(anchor, p, st.r, func(at *site) {
			at.probes = append(at.probes, p)
			if own != nil {
				if at.sdtArgs == nil {
					at.sdtArgs = map[*Probe]*fetch.Args{}
				}
				at.sdtArgs[p] = own
			}
		}); err != nil {
			return fail(err)
		}
	}
	if err := t.raiseSemaphores(p, sites); err != nil {
		return fail(err)
	}
	return nil
}

// raiseSemaphores adds one to the semaphore of each of p's sites that has
// one; on failure it takes back what it added.
func (t *Tracer) raiseSemaphores(p *Probe, sites []sdtSite) error {
	for _, st := range sites {
		if st.note.Semaphore == 0 {
			continue
		}
		addr := st.note.Semaphore + st.r.module.Bias
		if err := addSemaphore(t.proc, addr, 1); err != nil {
			t.lowerSemaphores(p)
			return badInput(fmt.Errorf("sdt:%s: its semaphore at %#x cannot be written: %w", p.Spec.Loc, addr, err))
		}
		if t.semaphores == nil {
			t.semaphores = map[*Probe][]uint64{}
		}
		t.semaphores[p] = append(t.semaphores[p], addr)
	}
	return nil
}

// lowerSemaphores takes back what raiseSemaphores added for p in t's
// process.
func (t *Tracer) lowerSemaphores(p *Probe) {
	for _, addr := range t.semaphores[p] {
		addSemaphore(t.proc, addr, -1)
	}
	delete(t.semaphores, p)
}

// addSemaphore adds d to the uint16 counter at addr in mem, as the
// tracee sees it (another tracer's counts included), never below zero.
func addSemaphore(mem fetch.Memory, addr uint64, d int) error {
	var b [2]byte
	if n, err := mem.ReadAt(b[:], int64(addr)); err != nil || n != len(b) {
		return fmt.Errorf("read: %v", err)
	}
	v := int(binary.LittleEndian.Uint16(b[:])) + d
	if v < 0 || v > 0xffff {
		return nil // (someone else's count: left alone)
	}
	binary.LittleEndian.PutUint16(b[:], uint16(v))
	if n, err := mem.WriteAt(b[:], int64(addr)); err != nil || n != len(b) {
		return fmt.Errorf("write: %v", err)
	}
	return nil
}

// lowerSemaphoresIn takes back, in the memory of a fork child let go
// (mem), the counts its copy of our process's memory holds.
func (t *Tracer) lowerSemaphoresIn(mem fetch.Memory) {
	for _, addrs := range t.semaphores {
		for _, addr := range addrs {
			addSemaphore(mem, addr, -1)
		}
	}
}

// lowerAllSemaphores takes back every count t raised, for a detach.
func (t *Tracer) lowerAllSemaphores() {
	for p := range t.semaphores {
		t.lowerSemaphores(p)
	}
}

// SDTMatches lists the SDT probes loc's globs match in the process's
// modules (or the module it names), by provider and name, once each:
// what sdt:PROVIDER:* stands for. Safe from any goroutine.
func (t *Tracer) SDTMatches(loc fetch.Location) ([]symbols.SDTProbe, error) {
	notes, _, err := sdtNotes(t.Symbols(), loc)
	if err != nil {
		return nil, err
	}
	var out []symbols.SDTProbe
	seen := map[string]bool{}
	for _, mn := range notes {
		if key := mn.n.Provider + ":" + mn.n.Name; !seen[key] {
			seen[key] = true
			out = append(out, mn.n)
		}
	}
	if len(out) == 0 {
		return nil, badInput(fmt.Errorf("sdt:%s: no SDT probe matches", loc))
	}
	return out, nil
}
