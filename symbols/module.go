package symbols

import (
	"bytes"
	"cmp"
	"debug/elf"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
)

// Symbol is one named location in an ELF file.
type Symbol struct {
	Name string
	Addr uint64 // link-time (file) virtual address
	Size uint64
	Func bool // STT_FUNC or STT_GNU_IFUNC; false for data objects and untyped symbols
	// IFunc: STT_GNU_IFUNC, the address of a resolver that picks the
	// implementation at load time (IFuncSlot finds what it picked).
	IFunc bool
}

// DebugDirs are the global directories searched for separate debug files,
// like gdb's debug-file-directory. Tests point it at a temporary tree.
var DebugDirs = []string{"/usr/lib/debug"}

// sttGNUIFunc is STT_GNU_IFUNC; debug/elf only knows it as STT_LOOS.
const sttGNUIFunc = elf.SymType(10)

// Module is one ELF file's symbol table: .symtab and .dynsym merged, plus the
// .symtab of a separate debug file when the file itself has none.
// Symbols are read lazily, on first use.
type Module struct {
	Path    string // path as opened
	BuildID string // hex, "" if none
	PIE     bool   // ET_DYN

	file  *os.File
	elf   *elf.File
	loads []elf.ProgHeader // PT_LOAD headers sorted by Vaddr
	relro []elf.ProgHeader // PT_GNU_RELRO: read-only once relocated
	// realPath is where the file lives in the file system; it differs from
	// Path when a process's file was opened through /proc/PID/map_files, and
	// is what .gnu_debuglink is resolved against.
	realPath string

	// Tables are built on first use, each when first needed, so that a
	// plain Lookup does not pay for sorting.
	loadOnce   sync.Once
	loadErr    error
	dynOnce    sync.Once
	dynsym     []elf.Symbol // .dynsym, read once (dynamicSymbols)
	dynErr     error
	dynRaw     rawDynsym // .dynsym's bytes, for LookupExported
	goOnce     sync.Once
	builtByGo  bool // BuiltByGo's answer
	debugFile  string
	entries    []entry
	byName     map[string]int32 // best entry for each name
	tablesOnce sync.Once
	funcs      []Symbol            // Functions(): sorted by Addr, one per address
	aliases    map[uint64][]string // the names of funcs that have several, by Addr
	objects    []Symbol            // data objects with a size, sorted by Addr
	namesOnce  sync.Once
	funcNames  []string // distinct function names, for Suggest
	// byDisplay: C++ functions by their demangled name without
	// parameters (DisplayName), for Lookup of a name as users write it.
	displayOnce sync.Once
	byDisplay   map[string][]int32

	debug   debugCache // DWARF, loaded by Mapped.Debug (dwarf.go)
	code    codeCache  // the file's bytes read by ReadCode
	cfi     cfiCache   // call frame information, for unwinding (cfi.go)
	ifunc   ifuncSlots // IRELATIVE GOT slots by resolver (ifunc.go)
	imports imports    // the names of GOT slots and of call sites (imports.go)
	sdt     sdtNotes   // .note.stapsdt (sdt.go)

	branchOnce sync.Once
	prefetch   sync.Once  // PrefetchBranchTargets
	branches   *branchSet // direct branch targets, shared by file (branches.go)
	flows      flowSet    // where each function analysed jumps (flowcache.go)

	profiling  profilingMarks // -pg runtime symbols seen while loading (patchsite.go)
	sitesOnce  sync.Once
	patchSites []PatchSite
}

// entry is a Symbol plus what is needed to choose among duplicates.
type entry struct {
	Symbol
	exported bool // STB_GLOBAL or STB_WEAK
	hidden   bool // a non-default symbol version (name@VER, not name@@VER)
}

// OpenModule opens an ELF file. Its symbols are read on first use; call
// LoadSymbols to see errors from that.
func OpenModule(path string) (*Module, error) {
	return openModule(path, path)
}

func openModule(path, realPath string) (*Module, error) {
	file, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	m, err := newModule(file, path, realPath)
	if err != nil {
		file.Close()
		return nil, err
	}
	return m, nil
}

func newModule(file *os.File, path, realPath string) (*Module, error) {
	ef, err := elf.NewFile(file)
	if err != nil {
		return nil, fmt.Errorf("read ELF %s: %w", path, err)
	}
	m := &Module{
		Path:     path,
		PIE:      ef.Type == elf.ET_DYN,
		file:     file,
		elf:      ef,
		realPath: realPath,
	}
	for _, p := range ef.Progs {
		switch p.Type {
		case elf.PT_LOAD:
			m.loads = append(m.loads, p.ProgHeader)
		case elf.PT_GNU_RELRO:
			m.relro = append(m.relro, p.ProgHeader)
		}
	}
	sort.Slice(m.loads, func(i, j int) bool { return m.loads[i].Vaddr < m.loads[j].Vaddr })
	m.BuildID = buildID(ef)
	return m, nil
}

// Close releases the file.
func (m *Module) Close() error {
	if m.file == nil {
		return nil
	}
	m.closeDebug()
	err := m.file.Close()
	m.file = nil
	return err
}

// DebugFile returns the separate debug file whose symbols were used, or "".
func (m *Module) DebugFile() string {
	m.LoadSymbols()
	return m.debugFile
}

// LoadSymbols reads the symbol tables if not done yet and reports any error
// from doing so. Other methods call it implicitly and treat a failure as
// "no (more) symbols".
func (m *Module) LoadSymbols() error {
	m.loadOnce.Do(func() { m.loadErr = m.loadSymbols() })
	return m.loadErr
}

// dynamicSymbols is the module's .dynsym, read once: several tables
// are built from it.
func (m *Module) dynamicSymbols() ([]elf.Symbol, error) {
	m.dynOnce.Do(func() {
		if m.elf == nil {
			m.dynErr = elf.ErrNoSymbols
			return
		}
		m.dynsym, m.dynErr = m.elf.DynamicSymbols()
	})
	return m.dynsym, m.dynErr
}

// LookupExported is Lookup of a function or object the module exports, for a
// module whose full tables are not read yet and would come from a
// separate debug file (libc's, with libc6-dbg: 11 ms, for names it does
// not have): there only its dynamic symbols are looked at. Elsewhere it
// is Lookup.
func (m *Module) LookupExported(name string) (Symbol, bool) {
	if m.elf == nil || m.elf.Section(".symtab") != nil {
		return m.Lookup(name)
	}
	if s, ok, sure := m.dynRaw.lookup(m.elf, name); sure {
		return s, ok
	}
	dynsym, _ := m.dynamicSymbols()
	for _, s := range dynsym {
		if exportedAs(s, name) {
			typ := elf.ST_TYPE(s.Info)
			return Symbol{Name: s.Name, Addr: s.Value, Size: s.Size, Func: typ != elf.STT_OBJECT, IFunc: typ == sttGNUIFunc}, true
		}
	}
	return Symbol{}, false
}

// exportedAs reports whether s is what LookupExported returns for name.
func exportedAs(s elf.Symbol, name string) bool {
	typ := elf.ST_TYPE(s.Info)
	return s.Name == name && s.Section != elf.SHN_UNDEF && (typ == elf.STT_FUNC || typ == sttGNUIFunc || typ == elf.STT_OBJECT) &&
		!(s.HasVersion && s.VersionIndex.IsHidden()) // (the default version: name@VER is another)
}

// rawDynsym is a 64-bit module's .dynsym, .dynstr and .gnu.version as
// bytes. LookupExported reads them instead of every dynamic symbol
// decoded (libc's: ~3,000 names made strings, 1.4 ms of Lua's start, for
// the few names the tracer looks up).
type rawDynsym struct {
	once             sync.Once
	sym, str, versym []byte
	order            binary.ByteOrder
}

// rawSym is what rawDynsym.each gives of a symbol.
type rawSym struct {
	index       int // in .dynsym, the null symbol 0
	info, other byte
	section     elf.SectionIndex
	value, size uint64
	hidden      bool // of a hidden version (versym's bit 15)
}

// each calls fn with every symbol named name, in the table's order,
// until fn returns true; false if the tables cannot be read as bytes
// (none, or a 32-bit file).
func (r *rawDynsym) each(f *elf.File, name string, fn func(rawSym) bool) bool {
	if !r.load(f) {
		return false
	}
	for i := 1; i < len(r.sym)/elf.Sym64Size; i++ {
		e := r.sym[i*elf.Sym64Size:][:elf.Sym64Size]
		off := int(r.order.Uint32(e[0:4]))
		if off+len(name) >= len(r.str) || r.str[off+len(name)] != 0 || string(r.str[off:off+len(name)]) != name {
			continue
		}
		if fn(r.at(i, e)) {
			break
		}
	}
	return true
}

// every calls fn with every symbol and its name, in the table's order;
// false if the tables cannot be read as bytes.
func (r *rawDynsym) every(f *elf.File, fn func(s rawSym, name []byte)) bool {
	if !r.load(f) {
		return false
	}
	for i := 1; i < len(r.sym)/elf.Sym64Size; i++ {
		e := r.sym[i*elf.Sym64Size:][:elf.Sym64Size]
		off := int(r.order.Uint32(e[0:4]))
		if off >= len(r.str) {
			continue
		}
		name := r.str[off:]
		if n := bytes.IndexByte(name, 0); n >= 0 {
			name = name[:n]
		}
		fn(r.at(i, e), name)
	}
	return true
}

// at is symbol i, whose entry is e.
func (r *rawDynsym) at(i int, e []byte) rawSym {
	s := rawSym{index: i, info: e[4], other: e[5], section: elf.SectionIndex(r.order.Uint16(e[6:8])), value: r.order.Uint64(e[8:16]), size: r.order.Uint64(e[16:24])}
	if v := 2 * i; v+2 <= len(r.versym) {
		s.hidden = elf.VersionIndex(r.order.Uint16(r.versym[v:])).IsHidden()
	}
	return s
}

// load reads the tables once; false if they cannot be read as bytes
// (none, or a 32-bit file).
func (r *rawDynsym) load(f *elf.File) bool {
	r.once.Do(func() {
		ds := f.SectionByType(elf.SHT_DYNSYM)
		if f.Class != elf.ELFCLASS64 || ds == nil || ds.Link >= uint32(len(f.Sections)) {
			return
		}
		sym, err1 := ds.Data()
		str, err2 := f.Sections[ds.Link].Data()
		if err1 != nil || err2 != nil || len(sym)%elf.Sym64Size != 0 {
			return
		}
		if vs := f.SectionByType(elf.SHT_GNU_VERSYM); vs != nil {
			if r.versym, err1 = vs.Data(); err1 != nil {
				return
			}
		}
		r.sym, r.str, r.order = sym, str, f.ByteOrder
	})
	return r.sym != nil
}

// lookup finds the first symbol LookupExported takes for name; sure is
// false where the bytes cannot tell (no such tables, a 32-bit file, or
// a candidate of a hidden version, which needs the version tables).
func (r *rawDynsym) lookup(f *elf.File, name string) (sym Symbol, found, sure bool) {
	hidden := false
	ok := r.each(f, name, func(s rawSym) bool {
		typ := elf.ST_TYPE(s.info)
		if s.section == elf.SHN_UNDEF || !(typ == elf.STT_FUNC || typ == sttGNUIFunc || typ == elf.STT_OBJECT) {
			return false
		}
		if s.hidden {
			hidden = true
		} else {
			sym, found = Symbol{Name: name, Addr: s.value, Size: s.size, Func: typ != elf.STT_OBJECT, IFunc: typ == sttGNUIFunc}, true
		}
		return true
	})
	return sym, found, ok && !hidden
}

// BuiltByGo reports whether the module was built by the Go toolchain:
// its .go.buildinfo or .gopclntab section, which a stripped Go binary
// keeps too, or runtime.main among its symbols where it has a .symtab
// of its own (a stripped library's debug file is not read for it: libc's
// was a sixth of a probe's start).
//
// The answer is kept: the tracer asks for every site, many times at a
// start (~1 ms of Lua's under function_graph, in Section's search by
// name and Lookup).
func (m *Module) BuiltByGo() bool {
	if m.elf == nil {
		return false
	}
	m.goOnce.Do(func() { m.builtByGo = m.builtByGoNow() })
	return m.builtByGo
}

func (m *Module) builtByGoNow() bool {
	if m.elf.Section(".go.buildinfo") != nil || m.elf.Section(".gopclntab") != nil {
		return true
	}
	if m.elf.Section(".symtab") == nil {
		return false
	}
	_, ok := m.Lookup("runtime.main")
	return ok
}

// Lookup finds a symbol by exact name. Among duplicates (static functions
// of the same name in several files, symbol versions) it prefers a function,
// then an exported binding, then the default version.
func (m *Module) Lookup(name string) (Symbol, bool) {
	m.LoadSymbols()
	i, ok := m.byName[name]
	if !ok {
		return m.lookupDisplay(name)
	}
	return m.entries[i].Symbol, true
}

// lookupDisplay finds a C++ function by its demangled name without its
// parameters (mid3 for _Z4mid3i, Rect::area for _ZNK4Rect4areaEv), as
// the function tracers show it: only where one function has that name
// (overloads are told apart by their mangled names).
func (m *Module) lookupDisplay(name string) (Symbol, bool) {
	m.displayOnce.Do(func() {
		m.byDisplay = map[string][]int32{}
		for n, i := range m.byName {
			if e := &m.entries[i]; e.Func && strings.HasPrefix(n, "_Z") {
				if d := DisplayName(n); d != n {
					m.byDisplay[d] = append(m.byDisplay[d], i)
				}
			}
		}
	})
	if ids := m.byDisplay[name]; len(ids) == 1 {
		return m.entries[ids[0]].Symbol, true
	}
	return Symbol{}, false
}

// Functions returns all function symbols with a size, sorted by address,
// one per address (the exported, least decorated name of aliases).
func (m *Module) Functions() []Symbol {
	m.buildTables()
	return slices.Clone(m.funcs)
}

// SymbolAt returns the function, or failing that the data object, whose
// link address range [Addr, Addr+Size) contains addr; the innermost one if
// ranges nest.
func (m *Module) SymbolAt(addr uint64) (Symbol, bool) {
	m.buildTables()
	if s, ok := containing(m.funcs, addr); ok {
		return s, true
	}
	return containing(m.objects, addr)
}

// maxNestedScan bounds the backward scan for enclosing symbols so that a
// lookup stays logarithmic even in pathological tables.
const maxNestedScan = 16

func containing(sorted []Symbol, addr uint64) (Symbol, bool) {
	i := sort.Search(len(sorted), func(i int) bool { return sorted[i].Addr > addr })
	for j := i - 1; j >= 0 && j >= i-maxNestedScan; j-- {
		if s := sorted[j]; addr-s.Addr < s.Size {
			return s, true
		}
	}
	return Symbol{}, false
}

// Suggest returns up to n function names close to name, best first.
func (m *Module) Suggest(name string, n int) []string {
	var r ranker
	r.add(name, m.functionNames(), 0)
	return r.top(n)
}

// FileBytesAt is how many of the size bytes from link address addr the
// file holds, in the PT_LOAD segment containing addr: a mapping runs to
// a page's end, past the segment's file data.
func (m *Module) FileBytesAt(addr, size uint64) uint64 {
	for _, p := range m.loads {
		if addr >= p.Vaddr && addr-p.Vaddr < p.Filesz {
			return min(size, p.Filesz-(addr-p.Vaddr))
		}
	}
	return 0
}

// OffsetToAddr converts a file offset (as uprobe_events uses) to a link
// address through the PT_LOAD segment containing it.
func (m *Module) OffsetToAddr(fileOff uint64) (uint64, error) {
	for _, p := range m.loads {
		if fileOff >= p.Off && fileOff-p.Off < p.Filesz {
			return p.Vaddr + (fileOff - p.Off), nil
		}
	}
	return 0, fmt.Errorf("%s: file offset 0x%x is not in a loadable segment", m.Path, fileOff)
}

// ReadCode returns the file's bytes for the link address range
// [addr, addr+size), which must lie within one PT_LOAD segment's file data.
func (m *Module) ReadCode(addr, size uint64) ([]byte, error) {
	if m.file == nil {
		return nil, fmt.Errorf("read %s at 0x%x: %w", m.Path, addr, os.ErrClosed)
	}
	for _, p := range m.loads {
		if addr < p.Vaddr || addr-p.Vaddr >= p.Filesz {
			continue
		}
		if size > p.Filesz-(addr-p.Vaddr) {
			return nil, fmt.Errorf("read %s: 0x%x bytes at 0x%x run past the end of the segment at 0x%x", m.Path, size, addr, p.Vaddr)
		}
		buf := make([]byte, size)
		if err := m.code.readAt(m.file, buf, int64(p.Off+(addr-p.Vaddr))); err != nil {
			return nil, fmt.Errorf("read %s at 0x%x: %w", m.Path, addr, err)
		}
		return buf, nil
	}
	return nil, fmt.Errorf("read %s: address 0x%x is not in a loadable segment with file data", m.Path, addr)
}

// ReadTable reads size bytes at link address addr, as ReadCode, from
// memory the program cannot write: a jump table in .rodata, or a table
// of label addresses in .data.rel.ro, which the loader makes read-only
// once it has relocated it (PT_GNU_RELRO). The file holds there what the
// code reads at run time, at link addresses: a PIE's relocations there
// add its load bias (GNU ld writes each one's addend in the file; a file
// that holds zeros instead gives no table).
func (m *Module) ReadTable(addr, size uint64) ([]byte, error) {
	for _, p := range m.loads {
		if addr >= p.Vaddr && addr-p.Vaddr < p.Filesz && p.Flags&elf.PF_W != 0 && !m.inRelro(addr, size) {
			return nil, fmt.Errorf("read %s at 0x%x: a writable segment", m.Path, addr)
		}
	}
	return m.ReadCode(addr, size)
}

// inRelro reports whether [addr, addr+size) lies in a PT_GNU_RELRO range.
func (m *Module) inRelro(addr, size uint64) bool {
	for _, p := range m.relro {
		if addr >= p.Vaddr && addr+size <= p.Vaddr+p.Memsz && addr+size >= addr {
			return true
		}
	}
	return false
}

// codeCache keeps the file's bytes that ReadCode has read, in aligned
// chunks: the function tracer reads every function of a module one by
// one, which would otherwise be a pread each.
type codeCache struct {
	mu     sync.Mutex
	chunks map[int64][]byte // chunk number -> its bytes (short at the end of the file)
}

const codeChunk = 64 << 10

// readAt fills buf from file offset off, through the cache.
func (c *codeCache) readAt(f *os.File, buf []byte, off int64) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	for len(buf) > 0 {
		n := off / codeChunk
		chunk, ok := c.chunks[n]
		if !ok {
			chunk = make([]byte, codeChunk)
			got, err := f.ReadAt(chunk, n*codeChunk)
			if err != nil && !(errors.Is(err, io.EOF) && got > 0) {
				return err
			}
			chunk = chunk[:got]
			if c.chunks == nil {
				c.chunks = map[int64][]byte{}
			}
			c.chunks[n] = chunk
		}
		in := int(off - n*codeChunk)
		if in >= len(chunk) {
			return io.ErrUnexpectedEOF
		}
		k := copy(buf, chunk[in:])
		buf, off = buf[k:], off+int64(k)
	}
	return nil
}

func (m *Module) loadSymbols() error {
	var errs []error
	symtab, err := m.elf.Symbols()
	m.byName = make(map[string]int32, len(symtab))
	switch {
	case err == nil:
		m.addSymbols(symtab, false)
	case errors.Is(err, elf.ErrNoSymbols):
		// Stripped: the full table may live in a separate debug file.
		if m.debugFile = m.findDebugFile(); m.debugFile != "" {
			if err := m.addDebugSymbols(m.debugFile); err != nil {
				errs = append(errs, err)
			}
		}
	default:
		errs = append(errs, fmt.Errorf("read .symtab of %s: %w", m.Path, err))
	}
	dynsym, err := m.dynamicSymbols()
	if err != nil && !errors.Is(err, elf.ErrNoSymbols) {
		errs = append(errs, fmt.Errorf("read .dynsym of %s: %w", m.Path, err))
	}
	m.addSymbols(dynsym, true)
	return errors.Join(errs...)
}

func (m *Module) addDebugSymbols(path string) error {
	f, err := elf.Open(path)
	if err != nil {
		return fmt.Errorf("open debug file %s: %w", path, err)
	}
	defer f.Close()
	syms, err := f.Symbols()
	if err != nil {
		return fmt.Errorf("read .symtab of debug file %s: %w", path, err)
	}
	m.addSymbols(syms, false)
	return nil
}

func (m *Module) addSymbols(syms []elf.Symbol, dynamic bool) {
	m.entries = slices.Grow(m.entries, len(syms))
	for _, s := range syms {
		m.profiling.note(s, dynamic)
		if e, ok := newEntry(s, dynamic); ok {
			m.add(e)
		}
	}
}

// newEntry is the table entry of ELF symbol s (of .dynsym where dynamic),
// false for one that is not a symbol one can probe.
func newEntry(s elf.Symbol, dynamic bool) (entry, bool) {
	if s.Name == "" || s.Section == elf.SHN_UNDEF || s.Section == elf.SHN_ABS || s.Section == elf.SHN_COMMON {
		return entry{}, false
	}
	if s.Name[0] == '$' { // ARM/AArch64 mapping symbols ($x, $d), not names
		return entry{}, false
	}
	typ := elf.ST_TYPE(s.Info)
	switch typ {
	case elf.STT_FUNC, sttGNUIFunc, elf.STT_OBJECT, elf.STT_NOTYPE, elf.STT_COMMON:
	default:
		// TLS values are offsets into the TLS block, not addresses;
		// sections and file names are not symbols one can probe.
		return entry{}, false
	}
	bind := elf.ST_BIND(s.Info)
	e := entry{
		Symbol:   Symbol{Name: s.Name, Addr: s.Value, Size: s.Size, Func: typ == elf.STT_FUNC || typ == sttGNUIFunc, IFunc: typ == sttGNUIFunc},
		exported: bind == elf.STB_GLOBAL || bind == elf.STB_WEAK,
	}
	if dynamic && s.HasVersion && s.VersionIndex.IsHidden() && s.Version != "" {
		// A non-default version (nm shows name@VER): the plain name
		// belongs to the default one.
		e.Name += "@" + s.Version
		e.hidden = true
	} else if base, _, ok := strings.Cut(s.Name, "@@"); ok && base != "" {
		// .symtab spells default versions name@@VER; users say name.
		e.Name = base
	} else if strings.Contains(s.Name, "@") {
		e.hidden = true
	}
	return e, true
}

func (m *Module) add(e entry) {
	i, ok := m.byName[e.Name]
	if ok {
		old := &m.entries[i]
		if old.Addr == e.Addr {
			// The same symbol seen again (.symtab and .dynsym).
			if old.Size == 0 {
				old.Size = e.Size
			}
			old.Func = old.Func || e.Func
			old.IFunc = old.IFunc || e.IFunc
			old.exported = old.exported || e.exported
			return
		}
	}
	m.entries = append(m.entries, e)
	if !ok || lookupBetter(&e, &m.entries[i]) {
		m.byName[e.Name] = int32(len(m.entries) - 1)
	}
}

// lookupBetter reports whether a should win over b for a lookup by name.
func lookupBetter(a, b *entry) bool {
	if a.Func != b.Func {
		return a.Func
	}
	if a.exported != b.exported {
		return a.exported
	}
	if a.hidden != b.hidden {
		return !a.hidden
	}
	return false // keep the first seen: .symtab before .dynsym
}

// nameBetter reports whether a is the better name for an address shared by
// aliases: exported over local, default version over hidden, fewer leading
// underscores ("malloc" over "__libc_malloc"), then shorter.
func nameBetter(a, b *entry) bool {
	if a.exported != b.exported {
		return a.exported
	}
	if a.hidden != b.hidden {
		return !a.hidden
	}
	ua, ub := leadingUnderscores(a.Name), leadingUnderscores(b.Name)
	if ua != ub {
		return ua < ub
	}
	if len(a.Name) != len(b.Name) {
		return len(a.Name) < len(b.Name)
	}
	return a.Name < b.Name
}

func leadingUnderscores(s string) int {
	return len(s) - len(strings.TrimLeft(s, "_"))
}

func (m *Module) buildTables() {
	m.LoadSymbols()
	m.tablesOnce.Do(func() {
		var funcs, objects []addrIndex
		for i := range m.entries {
			e := &m.entries[i]
			switch {
			case e.Func && e.Size > 0:
				funcs = append(funcs, addrIndex{e.Addr, int32(i)})
			case !e.Func && e.Size > 0:
				objects = append(objects, addrIndex{e.Addr, int32(i)})
			}
		}
		m.funcs, m.aliases = uniqueByAddr(m.entries, funcs)
		m.objects, _ = uniqueByAddr(m.entries, objects)
	})
}

// addrIndex keeps sort keys next to each other rather than behind an index.
type addrIndex struct {
	addr uint64
	i    int32
}

// functionNames returns the distinct names of functions.
func (m *Module) functionNames() []string {
	m.LoadSymbols()
	m.namesOnce.Do(func() {
		// A name's best entry is a function whenever any of its entries is.
		for name, i := range m.byName {
			if m.entries[i].Func {
				m.funcNames = append(m.funcNames, name)
			}
		}
	})
	return m.funcNames
}

// uniqueByAddr sorts the entries of es that idx gives by address and keeps
// the best-named one for each address, with every name it has.
func uniqueByAddr(es []entry, idx []addrIndex) ([]Symbol, map[uint64][]string) {
	slices.SortFunc(idx, func(a, b addrIndex) int { return cmp.Compare(a.addr, b.addr) })
	out := make([]Symbol, 0, len(idx))
	aliases := map[uint64][]string{}
	for k := 0; k < len(idx); {
		best := &es[idx[k].i]
		names := []string{best.Name}
		for k++; k < len(idx) && idx[k].addr == best.Addr; k++ {
			e := &es[idx[k].i]
			if !slices.Contains(names, e.Name) {
				names = append(names, e.Name)
			}
			if nameBetter(e, best) {
				best = e
			}
		}
		if len(names) > 1 {
			aliases[best.Addr] = names
		}
		out = append(out, best.Symbol)
	}
	return out, aliases
}

// NamedFunction is a function with every name it has (Aliases is nil
// when it has only Name), as Functions and Aliases give them.
type NamedFunction struct {
	Symbol
	Aliases []string
}

// ExportedFunctions is what Functions and Aliases give of the functions
// the module exports under one of names, each once, read from its
// dynamic symbols alone. A stripped library's full tables come from its
// separate debug file: libc's, with libc6-dbg, took ~7 ms of a --calls
// start that wants the dozens of functions a program imports.
func (m *Module) ExportedFunctions(names []string) []NamedFunction {
	if out, ok := m.exportedRaw(names); ok {
		return out
	}
	dynsym, err := m.dynamicSymbols()
	if err != nil {
		return nil
	}
	named := make(map[string]bool, len(names))
	for _, name := range names {
		named[name] = true
	}
	var es []entry
	wanted := map[uint64]bool{}
	for _, s := range dynsym {
		e, ok := newEntry(s, true)
		if !ok || !e.Func || e.Size == 0 || !e.exported {
			continue
		}
		es = append(es, e)
		if named[e.Name] {
			wanted[e.Addr] = true
		}
	}
	var idx []addrIndex
	for i, e := range es {
		if wanted[e.Addr] {
			idx = append(idx, addrIndex{e.Addr, int32(i)})
		}
	}
	syms, aliases := uniqueByAddr(es, idx)
	out := make([]NamedFunction, len(syms))
	for i, sym := range syms {
		out[i] = NamedFunction{sym, aliases[sym.Addr]}
	}
	return out
}

// exportedRaw is ExportedFunctions off .dynsym's bytes (libc's ~3,000
// dynamic symbols decoded were ~1.5 ms of a --calls start), but for the
// names of hidden versions (name@VER, spelt from the tables of
// versions), which no import names; false if the bytes cannot be read.
func (m *Module) exportedRaw(names []string) ([]NamedFunction, bool) {
	if m.elf == nil {
		return nil, false
	}
	named := make(map[string]bool, len(names))
	for _, name := range names {
		named[name] = true
	}
	wanted := map[uint64]bool{}
	if !m.dynRaw.every(m.elf, func(s rawSym, name []byte) {
		if rawExportedFunc(s, name) && named[string(name)] {
			wanted[s.value] = true
		}
	}) {
		return nil, false
	}
	var es []entry
	m.dynRaw.every(m.elf, func(s rawSym, name []byte) {
		if rawExportedFunc(s, name) && wanted[s.value] {
			typ := elf.ST_TYPE(s.info)
			es = append(es, entry{Symbol: Symbol{Name: string(name), Addr: s.value, Size: s.size, Func: true, IFunc: typ == sttGNUIFunc}, exported: true})
		}
	})
	idx := make([]addrIndex, len(es))
	for i, e := range es {
		idx[i] = addrIndex{e.Addr, int32(i)}
	}
	syms, aliases := uniqueByAddr(es, idx)
	out := make([]NamedFunction, len(syms))
	for i, sym := range syms {
		out[i] = NamedFunction{sym, aliases[sym.Addr]}
	}
	return out, true
}

// rawExportedFunc reports whether s, named name, is a function of some
// size that its module exports under a name of the default version, as
// newEntry would take it.
func rawExportedFunc(s rawSym, name []byte) bool {
	typ, bind := elf.ST_TYPE(s.info), elf.ST_BIND(s.info)
	return len(name) > 0 && name[0] != '$' && s.size > 0 && !s.hidden && bytes.IndexByte(name, '@') < 0 &&
		s.section != elf.SHN_UNDEF && s.section != elf.SHN_ABS && s.section != elf.SHN_COMMON &&
		(typ == elf.STT_FUNC || typ == sttGNUIFunc) && (bind == elf.STB_GLOBAL || bind == elf.STB_WEAK)
}

// Aliases returns every name of the function at link address addr, the
// one Functions gives among them (glibc's strchr is also index), or nil
// when it has only that one.
func (m *Module) Aliases(addr uint64) []string {
	m.buildTables()
	return m.aliases[addr]
}

// buildID returns the hex GNU build ID from the .note.gnu.build-id section
// or, for files without section headers, from the PT_NOTE segments.
func buildID(f *elf.File) string {
	if s := f.Section(".note.gnu.build-id"); s != nil {
		if data, err := s.Data(); err == nil {
			if id := noteBuildID(data, f, 4); id != "" {
				return id
			}
		}
	}
	for _, p := range f.Progs {
		if p.Type != elf.PT_NOTE || p.Filesz > 1<<20 {
			continue
		}
		data := make([]byte, p.Filesz)
		if _, err := p.ReadAt(data, 0); err != nil {
			continue
		}
		align := uint64(4)
		if p.Align == 8 {
			align = 8
		}
		if id := noteBuildID(data, f, align); id != "" {
			return id
		}
	}
	return ""
}

func noteBuildID(data []byte, f *elf.File, align uint64) string {
	const ntGNUBuildID = 3
	alignUp := func(n uint64) uint64 { return (n + align - 1) &^ (align - 1) }
	for len(data) >= 12 {
		namesz := uint64(f.ByteOrder.Uint32(data[0:]))
		descsz := uint64(f.ByteOrder.Uint32(data[4:]))
		typ := f.ByteOrder.Uint32(data[8:])
		nameEnd := 12 + alignUp(namesz)
		descEnd := nameEnd + alignUp(descsz)
		if namesz > uint64(len(data)) || descsz > uint64(len(data)) || nameEnd+descsz > uint64(len(data)) {
			return ""
		}
		name := data[12 : 12+namesz]
		if typ == ntGNUBuildID && string(bytes.TrimRight(name, "\x00")) == "GNU" {
			return hex.EncodeToString(data[nameEnd : nameEnd+descsz])
		}
		if descEnd >= uint64(len(data)) {
			return ""
		}
		data = data[descEnd:]
	}
	return ""
}

// findDebugFile applies gdb's rules: first the build ID under each debug
// directory's .build-id tree, then .gnu_debuglink next to the file, in its
// .debug subdirectory, and under each debug directory plus the file's
// directory. Candidates must match by build ID or, lacking one, by CRC.
func (m *Module) findDebugFile() string {
	if len(m.BuildID) > 2 {
		for _, dir := range DebugDirs {
			p := filepath.Join(dir, ".build-id", m.BuildID[:2], m.BuildID[2:]+".debug")
			if m.debugFileMatches(p, 0, false) {
				return p
			}
		}
	}
	link, crc, ok := debugLink(m.elf)
	if !ok {
		return ""
	}
	real := m.realPath
	if p, err := filepath.EvalSymlinks(real); err == nil {
		real = p
	}
	dir := filepath.Dir(real)
	candidates := []string{filepath.Join(dir, link), filepath.Join(dir, ".debug", link)}
	for _, d := range DebugDirs {
		candidates = append(candidates, filepath.Join(d, dir, link))
	}
	for _, p := range candidates {
		if p != real && m.debugFileMatches(p, crc, true) {
			return p
		}
	}
	return ""
}

func debugLink(f *elf.File) (name string, crc uint32, ok bool) {
	s := f.Section(".gnu_debuglink")
	if s == nil {
		return "", 0, false
	}
	data, err := s.Data()
	if err != nil {
		return "", 0, false
	}
	n := bytes.IndexByte(data, 0)
	if n <= 0 {
		return "", 0, false
	}
	crcOff := (n + 4) &^ 3 // the CRC follows the NUL-terminated name, 4-aligned
	if crcOff+4 > len(data) {
		return "", 0, false
	}
	return string(data[:n]), f.ByteOrder.Uint32(data[crcOff:]), true
}

// debugFileMatches reports whether path is an ELF file with a .symtab that
// belongs to m: same build ID when both have one, else (for debuglink
// candidates) the CRC recorded in .gnu_debuglink.
func (m *Module) debugFileMatches(path string, crc uint32, checkCRC bool) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	ef, err := elf.NewFile(f)
	if err != nil || ef.Section(".symtab") == nil {
		return false
	}
	if id := buildID(ef); id != "" && m.BuildID != "" {
		return id == m.BuildID
	}
	if !checkCRC {
		return false
	}
	h := crc32.NewIEEE()
	if _, err := io.Copy(h, io.NewSectionReader(f, 0, 1<<62)); err != nil {
		return false
	}
	return h.Sum32() == crc
}

// linkSpan returns the page-aligned link address range the PT_LOAD
// segments occupy.
func (m *Module) linkSpan() (lo, hi uint64) {
	if len(m.loads) == 0 {
		return 0, 0
	}
	pageMask := uint64(os.Getpagesize()) - 1
	lo = ^uint64(0)
	for _, p := range m.loads {
		lo = min(lo, p.Vaddr&^pageMask)
		hi = max(hi, (p.Vaddr+p.Memsz+pageMask)&^pageMask)
	}
	return lo, hi
}

// Imports reports whether the module calls one of names from another
// module: an undefined function in its dynamic symbols.
func (m *Module) Imports(names ...string) bool {
	dynsym, err := m.dynamicSymbols()
	if err != nil {
		return false
	}
	for _, s := range dynsym {
		if s.Section == elf.SHN_UNDEF && elf.ST_TYPE(s.Info) == elf.STT_FUNC && slices.Contains(names, s.Name) {
			return true
		}
	}
	return false
}

// Objects returns the data objects with a size, sorted by address, one
// per address: what SymbolAt falls back to when no function contains
// an address.
func (m *Module) Objects() []Symbol {
	m.buildTables()
	return slices.Clone(m.objects)
}
