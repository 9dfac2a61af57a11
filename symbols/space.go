package symbols

import (
	"debug/elf"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
)

// Space is the address space of a process, or of a binary not running.
type Space struct {
	Pid    int       // 0 for a binary on disk
	Mapped []*Mapped // main executable first, then libraries in maps order
}

// Mapped is one ELF file placed in a Space.
type Mapped struct {
	*Module
	Name       string // basename, e.g. "libc.so.6"
	Start, End uint64 // lowest and highest runtime address of the file's mappings
	Bias       uint64 // runtime address = link address + Bias

	filePath string      // the file's path in maps (or as given), for FindModule
	ranges   []addrRange // runtime ranges actually mapped
}

type addrRange struct{ start, end uint64 }

// maxSuggestions bounds the "did you mean" list of an UnknownSymbolError.
const maxSuggestions = 5

const deletedSuffix = " (deleted)"

// LoadProcess reads /proc/PID/maps and opens each ELF file mapped in the
// process. Files that cannot be opened or are not ELF are left out, except
// the main executable, whose failure is an error.
func LoadProcess(pid int) (*Space, error) {
	if pid <= 0 {
		return nil, fmt.Errorf("load process %d: invalid pid", pid)
	}
	procDir := "/proc/" + strconv.Itoa(pid)
	maps, err := readMaps(procDir)
	if err != nil {
		return nil, fmt.Errorf("load process %d: %w", pid, err)
	}
	files := groupByFile(maps)
	if len(files) == 0 {
		return nil, fmt.Errorf("load process %d: no mapped files (kernel thread or zombie?)", pid)
	}
	mainIdx := findMainFile(procDir, files)

	s := &Space{Pid: pid}
	order := make([]int, 0, len(files))
	order = append(order, mainIdx)
	for i := range files {
		if i != mainIdx {
			order = append(order, i)
		}
	}
	for _, i := range order {
		isMain := i == mainIdx
		mapped, err := openMapped(procDir, files[i], isMain)
		if err != nil {
			if isMain {
				return nil, fmt.Errorf("load process %d: main executable: %w", pid, err)
			}
			continue
		}
		s.Mapped = append(s.Mapped, mapped...)
	}
	return s, nil
}

// mappedFile is one file's mappings, in address order.
type mappedFile struct {
	path  string // as in maps, possibly ending in " (deleted)"
	dev   string
	inode uint64
	maps  []mapping
}

// groupByFile collects file-backed mappings per file (device and inode),
// in order of first appearance.
func groupByFile(maps []mapping) []*mappedFile {
	type fileKey struct {
		dev   string
		inode uint64
	}
	var files []*mappedFile
	byKey := make(map[fileKey]*mappedFile)
	for _, mp := range maps {
		if mp.inode == 0 || !strings.HasPrefix(mp.path, "/") || strings.HasPrefix(mp.path, "/dev/") {
			continue // anonymous, [vdso], [heap], devices
		}
		key := fileKey{mp.dev, mp.inode}
		if mf := byKey[key]; mf != nil {
			mf.maps = append(mf.maps, mp)
			continue
		}
		mf := &mappedFile{path: mp.path, dev: mp.dev, inode: mp.inode, maps: []mapping{mp}}
		byKey[key] = mf
		files = append(files, mf)
	}
	return files
}

// findMainFile picks the file /proc/PID/exe points to, by path and failing
// that by device and inode; the first file otherwise.
func findMainFile(procDir string, files []*mappedFile) int {
	if exe, err := os.Readlink(procDir + "/exe"); err == nil {
		for i, mf := range files {
			if mf.path == exe {
				return i
			}
		}
	}
	if st, err := os.Stat(procDir + "/exe"); err == nil {
		for i, mf := range files {
			if statMatches(st, mf) {
				return i
			}
		}
	}
	return 0
}

// statMatches reports whether st describes the file the mappings are of.
func statMatches(st os.FileInfo, mf *mappedFile) bool {
	sys, ok := st.Sys().(*syscall.Stat_t)
	if !ok || !st.Mode().IsRegular() {
		return false
	}
	return sys.Ino == mf.inode && devString(uint64(sys.Dev)) == mf.dev
}

// devString formats a dev_t the way /proc/PID/maps does ("%02x:%02x").
func devString(dev uint64) string {
	major := (dev>>8)&0xfff | (dev>>32)&^0xfff
	minor := dev&0xff | (dev>>12)&^0xff
	return fmt.Sprintf("%02x:%02x", major, minor)
}

// openMapped opens the file behind mf and returns one Mapped per time it
// is loaded (more than one only with dlmopen and the like). The path in maps
// is used only when it still names the mapped file; a deleted or replaced
// file is reached through /proc/PID/exe (main executable) or
// /proc/PID/map_files.
func openMapped(procDir string, mf *mappedFile, isMain bool) ([]*Mapped, error) {
	path, deleted := strings.CutSuffix(mf.path, deletedSuffix)
	var mod *Module
	var errs []error
	try := func(openPath string) {
		st, err := os.Stat(openPath)
		if err != nil {
			errs = append(errs, err)
			return
		}
		if !statMatches(st, mf) {
			errs = append(errs, fmt.Errorf("%s is not the mapped file (device %s inode %d)", openPath, mf.dev, mf.inode))
			return
		}
		if mod, err = openModule(openPath, path); err != nil {
			errs = append(errs, err)
		}
	}
	if !deleted {
		if mod = takePreloaded(path, mf); mod == nil {
			try(path)
		}
	}
	if mod == nil && isMain {
		try(procDir + "/exe")
	}
	if mod == nil {
		first := mf.maps[0]
		try(fmt.Sprintf("%s/map_files/%x-%x", procDir, first.start, first.end))
	}
	if mod == nil {
		return nil, fmt.Errorf("open %s: %w", mf.path, errors.Join(errs...))
	}
	loads, err := splitLoads(mod, mf.maps)
	if err != nil {
		mod.Close()
		return nil, err
	}
	var out []*Mapped
	for _, l := range loads {
		m := &Mapped{
			Module:   mod,
			Name:     filepath.Base(path),
			Start:    l.maps[0].start,
			End:      l.maps[len(l.maps)-1].end,
			Bias:     l.bias,
			filePath: path,
		}
		for _, mp := range l.maps {
			if n := len(m.ranges); n > 0 && m.ranges[n-1].end == mp.start {
				m.ranges[n-1].end = mp.end
			} else {
				m.ranges = append(m.ranges, addrRange{mp.start, mp.end})
			}
		}
		out = append(out, m)
	}
	return out, nil
}

// fileLoad is one placement of a file in memory.
type fileLoad struct {
	bias uint64
	maps []mapping
}

// splitLoads divides a file's mappings into placements: each starts at a
// mapping that fixes a bias, and takes the following mappings that lie in
// the file's address span at that bias. Placements without executable
// code, such as the program mmapping the file as data, are dropped unless
// nothing else is left.
func splitLoads(mod *Module, maps []mapping) ([]fileLoad, error) {
	lo, hi := mod.linkSpan()
	var loads, dataOnly []fileLoad
	for rest := maps; len(rest) > 0; {
		bias, err := loadBias(mod, rest)
		if err != nil {
			break
		}
		n := 1
		for n < len(rest) && rest[n].start >= lo+bias && rest[n].end <= hi+bias {
			n++
		}
		l := fileLoad{bias, rest[:n]}
		rest = rest[n:]
		if slices.ContainsFunc(l.maps, func(mp mapping) bool { return strings.Contains(mp.perms, "x") }) {
			loads = append(loads, l)
		} else {
			dataOnly = append(dataOnly, l)
		}
	}
	if len(loads) == 0 && len(dataOnly) > 0 {
		loads = dataOnly[:1]
	}
	if len(loads) == 0 {
		return nil, fmt.Errorf("%s: no mapping corresponds to a loadable segment", mod.Path)
	}
	return loads, nil
}

// loadBias finds the runtime-minus-link offset from the lowest mapping that
// maps a PT_LOAD segment's file data: a segment with file offset Off and
// address Vaddr is mapped from file offset pageDown(Off) at runtime address
// pageDown(Vaddr + bias), so bias = start - (Vaddr - (Off - offset)). This
// holds for any page of the segment, also after mprotect splits it.
func loadBias(mod *Module, maps []mapping) (uint64, error) {
	if !mod.PIE {
		return 0, nil // ET_EXEC is loaded at its link addresses
	}
	pageMask := uint64(os.Getpagesize()) - 1
	for _, mp := range maps {
		if strings.HasPrefix(mp.perms, "---") {
			continue // gaps reserved between segments
		}
		exec := strings.Contains(mp.perms, "x")
		var seg *elf.ProgHeader
		for i := range mod.loads {
			p := &mod.loads[i]
			if p.Filesz == 0 || mp.offset < p.Off&^pageMask || mp.offset >= p.Off+p.Filesz {
				continue
			}
			// Adjacent segments can share a file page; the permissions
			// tell them apart.
			if (p.Flags&elf.PF_X != 0) == exec {
				seg = p
				break
			}
			if seg == nil {
				seg = p
			}
		}
		if seg != nil {
			return mp.start + (seg.Off - mp.offset) - seg.Vaddr, nil
		}
	}
	return 0, fmt.Errorf("%s: no mapping corresponds to a loadable segment", mod.Path)
}

// ShelfBias places a shared library that is not mapped anywhere (read
// from its file, to check a probe or a patch against it) far from where
// Linux maps programs and libraries on x86-64 and arm64, so that its
// addresses are told apart from theirs.
const ShelfBias = 1 << 46

// LoadBinary makes a Space of a binary that is not running: one Mapped
// at its link addresses.
func LoadBinary(path string) (*Space, error) {
	return LoadBinaryAt(path, 0)
}

// LoadBinaryAt is LoadBinary with the binary placed bias past its link
// addresses, as a shared library is loaded: the DWARF of a library that
// has no entry point can only be read so (at bias 0 delve cannot place
// it). ShelfBias is a place for a library that is not running.
func LoadBinaryAt(path string, bias uint64) (*Space, error) {
	mod, err := OpenModule(path)
	if err != nil {
		return nil, err
	}
	if len(mod.loads) == 0 {
		mod.Close()
		return nil, fmt.Errorf("load %s: no loadable segments", path)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		abs = path
	}
	m := &Mapped{Module: mod, Name: filepath.Base(path), filePath: abs, Bias: bias}
	m.Start = ^uint64(0)
	for _, p := range mod.loads {
		m.Start = min(m.Start, p.Vaddr+bias)
		m.End = max(m.End, p.Vaddr+p.Memsz+bias)
		m.ranges = append(m.ranges, addrRange{p.Vaddr + bias, p.Vaddr + p.Memsz + bias})
	}
	return &Space{Mapped: []*Mapped{m}}, nil
}

// Main returns the main executable, or nil for an empty Space.
func (s *Space) Main() *Mapped {
	if len(s.Mapped) == 0 {
		return nil
	}
	return s.Mapped[0]
}

// FindModule finds a loaded file by basename ("libc.so.6"), short name
// ("libc" matches "libc.so.6" and "libc-2.36.so"), or path (symlinks
// resolved). Exact basenames win over short-name matches.
func (s *Space) FindModule(name string) (*Mapped, error) {
	var matches []*Mapped
	if strings.Contains(name, "/") {
		matches = s.byPath(name)
	} else {
		for _, m := range s.Mapped {
			if m.Name == name {
				matches = append(matches, m)
			}
		}
		if len(matches) == 0 {
			for _, m := range s.Mapped {
				if strings.HasPrefix(m.Name, name+".") || strings.HasPrefix(m.Name, name+"-") {
					matches = append(matches, m)
				}
			}
		}
	}
	switch len(matches) {
	case 0:
		loaded := make([]string, len(s.Mapped))
		for i, m := range s.Mapped {
			loaded[i] = m.Name
		}
		return nil, &UnknownModuleError{Name: name, Loaded: loaded}
	case 1:
		return matches[0], nil
	}
	paths := make([]string, len(matches))
	for i, m := range matches {
		paths[i] = m.filePath
	}
	return nil, &AmbiguousModuleError{Name: name, Candidates: paths}
}

func (s *Space) byPath(name string) []*Mapped {
	want, err := filepath.Abs(name)
	if err != nil {
		want = filepath.Clean(name)
	}
	wantReal, err := filepath.EvalSymlinks(want)
	if err != nil {
		wantReal = want
	}
	wantStat, statErr := os.Stat(want)
	var out []*Mapped
	for _, m := range s.Mapped {
		match := m.filePath == want || m.filePath == wantReal || m.Path == want
		if !match {
			if real, err := filepath.EvalSymlinks(m.filePath); err == nil && real == wantReal {
				match = true
			}
		}
		if !match && statErr == nil {
			// Hard links and bind mounts: same file under another name.
			if st, err := os.Stat(m.Path); err == nil && os.SameFile(st, wantStat) {
				match = true
			}
		}
		if match {
			out = append(out, m)
		}
	}
	return out
}

// Lookup finds a symbol by exact name in the main executable, then in the
// libraries in order. The runtime address is Symbol.Addr + Mapped.Bias.
func (s *Space) Lookup(name string) (*Mapped, Symbol, error) {
	for _, m := range s.Mapped {
		if sym, ok := m.Module.Lookup(name); ok {
			return m, sym, nil
		}
	}
	var r ranker
	for i, m := range s.Mapped {
		r.add(name, m.functionNames(), min(i, 1))
	}
	return nil, Symbol{}, &UnknownSymbolError{Name: name, Suggestions: r.top(maxSuggestions)}
}

// Resolve is Lookup within one module, with an *UnknownSymbolError (naming
// the module) when the symbol is missing.
func (m *Mapped) Resolve(name string) (Symbol, error) {
	if sym, ok := m.Module.Lookup(name); ok {
		return sym, nil
	}
	return Symbol{}, &UnknownSymbolError{Name: name, Module: m.Name, Suggestions: m.Suggest(name, maxSuggestions)}
}

// ModuleAt returns the module mapped at a runtime address, or nil.
func (s *Space) ModuleAt(addr uint64) *Mapped {
	for _, m := range s.Mapped {
		for _, r := range m.ranges {
			if addr >= r.start && addr < r.end {
				return m
			}
		}
	}
	return nil
}

// Describe formats a runtime address ftrace-style, "sym+0xoff/0xsize", or
// as "0x..." when no symbol contains it.
func (s *Space) Describe(addr uint64) string {
	if m := s.ModuleAt(addr); m != nil {
		if sym, ok := m.SymbolAt(addr - m.Bias); ok {
			return fmt.Sprintf("%s+0x%x/0x%x", sym.Name, addr-m.Bias-sym.Addr, sym.Size)
		}
	}
	return fmt.Sprintf("0x%x", addr)
}

// Close closes every module.
func (s *Space) Close() error {
	var errs []error
	for _, m := range s.Mapped {
		if err := m.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Ranges returns the runtime address ranges the module is mapped at,
// each [start, end).
func (m *Mapped) Ranges() [][2]uint64 {
	rs := make([][2]uint64, len(m.ranges))
	for i, r := range m.ranges {
		rs[i] = [2]uint64{r.start, r.end}
	}
	return rs
}

// TableMapped is a module known only by its symbol tables, as a
// recording keeps them (Functions, Objects: sorted by address): SymbolAt
// and Space.Describe answer for it as for the file it was read from;
// nothing else of the file is there.
func TableMapped(name string, bias uint64, ranges [][2]uint64, funcs, objects []Symbol) *Mapped {
	mod := &Module{Path: name, funcs: funcs, objects: objects}
	mod.loadOnce.Do(func() {})
	mod.tablesOnce.Do(func() {})
	m := &Mapped{Module: mod, Name: name, Bias: bias}
	for i, r := range ranges {
		m.ranges = append(m.ranges, addrRange{r[0], r[1]})
		if i == 0 || r[0] < m.Start {
			m.Start = r[0]
		}
		m.End = max(m.End, r[1])
	}
	return m
}
