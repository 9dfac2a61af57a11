package symbols

// DWARF support: an adapter over delve (github.com/go-delve/delve, pinned at
// v1.27.2 because its API moves between releases). Every use of delve is in
// this file and dwarf_var.go; no delve type leaves them. delve is built for
// a debugger that owns a live proc.Target; we have none (our ptrace layer is
// tracee/), so only the parts of delve that work from a BinaryInfo alone are
// used, and the comments below say why for each place where that needs a
// workaround.

import (
	"debug/dwarf"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"sync"
	"unsafe"

	"github.com/go-delve/delve/pkg/dwarf/frame"
	"github.com/go-delve/delve/pkg/dwarf/godwarf"
	"github.com/go-delve/delve/pkg/logflags"
	"github.com/go-delve/delve/pkg/proc"
)

// ErrNoDebugInfo is returned when a DWARF feature is asked of a module
// that has no DWARF, neither in itself nor in a separate debug file.
var ErrNoDebugInfo = errors.New("no DWARF debug info")

// DebugInfo is the DWARF of one mapped module. Addresses in and out are
// runtime addresses. Its methods may be called from any goroutine.
type DebugInfo struct {
	mod  *Module
	name string // module basename, for messages
	bias uint64

	// mu serialises every call into delve: BinaryInfo keeps unlocked
	// caches (line-table state machines, function lookup maps, type and
	// DIE-tree caches).
	mu sync.Mutex
	// The DWARF is read by the first method that needs it (load): for a
	// big Go binary that is most of a second, which a probe whose
	// fetch-args are all registers must not pay.
	loaded  bool
	loadErr error
	entry   uint64 // the module's runtime entry point, where delve places it
	bi      *proc.BinaryInfo

	// dw is the DWARF as the standard library reads it, for the DIE of a
	// function (delve's Function.offset is unexported), which we need for
	// DW_AT_frame_base, DW_AT_decl_line and the parameter list: delve's
	// own copy (delveDWARF).
	dw *dwarf.Data
	// dwarfPath is the file the DWARF came from (the module or its
	// separate debug file).
	dwarfPath string

	dies    map[uint64]*dwarf.Entry     // subprogramDIE results by entry
	lookups int                         // of subprogramDIE: past indexAfter, all are indexed
	inlines map[string][]inlineInstance // inlineInstances index

	framesOnce sync.Once
	frames     frame.FrameDescriptionEntries
	framesErr  error

	fake fakeProcess
}

// debugCache is the per-Module state behind Mapped.Debug; a Module placed
// at several biases (dlmopen) gets one DebugInfo per bias.
type debugCache struct {
	mu     sync.Mutex
	byBias map[uint64]*debugLoad
}

type debugLoad struct {
	once sync.Once
	d    *DebugInfo
	err  error
}

// Debug returns the module's DWARF placed at the module's load bias, or
// ErrNoDebugInfo. The DWARF itself is read when first used, and kept
// until the module is closed; an error reading it comes from that use.
func (m *Mapped) Debug() (*DebugInfo, error) {
	c := &m.Module.debug
	c.mu.Lock()
	if c.byBias == nil {
		c.byBias = make(map[uint64]*debugLoad)
	}
	l := c.byBias[m.Bias]
	if l == nil {
		l = &debugLoad{}
		c.byBias[m.Bias] = l
	}
	c.mu.Unlock()
	l.once.Do(func() { l.d, l.err = loadDebugInfo(m.Module, m.Name, m.Bias) })
	return l.d, l.err
}

// closeDebug releases the files delve opened; called by Module.Close.
func (m *Module) closeDebug() {
	c := &m.debug
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, l := range c.byBias {
		l.once.Do(func() { l.err = fmt.Errorf("%s: %w", m.Path, os.ErrClosed) })
		if d := l.d; d != nil {
			d.mu.Lock()
			if d.bi != nil {
				d.bi.Close()
			}
			d.loaded, d.loadErr = true, fmt.Errorf("%s: %w", m.Path, os.ErrClosed)
			d.mu.Unlock()
		}
	}
	c.byBias = nil
}

var quietDelve sync.Once

// loadDebugInfo finds the module's DWARF (in itself or a separate debug
// file); load reads it.
func loadDebugInfo(mod *Module, name string, bias uint64) (*DebugInfo, error) {
	if mod.elf == nil || mod.file == nil {
		return nil, fmt.Errorf("%s: module is closed", mod.Path)
	}
	// Decide ourselves whether there is DWARF before calling delve: without
	// it delve prints a warning on stderr, and for Go binaries falls back
	// to the pclntab, which has no variables.
	dwarfPath := ""
	if hasDWARF(mod.elf) {
		dwarfPath = mod.Path
	} else if p := mod.findDebugFile(); p != "" && fileHasDWARF(p) {
		dwarfPath = p
	}
	if dwarfPath == "" {
		return nil, fmt.Errorf("%s: %w", name, ErrNoDebugInfo)
	}
	// The first image of a BinaryInfo is taken to be the executable and
	// placed by its runtime entry point (static base = entry - e_entry);
	// one BinaryInfo per module keeps every module "the executable" of its
	// own BinaryInfo, so entry+bias places shared libraries too.
	entry := mod.elf.Entry + bias
	if entry == 0 && mod.PIE {
		// delve cannot tell "bias 0" from "unknown" for such a file.
		return nil, fmt.Errorf("%s: cannot place DWARF of a position-independent file with no entry point at bias 0", name)
	}
	return &DebugInfo{mod: mod, name: name, bias: bias, dwarfPath: dwarfPath, entry: entry}, nil
}

// load reads the DWARF, once; d.mu is held. Every method calls it first.
func (d *DebugInfo) load() error {
	if !d.loaded {
		d.loaded = true
		d.loadErr = d.read()
	}
	return d.loadErr
}

func (d *DebugInfo) read() error {
	// delve logs load problems at error level to stderr by default; a
	// library must not write there. This is process-wide, but delve is
	// used nowhere else in this program.
	quietDelve.Do(func() {
		logflags.SetLoggerFactory(func(bool, logflags.Fields, io.Writer) logflags.Logger { return discardLogger{} })
	})
	// attaching=true: never ask debuginfod servers over the network.
	bi := proc.NewBinaryInfo("linux", runtime.GOARCH, true)
	if err := bi.LoadBinaryInfo(d.mod.Path, d.entry, DebugDirs); err != nil {
		bi.Close()
		return fmt.Errorf("%s: load DWARF: %w", d.name, err)
	}
	if len(bi.Images) == 0 || bi.Images[0].Stripped() {
		bi.Close()
		return fmt.Errorf("%s: %w", d.name, ErrNoDebugInfo)
	}
	if err := bi.Images[0].LoadError(); err != nil && len(bi.Functions) == 0 {
		bi.Close()
		return fmt.Errorf("%s: load DWARF: %w", d.name, err)
	}
	dw := delveDWARF(bi.Images[0])
	if dw == nil {
		ef, err := elf.Open(d.dwarfPath)
		if err != nil {
			bi.Close()
			return fmt.Errorf("%s: %w", d.name, err)
		}
		dw, err = ef.DWARF()
		ef.Close()
		if err != nil {
			bi.Close()
			return fmt.Errorf("%s: read DWARF of %s: %w", d.name, d.dwarfPath, err)
		}
	}
	d.bi, d.dw = bi, dw
	bp := proc.NewBreakpointMap()
	d.fake = fakeProcess{bi: bi, mem: codeMemory{mod: d.mod, bias: d.bias}, bps: &bp, entry: d.entry}
	return nil
}

// delveDWARF returns the DWARF delve has read for img, or nil. Reading
// it again ourselves would decompress a Go binary's DWARF a second time,
// which costs as much as a fifth of the whole load; delve keeps it in the
// unexported Image.dwarf. delve is pinned, and TestDelveDWARFShared says
// when an upgrade moves the field (we would then read our own copy).
func delveDWARF(img *proc.Image) *dwarf.Data {
	f := reflect.ValueOf(img).Elem().FieldByName("dwarf")
	if !f.IsValid() || f.Type() != reflect.TypeFor[*dwarf.Data]() {
		return nil
	}
	return *(**dwarf.Data)(unsafe.Pointer(f.UnsafeAddr()))
}

func hasDWARF(f *elf.File) bool {
	for _, name := range []string{".debug_info", ".zdebug_info"} {
		if s := f.Section(name); s != nil && s.Type != elf.SHT_NOBITS && s.Size > 0 {
			return true
		}
	}
	return false
}

func fileHasDWARF(path string) bool {
	f, err := elf.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	return hasDWARF(f)
}

// discardLogger silences delve.
type discardLogger struct{}

func (discardLogger) Debugf(string, ...any) {}
func (discardLogger) Infof(string, ...any)  {}
func (discardLogger) Warnf(string, ...any)  {}
func (discardLogger) Errorf(string, ...any) {}
func (discardLogger) Debug(...any)          {}
func (discardLogger) Info(...any)           {}
func (discardLogger) Warn(...any)           {}
func (discardLogger) Error(...any)          {}

// fakeProcess is the smallest proc.Process: delve's FindFileLocation and
// FirstPCAfterPrologue take a Process, but only use its BinaryInfo, its
// breakpoints (none) and its memory (to disassemble prologues), which we
// serve from the file.
type fakeProcess struct {
	bi    *proc.BinaryInfo
	mem   codeMemory
	bps   *proc.BreakpointMap
	entry uint64
}

func (p fakeProcess) BinInfo() *proc.BinaryInfo          { return p.bi }
func (p fakeProcess) EntryPoint() (uint64, error)        { return p.entry, nil }
func (p fakeProcess) FindThread(int) (proc.Thread, bool) { return nil, false }
func (p fakeProcess) ThreadList() []proc.Thread          { return nil }
func (p fakeProcess) Breakpoints() *proc.BreakpointMap   { return p.bps }
func (p fakeProcess) Memory() proc.MemoryReadWriter      { return p.mem }

// codeMemory reads a module's code from its file at runtime addresses.
type codeMemory struct {
	mod  *Module
	bias uint64
}

func (m codeMemory) ReadMemory(buf []byte, addr uint64) (int, error) {
	b, err := m.mod.ReadCode(addr-m.bias, uint64(len(buf)))
	if err != nil {
		return 0, err
	}
	return copy(buf, b), nil
}

func (m codeMemory) WriteMemory(uint64, []byte) (int, error) { return 0, errReadOnly }

var errReadOnly = errors.New("read-only memory")

// lookupFunc finds DWARF functions by the name users give: C functions
// are "C.name" in delve (it treats every non-Go compile unit as cgo), Go
// functions are "pkg.name".
func (d *DebugInfo) lookupFunc(name string) []*proc.Function {
	m := d.bi.LookupFunc()
	if fns := m[name]; len(fns) > 0 {
		return fns
	}
	return m["C."+name]
}

// userName is delve's function name as users spell it.
func userName(fn *proc.Function) string {
	return strings.TrimPrefix(fn.Name, "C.")
}

// isC reports whether fn comes from a non-Go compile unit.
func isC(fn *proc.Function) bool { return strings.HasPrefix(fn.Name, "C.") }

// FuncAt returns the name of the DWARF function containing pc (C functions
// by their C name, Go functions as "pkg.Name") and its entry address.
func (d *DebugInfo) FuncAt(pc uint64) (name string, entry uint64, ok bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.load() != nil {
		return "", 0, false
	}
	fn := d.bi.PCToFunc(pc)
	if fn == nil {
		return "", 0, false
	}
	return userName(fn), fn.Entry, true
}

// Files returns the source files named in the line tables, full paths.
func (d *DebugInfo) Files() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.load() != nil {
		return nil
	}
	return slices.Clone(d.bi.Sources)
}

// matchSources returns the line-table files that file names: the file
// itself when it is a full path in the table, else every file whose path
// ends in "/"+file.
func (d *DebugInfo) matchSources(file string) []string {
	clean := filepath.Clean(file)
	if slices.Contains(d.bi.Sources, clean) {
		return []string{clean}
	}
	var out []string
	suffix := "/" + strings.TrimPrefix(clean, "./")
	for _, s := range d.bi.Sources {
		if strings.HasSuffix(s, suffix) {
			out = append(out, s)
		}
	}
	return out
}

// LineAddrs returns the runtime addresses where code for file:line begins:
// for each function (and each inlined copy) with code on that line, its
// first is_stmt row for the line. On the first line of a function the
// address is after the prologue when that address is still on the line
// (as gdb and delve place breakpoints), else the entry. file is a full
// path or a path suffix ("fn.c", "src/fn.c").
func (d *DebugInfo) LineAddrs(file string, line int) ([]uint64, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.load(); err != nil {
		return nil, err
	}
	srcs := d.matchSources(file)
	if len(srcs) == 0 {
		return nil, fmt.Errorf("no source file %q in the DWARF of %s", file, d.name)
	}
	var addrs []uint64
	for _, src := range srcs {
		pcs, err := proc.FindFileLocation(d.fake, src, line)
		if err != nil {
			var nl *proc.ErrCouldNotFindLine
			if errors.As(err, &nl) {
				continue
			}
			return nil, fmt.Errorf("%s:%d: %w", file, line, err)
		}
		for _, pc := range pcs {
			// delve moves a breakpoint on a function's first line past
			// the prologue when that stays on the line, but knows only
			// Go prologues. Do it for C, so that a probe on a one-line
			// function sees its arguments stored.
			if fn := d.bi.PCToFunc(pc); fn != nil && fn.Entry == pc && isC(fn) {
				if ap := d.cAfterPrologue(fn); ap != pc {
					if f, l, _ := d.bi.PCToLine(ap); f == src && l == line {
						pc = ap
					}
				}
			}
			addrs = append(addrs, pc)
		}
	}
	if len(addrs) == 0 {
		return nil, d.noCodeError(srcs, file, line, nil)
	}
	slices.Sort(addrs)
	return slices.Compact(addrs), nil
}

// noCodeError says that file:line has no code and names the nearest lines
// (before and after) that do. keep, if set, restricts which addresses count.
func (d *DebugInfo) noCodeError(srcs []string, file string, line int, keep func(uint64) bool) error {
	const window = 200
	lines := make([]int, 0, 2*window+1)
	for l := max(1, line-window); l <= line+window; l++ {
		lines = append(lines, l)
	}
	before, after := 0, 0
	for _, src := range srcs {
		for l, pcs := range d.bi.AllPCsForFileLines(src, lines) {
			if keep != nil {
				pcs = slices.DeleteFunc(slices.Clone(pcs), func(pc uint64) bool { return !keep(pc) })
			}
			if len(pcs) == 0 {
				continue
			}
			if l < line && l > before {
				before = l
			}
			if l > line && (after == 0 || l < after) {
				after = l
			}
		}
	}
	var near []string
	for _, l := range []int{before, after} {
		if l != 0 {
			near = append(near, fmt.Sprint(l))
		}
	}
	msg := fmt.Sprintf("no code at %s:%d", file, line)
	if len(near) > 0 {
		msg += " (nearest lines with code: " + strings.Join(near, ", ") + ")"
	}
	return errors.New(msg)
}

// FuncLineAddrs resolves perf probe's FUNC:RLINE: the line RLINE lines
// after the line the function is declared on (DW_AT_decl_line), code of
// that function only (its out-of-line body and inlined copies). RLINE 0
// is the function's entry.
func (d *DebugInfo) FuncLineAddrs(fnName string, rline int) ([]uint64, error) {
	if rline < 0 {
		return nil, fmt.Errorf("%s:%d: relative line must not be negative", fnName, rline)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.load(); err != nil {
		return nil, err
	}
	fns := d.lookupFunc(fnName)
	if len(fns) == 0 {
		return nil, fmt.Errorf("no DWARF function %q in %s", fnName, d.name)
	}
	var addrs []uint64
	var srcs []string
	var file string
	var line int
	// delve's Function.InlinedCalls misses calls inlined inside lexical
	// blocks (it skips their children), so inlined copies come from our
	// own index.
	insts := d.inlineInstances(userName(fns[0]))
	inFn := func(pc uint64) bool {
		for _, fn := range fns {
			if pc >= fn.Entry && pc < fn.End {
				return true
			}
		}
		for _, in := range insts {
			if pc == in.entry {
				// gcc can give an inlined call whose code was hoisted
				// elsewhere an empty range at its entry point.
				return true
			}
			for _, r := range in.ranges {
				if pc >= r[0] && pc < r[1] {
					return true
				}
			}
		}
		return false
	}
	if rline == 0 {
		for _, fn := range fns {
			if fn.Entry != 0 {
				addrs = append(addrs, fn.Entry)
			}
		}
		for _, in := range insts {
			addrs = append(addrs, in.entry)
		}
	}
	for _, fn := range fns {
		if rline == 0 {
			break
		}
		f, declLine := d.declLine(fn)
		if f == "" {
			continue
		}
		file, line = f, declLine+rline
		srcs = append(srcs, f)
		pcs, err := proc.FindFileLocation(d.fake, f, line)
		if err != nil {
			continue
		}
		for _, pc := range pcs {
			if inFn(pc) {
				addrs = append(addrs, pc)
			}
		}
	}
	if len(addrs) == 0 {
		if file == "" {
			return nil, fmt.Errorf("%s:%d: no code for function %s", fnName, rline, fnName)
		}
		err := d.noCodeError(slices.Compact(srcs), filepath.Base(file), line, inFn)
		return nil, fmt.Errorf("%s:%d: %w", fnName, rline, err)
	}
	slices.Sort(addrs)
	return slices.Compact(addrs), nil
}

// inlineInstance is one inlined copy of a function.
type inlineInstance struct {
	entry  uint64      // DW_AT_entry_pc, else the lowest address
	ranges [][2]uint64 // runtime
}

// inlineInstances returns the inlined copies of the function named name
// (C name or Go "pkg.Name"). The index of all of them is built on first
// use by one pass over the DWARF.
func (d *DebugInfo) inlineInstances(name string) []inlineInstance {
	if d.inlines == nil {
		d.inlines = make(map[string][]inlineInstance)
		names := make(map[dwarf.Offset]string) // abstract origin -> name
		originName := func(off dwarf.Offset) string {
			if n, ok := names[off]; ok {
				return n
			}
			r := d.dw.Reader()
			r.Seek(off)
			e, err := r.Next()
			n := ""
			if err == nil && e != nil {
				n, _ = d.withOrigin(e).Val(dwarf.AttrName).(string)
			}
			names[off] = n
			return n
		}
		r := d.dw.Reader()
		for {
			e, err := r.Next()
			if err != nil || e == nil {
				break
			}
			if e.Tag != dwarf.TagInlinedSubroutine {
				continue
			}
			off, ok := e.Val(dwarf.AttrAbstractOrigin).(dwarf.Offset)
			if !ok {
				continue
			}
			rs, err := d.dw.Ranges(e)
			if err != nil || len(rs) == 0 {
				continue
			}
			in := inlineInstance{entry: ^uint64(0)}
			for _, rg := range rs {
				in.ranges = append(in.ranges, [2]uint64{rg[0] + d.bias, rg[1] + d.bias})
				in.entry = min(in.entry, rg[0]+d.bias)
			}
			if ep, ok := e.Val(dwarf.AttrEntrypc).(uint64); ok && e.AttrField(dwarf.AttrEntrypc).Class == dwarf.ClassAddress {
				in.entry = ep + d.bias
			}
			n := originName(off)
			d.inlines[n] = append(d.inlines[n], in)
		}
	}
	return d.inlines[name]
}

// InlinedAt returns where the function named name was inlined into its
// callers: each copy's entry, at run time.
func (d *DebugInfo) InlinedAt(name string) []uint64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.load(); err != nil {
		return nil
	}
	var at []uint64
	for _, in := range d.inlineInstances(name) {
		at = append(at, in.entry)
	}
	return at
}

// declLine returns the file and DW_AT_decl_line of fn; delve only knows
// the line of the entry address, which for gcc is the line of the "{".
func (d *DebugInfo) declLine(fn *proc.Function) (string, int) {
	if fn.Entry == 0 {
		return d.abstractDeclLine(userName(fn))
	}
	file, entryLine := d.bi.EntryLineForFunc(fn)
	if e := d.subprogramDIE(fn.Entry); e != nil {
		if l, ok := e.Val(dwarf.AttrDeclLine).(int64); ok && l > 0 {
			return file, int(l)
		}
	}
	return file, entryLine
}

// abstractDeclLine finds the declaration of a function that was only
// inlined (no code of its own, so no DIE to find by address): the
// abstract DW_TAG_subprogram of that name.
func (d *DebugInfo) abstractDeclLine(name string) (string, int) {
	r := d.dw.Reader()
	var cu *dwarf.Entry
	for {
		e, err := r.Next()
		if err != nil || e == nil {
			return "", 0
		}
		switch e.Tag {
		case dwarf.TagCompileUnit:
			cu = e
			continue
		case dwarf.TagSubprogram:
			if _, inl := e.Val(dwarf.AttrInline).(int64); inl && e.Val(dwarf.AttrName) == name {
				line, _ := e.Val(dwarf.AttrDeclLine).(int64)
				idx, _ := e.Val(dwarf.AttrDeclFile).(int64)
				if lr, err := d.dw.LineReader(cu); err == nil && lr != nil {
					if files := lr.Files(); idx >= 0 && int(idx) < len(files) && files[idx] != nil {
						return files[idx].Name, int(line)
					}
				}
				return "", 0
			}
		}
		if e.Children && e.Tag != dwarf.TagCompileUnit && e.Tag != dwarf.TagNamespace {
			r.SkipChildren()
		}
	}
}

// AfterPrologue returns the address after the prologue of the function
// whose entry is fnEntry. For Go code this is delve's answer (the
// prologue_end mark, else the stack-growth check pattern). For C code
// delve returns the entry itself (gcc marks no prologue_end and delve's
// prologue patterns are Go's), so do what gdb and perf do instead; see
// cAfterPrologue.
func (d *DebugInfo) AfterPrologue(fnEntry uint64) (uint64, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.load(); err != nil {
		return 0, err
	}
	fn := d.bi.PCToFunc(fnEntry)
	if fn == nil {
		return 0, fmt.Errorf("no DWARF function at 0x%x in %s", fnEntry, d.name)
	}
	if !isC(fn) {
		pc, err := proc.FirstPCAfterPrologue(d.fake, fn, false)
		if err != nil {
			return 0, fmt.Errorf("%s: %w", userName(fn), err)
		}
		return pc, nil
	}
	return d.cAfterPrologue(fn), nil
}

// cAfterPrologue: the first is_stmt row of the function's line table whose
// line differs from the entry's line (gcc -O0 puts the frame setup and the
// stores of the argument registers on the entry line; at -O2 that row is
// often at the entry itself). A function written on one line has no such
// row: then the second is_stmt row of the line, as gdb finds it.
func (d *DebugInfo) cAfterPrologue(fn *proc.Function) uint64 {
	file, line := d.bi.EntryLineForFunc(fn)
	if pcs, err := fn.AllPCs(file, line); err == nil {
		for _, pc := range pcs {
			if pc >= fn.Entry && pc < fn.End {
				return pc
			}
		}
	}
	if pcs, err := fn.AllPCs("", -1); err == nil {
		for _, pc := range pcs {
			if pc > fn.Entry && pc < fn.End {
				return pc
			}
		}
	}
	return fn.Entry
}

// subprogramDIE finds the DW_TAG_subprogram DIE whose code starts at the
// runtime address entry (the concrete DIE; for one with an abstract origin
// the origin's attributes are merged in by attr()).
func (d *DebugInfo) subprogramDIE(entry uint64) *dwarf.Entry {
	if entry == 0 {
		return nil
	}
	if e, ok := d.dies[entry]; ok {
		return e
	}
	if d.dies == nil {
		d.dies = make(map[uint64]*dwarf.Entry)
	}
	d.lookups++
	if d.lookups == indexAfter {
		// Many functions asked for (--args over a whole library): one
		// pass over the DWARF beats a walk of a unit for each.
		d.indexSubprograms()
		if e, ok := d.dies[entry]; ok {
			return e
		}
	}
	e := d.findSubprogramDIE(entry)
	d.dies[entry] = e
	return e
}

// indexAfter is how many lookups of subprogram DIEs make indexing them
// all worth it.
const indexAfter = 64

// indexSubprograms puts every subprogram DIE with code in d.dies, by
// the runtime address of each of its ranges' starts.
func (d *DebugInfo) indexSubprograms() {
	r := d.dw.Reader()
	for {
		e, err := r.Next()
		if err != nil || e == nil {
			return
		}
		if e.Tag != dwarf.TagSubprogram {
			continue
		}
		rs, err := d.dw.Ranges(e)
		if err != nil || len(rs) == 0 {
			continue
		}
		merged := d.withOrigin(e)
		for _, rg := range rs {
			if _, seen := d.dies[rg[0]+d.bias]; !seen {
				d.dies[rg[0]+d.bias] = merged
			}
		}
	}
}

func (d *DebugInfo) findSubprogramDIE(entry uint64) *dwarf.Entry {
	r := d.dw.Reader()
	link := entry - d.bias
	cu, err := r.SeekPC(link)
	if err != nil || cu == nil {
		return nil
	}
	depth := 1
	for depth > 0 {
		e, err := r.Next()
		if err != nil || e == nil {
			return nil
		}
		if e.Tag == 0 {
			depth--
			continue
		}
		if e.Tag == dwarf.TagSubprogram {
			if rs, err := d.dw.Ranges(e); err == nil {
				for _, rg := range rs {
					if rg[0] == link {
						return d.withOrigin(e)
					}
				}
			}
		}
		if e.Children {
			// Functions nest only in C++ classes and namespaces; walk
			// into everything, it is one CU.
			depth++
		}
	}
	return nil
}

// withOrigin merges the attributes of the abstract origin (or
// specification) into e, as delve's godwarf does for trees.
func (d *DebugInfo) withOrigin(e *dwarf.Entry) *dwarf.Entry {
	for i := 0; i < 4; i++ {
		off, ok := e.Val(dwarf.AttrAbstractOrigin).(dwarf.Offset)
		if !ok {
			off, ok = e.Val(dwarf.AttrSpecification).(dwarf.Offset)
		}
		if !ok {
			return e
		}
		r := d.dw.Reader()
		r.Seek(off)
		o, err := r.Next()
		if err != nil || o == nil {
			return e
		}
		merged := *e
		merged.Field = slices.Clone(e.Field)
		for _, f := range o.Field {
			if e.AttrField(f.Attr) == nil && f.Attr != dwarf.AttrAbstractOrigin && f.Attr != dwarf.AttrSpecification {
				merged.Field = append(merged.Field, f)
			}
		}
		if o.AttrField(dwarf.AttrAbstractOrigin) == nil && o.AttrField(dwarf.AttrSpecification) == nil {
			return &merged
		}
		// Follow the origin's own origin.
		merged.Field = slices.DeleteFunc(merged.Field, func(f dwarf.Field) bool {
			return f.Attr == dwarf.AttrAbstractOrigin || f.Attr == dwarf.AttrSpecification
		})
		if f := o.AttrField(dwarf.AttrAbstractOrigin); f != nil {
			merged.Field = append(merged.Field, *f)
		} else if f := o.AttrField(dwarf.AttrSpecification); f != nil {
			merged.Field = append(merged.Field, *f)
		}
		e = &merged
	}
	return e
}

// Params lists the parameter names of the function containing pc, in
// declaration order (Go results excluded).
func (d *DebugInfo) Params(pc uint64) ([]string, error) {
	sig, err := d.Signature(pc)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, p := range sig.Params {
		if p.Name != "" {
			names = append(names, p.Name)
		}
	}
	return names, nil
}

// loadFrames parses the call frame information: .eh_frame from the module
// (the runtime unwind tables, always in the loaded file) and .debug_frame
// from the DWARF file (Go binaries only have this one).
func (d *DebugInfo) loadFrames() (frame.FrameDescriptionEntries, error) {
	d.framesOnce.Do(func() {
		var fdes frame.FrameDescriptionEntries
		var errs []error
		if s := d.mod.elf.Section(".eh_frame"); s != nil && s.Type != elf.SHT_NOBITS {
			if data, err := s.Data(); err == nil {
				fe, err := frame.Parse(data, d.mod.elf.ByteOrder, d.bias, 8, s.Addr)
				if err != nil {
					errs = append(errs, fmt.Errorf(".eh_frame: %w", err))
				}
				fdes = fdes.Append(fe)
			}
		}
		if f, err := elf.Open(d.dwarfPath); err == nil {
			if data, err := godwarf.GetDebugSectionElf(f, "frame"); err == nil && len(data) > 0 {
				fe, err := frame.Parse(data, f.ByteOrder, d.bias, 8, 0)
				if err != nil {
					errs = append(errs, fmt.Errorf(".debug_frame: %w", err))
				}
				fdes = fdes.Append(fe)
			}
			f.Close()
		}
		d.frames = fdes
		if len(fdes) == 0 {
			d.framesErr = fmt.Errorf("%s: no call frame information: %w", d.name, errors.Join(errs...))
		}
	})
	return d.frames, d.framesErr
}
