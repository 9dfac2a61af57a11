package symbols

import (
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"
	"os"
	"runtime"
	"slices"
	"sort"
	"sync"
	"syscall"

	"github.com/probedbg/probe/singlestep"
)

// BranchTargets is every place in a module's code that is reached other
// than by falling through from the instruction before: the targets of its
// direct branches (found by a linear sweep of its executable sections)
// and its entry points (function symbols, FDE starts), at link addresses.
// A jump-optimised probe overwrites several instructions: none but the
// first may be one of these. What no sweep sees is not here: indirect
// jumps (a jump table lands where its function's code says), code made at
// run time.
//
//	bt, err := mod.BranchTargets()
//	if l, ok := bt.Inside(site, site+5); ok { /* keep the int3: l.From jumps to l.At */ }
type BranchTargets struct {
	branches []singlestep.Branch // sorted by To
	entries  []uint64            // sorted
}

// Landing is a place reached other than by falling through: the target
// of the branch at From, or an entry point (Entry: a function symbol or
// an FDE starts at At; From is 0).
type Landing struct {
	At, From uint64
	Entry    bool
}

// Inside returns a landing strictly between lo and hi, if there is one.
func (bt *BranchTargets) Inside(lo, hi uint64) (Landing, bool) {
	if l := bt.Landings(lo, hi); len(l) > 0 {
		return l[0], true
	}
	return Landing{}, false
}

// Landings returns every landing strictly between lo and hi: the
// branches' first, by where they land.
func (bt *BranchTargets) Landings(lo, hi uint64) []Landing {
	var out []Landing
	for i := sort.Search(len(bt.branches), func(i int) bool { return bt.branches[i].To > lo }); i < len(bt.branches) && bt.branches[i].To < hi; i++ {
		out = append(out, Landing{At: bt.branches[i].To, From: bt.branches[i].From})
	}
	for j := sort.Search(len(bt.entries), func(j int) bool { return bt.entries[j] > lo }); j < len(bt.entries) && bt.entries[j] < hi; j++ {
		out = append(out, Landing{At: bt.entries[j], Entry: true})
	}
	return out
}

// branchSet is one file's BranchTargets, computed once.
type branchSet struct {
	once sync.Once
	bt   *BranchTargets
	err  error
}

// fileKey names a file's contents as they were when opened: the same key
// is the same code. Any write or rename moves a file's change time,
// which no one can set as one can its modification time.
type fileKey struct {
	dev, ino, size uint64
	mtime, ctime   syscall.Timespec
}

// statKey is the key of the open file f.
func statKey(f *os.File) (fileKey, bool) {
	st, err := f.Stat()
	if err != nil {
		return fileKey{}, false
	}
	sys, ok := st.Sys().(*syscall.Stat_t)
	if !ok {
		return fileKey{}, false
	}
	return fileKey{dev: sys.Dev, ino: sys.Ino, size: uint64(sys.Size), mtime: sys.Mtim, ctime: sys.Ctim}, true
}

// branchSets shares each file's BranchTargets between the Modules opened
// on it: every process of a run (children followed with -f, exec'd
// programs) opens its libraries anew.
var branchSets struct {
	sync.Mutex
	byFile map[fileKey]*branchSet
}

// BranchTargets returns the module's branch targets and entry points,
// computed once per file (a few ms for a libc). An error means the code
// could not be read: nothing can be said about where it jumps.
func (m *Module) BranchTargets() (*BranchTargets, error) {
	m.branchOnce.Do(func() { m.branches = m.sharedBranchSet() })
	s := m.branches
	s.once.Do(func() {
		if s.bt, s.err = m.findBranchTargets(); s.err != nil {
			forgetBranchSet(s) // (this module's failure, closed meanwhile: another may read the file)
		}
	})
	return s.bt, s.err
}

// forgetBranchSet takes s out of the shared sets, if it is there: the
// next Module opened on its file makes a set of its own. A module can be
// closed while a search in the background reads it (an exec, a
// dlclose): its error is not the file's.
func forgetBranchSet(s *branchSet) {
	branchSets.Lock()
	defer branchSets.Unlock()
	for k, v := range branchSets.byFile {
		if v == s {
			delete(branchSets.byFile, k)
		}
	}
}

// PrefetchBranchTargets starts finding the module's branch targets in
// the background, once, for a caller that will ask for them later (a
// detour's plan: libc's, from the cache, take ~1-3 ms).
func (m *Module) PrefetchBranchTargets() {
	m.prefetch.Do(func() { go m.BranchTargets() })
}

// sharedBranchSet returns the set of the module's file, shared by every
// Module opened on it, or one of its own if the file cannot be told apart.
func (m *Module) sharedBranchSet() *branchSet {
	if m.file == nil {
		return &branchSet{}
	}
	key, ok := statKey(m.file)
	if !ok {
		return &branchSet{}
	}
	branchSets.Lock()
	defer branchSets.Unlock()
	if branchSets.byFile == nil {
		branchSets.byFile = make(map[fileKey]*branchSet)
	}
	s := branchSets.byFile[key]
	if s == nil {
		s = &branchSet{}
		branchSets.byFile[key] = s
	}
	return s
}

func (m *Module) findBranchTargets() (bt *BranchTargets, err error) {
	if m.elf == nil || m.elf.Machine != elf.EM_X86_64 {
		return nil, fmt.Errorf("%s: branch targets are known for x86-64 code only", m.Path)
	}
	key := m.branchKey()
	if bt, err := loadBranchCache(key); err == nil {
		return bt, nil
	}
	code, err := m.executableCode()
	if err != nil {
		return nil, err
	}
	bt = &BranchTargets{entries: m.entryPoints()}
	defer storeBranchCache(key, bt)
	for _, c := range code {
		lo := sort.Search(len(bt.entries), func(i int) bool { return bt.entries[i] >= c.addr })
		hi := sort.Search(len(bt.entries), func(i int) bool { return bt.entries[i] >= c.addr+uint64(len(c.code)) })
		bt.branches = append(bt.branches, sweepParallel(c, bt.entries[lo:hi])...)
	}
	sortByTarget(bt.branches)
	bt.branches = slices.Compact(bt.branches)
	return bt, nil
}

// sweepParallel is singlestep.SweepBranches of c, a large stretch cut at
// entries into parts swept at once, one a CPU (libc's 1.7 MB took ~27
// ms, the most of a probe's start on it). A part's sweep goes on past
// its end as far as the one after it could have made it stop
// (SweepRunOn), to the next entry: what it finds there, the next part
// finds too (the duplicates are compacted out once sorted), and no
// instruction is cut at its end.
func sweepParallel(c codeRange, entries []uint64) []singlestep.Branch {
	parts := min(runtime.GOMAXPROCS(0), 4)
	if parts < 2 || len(c.code) < 256<<10 || len(entries) < 2*parts {
		return singlestep.SweepBranches(c.code, c.addr, entries)
	}
	end := c.addr + uint64(len(c.code))
	cuts := []int{0} // indexes in entries where a part starts
	for p := 1; p < parts; p++ {
		at := c.addr + uint64(len(c.code))*uint64(p)/uint64(parts)
		i := sort.Search(len(entries), func(i int) bool { return entries[i] >= at })
		if i > cuts[len(cuts)-1] && i < len(entries) {
			cuts = append(cuts, i)
		}
	}
	out := make([][]singlestep.Branch, len(cuts))
	var wg sync.WaitGroup
	for p, first := range cuts {
		from, stop := c.addr, end
		if p > 0 {
			from = entries[first]
		}
		last := len(entries)
		if p+1 < len(cuts) {
			last = cuts[p+1]
			// On to the first entry past the run-on's reach, or the end.
			reach := entries[last] + singlestep.SweepRunOn
			if k := sort.Search(len(entries), func(i int) bool { return entries[i] >= reach }); k < len(entries) {
				stop = entries[k]
			}
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			out[p] = singlestep.SweepBranches(c.code[from-c.addr:stop-c.addr], from, entries[first:last])
		}()
	}
	wg.Wait()
	return slices.Concat(out...)
}

// sortByTarget sorts branches by To: a radix sort, a byte a pass over the
// bytes in which the targets differ (three in a libc), five times as fast
// as a comparison sort of its 66,000 branches.
func sortByTarget(b []singlestep.Branch) {
	if len(b) < 2 {
		return
	}
	lo, hi := b[0].To, b[0].To
	for _, x := range b {
		lo, hi = min(lo, x.To), max(hi, x.To)
	}
	src, dst := b, make([]singlestep.Branch, len(b))
	for shift := 0; shift < bits.Len64(hi-lo); shift += 8 {
		var at [256]int
		for _, x := range src {
			at[byte((x.To-lo)>>shift)]++
		}
		sum := 0
		for k, n := range at {
			at[k], sum = sum, sum+n
		}
		for _, x := range src {
			k := byte((x.To - lo) >> shift)
			dst[at[k]] = x
			at[k]++
		}
		src, dst = dst, src
	}
	copy(b, src)
}

// codeRange is a stretch of a file's executable code at its link address.
type codeRange struct {
	addr uint64
	code []byte
}

// executableCode reads the executable sections or, in a file without
// section headers, the executable segments.
func (m *Module) executableCode() ([]codeRange, error) {
	var out []codeRange
	for _, s := range m.elf.Sections {
		if s.Type != elf.SHT_PROGBITS || s.Flags&elf.SHF_EXECINSTR == 0 || s.Flags&elf.SHF_ALLOC == 0 {
			continue
		}
		data, err := s.Data()
		if err != nil {
			return nil, fmt.Errorf("read %s of %s: %w", s.Name, m.Path, err)
		}
		out = append(out, codeRange{s.Addr, data})
	}
	if len(m.elf.Sections) > 0 {
		return out, nil
	}
	for _, p := range m.elf.Progs {
		if p.Type != elf.PT_LOAD || p.Flags&elf.PF_X == 0 {
			continue
		}
		data := make([]byte, p.Filesz)
		if _, err := p.ReadAt(data, 0); err != nil {
			return nil, fmt.Errorf("read the code of %s at %#x: %w", m.Path, p.Vaddr, err)
		}
		out = append(out, codeRange{p.Vaddr, data})
	}
	return out, nil
}

// entryPoints returns the sorted, distinct addresses of the module's
// function symbols (of any size) and FDEs.
func (m *Module) entryPoints() []uint64 {
	m.LoadSymbols()
	var out []uint64
	for i := range m.entries {
		if m.entries[i].Func {
			out = append(out, m.entries[i].Addr)
		}
	}
	out = append(out, m.fdeStarts()...)
	slices.Sort(out)
	return slices.Compact(out)
}

// fdeStarts returns the first address of each FDE: from .eh_frame_hdr's
// search table when it has the usual encoding, which costs nothing to
// read, else from the parsed call frame information.
func (m *Module) fdeStarts() []uint64 {
	if starts, err := m.ehFrameHdrStarts(); err == nil {
		return starts
	}
	fdes := m.frameEntries()
	starts := make([]uint64, 0, len(fdes))
	for _, f := range fdes {
		starts = append(starts, f.Begin())
	}
	return starts
}

// DWARF pointer encodings of .eh_frame_hdr (LSB's "Linux Standard Base
// Core Specification", 10.6.2).
const (
	dwEhPeUdata4  = 0x03
	dwEhPeSdata4  = 0x0b
	dwEhPePcrel   = 0x10
	dwEhPeDatarel = 0x30
)

var errEhFrameHdr = errors.New("no .eh_frame_hdr search table in the usual encoding")

// ehFrameHdrStarts reads the initial locations of .eh_frame_hdr's binary
// search table, as gcc's and lld's linkers write it: pairs of 4-byte
// offsets from the section's start.
func (m *Module) ehFrameHdrStarts() ([]uint64, error) {
	s := m.elf.Section(".eh_frame_hdr")
	if s == nil || s.Type != elf.SHT_PROGBITS {
		return nil, errEhFrameHdr
	}
	data, err := s.Data()
	if err != nil || len(data) < 12 || data[0] != 1 || data[1] != dwEhPePcrel|dwEhPeSdata4 ||
		data[2] != dwEhPeUdata4 || data[3] != dwEhPeDatarel|dwEhPeSdata4 {
		return nil, errEhFrameHdr
	}
	n := uint64(binary.LittleEndian.Uint32(data[8:]))
	table := data[12:]
	if n > uint64(len(table))/8 {
		return nil, errEhFrameHdr
	}
	starts := make([]uint64, n)
	for i := range starts {
		starts[i] = s.Addr + uint64(int64(int32(binary.LittleEndian.Uint32(table[8*i:]))))
	}
	return starts, nil
}
