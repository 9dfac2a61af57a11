package probe

import (
	"bytes"
	"cmp"
	"fmt"
	"io"
	"slices"

	"github.com/probedbg/probe/singlestep"
)

// Sites are written to the tracee in batches: the function tracer makes
// thousands at once, and one /proc/PID/mem access costs a syscall, a walk
// of the page tables and, for text, a copy-on-write fault. A batch writes
// its XOL slots with one write per run of adjacent slots, and its
// breakpoints by reading each stretch of text that holds them, patching
// the copy and writing it back: a few large accesses instead of three
// small ones per site.

// siteBatch holds sites made but not yet written: each is in t.sites, so
// that a second probe at its address finds it, but not yet in memory.
type siteBatch struct {
	sites []*site
	slots []slotWrite
}

// slotWrite is the code that goes in one new XOL slot.
type slotWrite struct {
	addr uint64
	code []byte
}

// runGap is the largest stretch of untouched bytes a run of patched bytes
// spans: below a page, every page a run covers holds one of its sites and
// so belongs to a mapping we patch, and reading a few unchanged bytes
// costs less than another access.
const runGap = 4096

// byteRun is a stretch of tracee memory read, patched and written back
// in one access.
type byteRun struct {
	lo    uint64
	orig  []byte // as read
	bytes []byte // as written
	sites []*site
}

// writeSites writes a batch's slots, then its breakpoints. On failure
// nothing of it is left: its sites are taken out of t.sites and the text
// is as it was; the slots stay allocated, unused.
func (t *Tracer) writeSites(b *siteBatch) error {
	if len(b.sites) == 0 {
		return nil
	}
	t.holdForInstall()
	err := t.writeSlots(b.slots)
	if err == nil {
		err = t.writeBreakpoints(b.sites)
	}
	if err != nil {
		t.forgetSites(b.sites)
	}
	return err
}

// forgetSites takes sites whose breakpoints were never written out of
// t.sites.
func (t *Tracer) forgetSites(sites []*site) {
	for _, st := range sites {
		if t.sites[st.addr] == st {
			delete(t.sites, st.addr)
		}
	}
}

// writeSlots writes slot code, one write per run of adjacent slots; the
// rest of each slot is filled with breakpoints.
func (t *Tracer) writeSlots(slots []slotWrite) error {
	slots = slices.Clone(slots)
	slices.SortFunc(slots, func(a, b slotWrite) int { return cmp.Compare(a.addr, b.addr) })
	var buf []byte
	for i := 0; i < len(slots); {
		// (A detour's code may take several slots.)
		j := i + 1
		for j < len(slots) && slots[j].addr == slotsEnd(slots[j-1]) {
			j++
		}
		// The last slot's rest too: a thread let go past a copy with no
		// jump back (its step's stop taken when we were killed) meets a
		// breakpoint (rescue.go), not the zeros of a fresh mapping.
		size := slotsEnd(slots[j-1]) - slots[i].addr
		buf = slices.Grow(buf[:0], int(size))[:size]
		// Slots start at multiples of the breakpoint's length. (Copied
		// in doubling runs: byte by byte, the fill was a tenth of
		// writing Lua's ~700 detours.)
		n := copy(buf, singlestep.BreakpointInsn)
		for n < len(buf) {
			n += copy(buf[n:], buf[:n])
		}
		for _, s := range slots[i:j] {
			copy(buf[s.addr-slots[i].addr:], s.code)
		}
		if _, err := t.proc.WriteAt(buf, int64(slots[i].addr)); err != nil {
			return fmt.Errorf("write XOL slot: %w", err)
		}
		i = j
	}
	return nil
}

// slotsEnd is where the slots s's code takes end.
func slotsEnd(s slotWrite) uint64 {
	return s.addr + uint64(max(1, (len(s.code)+singlestep.SlotSize-1)/singlestep.SlotSize)*singlestep.SlotSize)
}

// writeBreakpoints checks that each site's byte in memory is still the
// file's and writes the breakpoints. Every run is read and checked before
// any is written; a failed write puts back the runs already written.
func (t *Tracer) writeBreakpoints(sites []*site) error {
	runs, err := t.readRuns(sites)
	if err != nil {
		return err
	}
	for _, r := range runs {
		for _, st := range r.sites {
			if !bytes.HasPrefix(r.orig[st.addr-r.lo:], st.orig) {
				return fmt.Errorf("%s: code in memory differs from the file (already patched by someone else?)", st.where)
			}
			copy(r.bytes[st.addr-r.lo:], singlestep.BreakpointInsn)
		}
	}
	for _, st := range sites {
		t.rescueSite(st)
	}
	// In text_poke_bp's order: the breakpoints, then the rest of each
	// instruction (a thread running it in place has fetched it whole).
	for pass := range 1 + min(1, tailBytes(sites)) {
		for i, r := range runs {
			if pass == 1 {
				for _, st := range r.sites {
					copy(r.bytes[st.addr-r.lo:], padBreakpoint(len(st.orig)))
				}
			}
			if _, err := t.proc.WriteAt(r.bytes, int64(r.lo)); err != nil {
				for _, done := range runs[:i+1] {
					t.proc.WriteAt(done.orig, int64(done.lo))
				}
				return fmt.Errorf("write breakpoint at %s: %w", r.sites[0].where, err)
			}
		}
	}
	return nil
}

// tailBytes is how many bytes of sites' instructions lie past their
// breakpoints' first: 0 where a breakpoint is the whole instruction
// (arm64).
func tailBytes(sites []*site) (n int) {
	for _, st := range sites {
		n += len(st.orig) - len(singlestep.BreakpointInsn)
	}
	return n
}

// padBreakpoint is what goes over an instruction of n bytes at a site:
// breakpoints over all of it. A thread we stopped at one and never
// answered (we were killed: the kernel lets it go where it stopped,
// past the first) meets the next, and the rescue handler's signal
// (rescue.go), not the instruction's tail read as code.
func padBreakpoint(n int) []byte {
	brk := singlestep.BreakpointInsn
	b := make([]byte, 0, max(n, len(brk)))
	for len(b) < n || len(b) == 0 {
		b = append(b, brk...)
	}
	return b
}

// restoreSites puts back the original byte of each site, a run at a time,
// or byte by byte where a run cannot be read (a module unmapped since).
// It returns the first error.
func (t *Tracer) restoreSites(sites []*site) error {
	return t.restoreSitesIn(t.proc, sites)
}

// restoreSitesIn is restoreSites into mem, a process whose text is a copy
// of ours (a forked child): the runs are read from ours.
func (t *Tracer) restoreSitesIn(mem io.WriterAt, sites []*site) error {
	var first error
	runs, _ := t.readRuns(sites)
	for _, r := range runs {
		if r.orig == nil {
			for _, st := range r.sites {
				if _, err := mem.WriteAt(st.origBytes(), int64(st.addr)); err != nil && first == nil {
					first = fmt.Errorf("restore %s: %w", st.where, err)
				}
			}
			continue
		}
		// The rest of each instruction first, the breakpoint last.
		if brk := len(singlestep.BreakpointInsn); tailBytes(r.sites) > 0 {
			for _, st := range r.sites {
				copy(r.bytes[st.addr-r.lo+uint64(brk):], st.origBytes()[brk:])
			}
			mem.WriteAt(r.bytes, int64(r.lo))
		}
		for _, st := range r.sites {
			copy(r.bytes[st.addr-r.lo:], st.origBytes())
		}
		if _, err := mem.WriteAt(r.bytes, int64(r.lo)); err != nil && first == nil {
			first = fmt.Errorf("restore %s: %w", r.sites[0].where, err)
		}
	}
	if mem == io.WriterAt(t.proc) {
		for _, st := range sites {
			t.rescueUntext(st.addr)
		}
	}
	return first
}

// readRuns groups sites (by address) into runs and reads each; a run
// that cannot be read has a nil orig, and the first such error is
// returned with all the runs.
func (t *Tracer) readRuns(sites []*site) ([]*byteRun, error) {
	return t.readRunsOf(sites, func(st *site) int { return len(st.origBytes()) })
}

// readRunsOf is readRuns of size(st) bytes at each site st.
func (t *Tracer) readRunsOf(sites []*site, size func(*site) int) ([]*byteRun, error) {
	sorted := slices.Clone(sites)
	slices.SortFunc(sorted, func(a, b *site) int { return cmp.Compare(a.addr, b.addr) })
	var runs []*byteRun
	var first error
	for i := 0; i < len(sorted); {
		j := i + 1
		for j < len(sorted) && sorted[j].addr-sorted[j-1].addr <= runGap {
			j++
		}
		lo, hi := sorted[i].addr, uint64(0)
		for _, st := range sorted[i:j] {
			hi = max(hi, st.addr+uint64(size(st)))
		}
		r := &byteRun{lo: lo, sites: sorted[i:j]}
		buf := make([]byte, 2*(hi-lo))
		r.orig, r.bytes = buf[:hi-lo], buf[hi-lo:]
		if _, err := t.proc.ReadAt(r.orig, int64(lo)); err != nil {
			r.orig, r.bytes = nil, nil
			if first == nil {
				first = fmt.Errorf("read %s: %w", r.sites[0].where, err)
			}
		} else {
			copy(r.bytes, r.orig)
		}
		runs = append(runs, r)
		i = j
	}
	return runs, first
}
