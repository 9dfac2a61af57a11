package probe

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/probedbg/probe/fetch"
	"github.com/probedbg/probe/symbols"
)

// Which functions a function tracer hooks: its globs (ftrace's
// set_ftrace_filter and set_ftrace_notrace), what is unsafe to trace,
// and for --calls the program's imports by the name it calls them.

// candidate is a function selected for tracing.
type candidate struct {
	module *symbols.Mapped
	sym    symbols.Symbol
	fn     *traceFunc
	skip   string   // why it cannot be traced, if it cannot
	names  []string // every name of the function selected (an IFUNC's, not its implementation's): its symbol's and its aliases
	// callee, for a candidate at the program's PLT entry for a library
	// function: that function (its DWARF types the arguments; an IFUNC's
	// is its implementation's), or nil.
	callee *resolved
}

// unsafeToTrace says why a function must not be traced, or "".
func unsafeToTrace(name string, goMod, returns bool) string {
	switch {
	case name == "_start":
		return "the entry point: [sp] is argc, not a return address"
	case goMod && goInternal(name):
		return "Go runtime internals"
	case returns && unwinders[name] != 0:
		return "an unwinder: the return addresses it reads must be real"
	case returns && returnsTwice[name]:
		return "returns twice: it saves its return address"
	}
	return ""
}

// goInternal reports Go functions the tracer must not touch: the runtime
// (it runs on system stacks and in signal handlers, and the child of a
// vfork-style fork runs syscall code with no tracer).
func goInternal(name string) bool {
	for _, p := range []string{"runtime.", "internal/", "syscall.", "sync/atomic.", "type:", "go:", "gosave", "gogo", "_rt0"} {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

// funcGlob is one --filter/--notrace/--graph-function pattern.
type funcGlob struct {
	flag    string
	text    string
	modules []*symbols.Mapped
	pattern string
	matched bool
	// anyModule: no MOD: was given; like p:SYM, the glob looks in the
	// program, then in the first library where it matches.
	anyModule bool
	// exclude: "!GLOB" (or "MOD:!GLOB"), as set_ftrace_filter's and
	// ltrace -e's: the functions it matches are left out.
	exclude bool
	// lib: MOD is a library not loaded yet, which the dynamic linker
	// could load (dlopen): the glob selects in it once it is (modules
	// is empty until then).
	lib *pendingLib
}

// parseGlobs splits comma lists and resolves "MOD:GLOB" (a C++ "a::b" is
// not a module). With later, a MOD not loaded yet whose file the dynamic
// linker could load waits for it (funcGlob.lib), the glob checked
// against that file now, as a pending probe's symbol is.
func (t *Tracer) parseGlobs(flag string, list []string, later bool) ([]*funcGlob, error) {
	var gs []*funcGlob
	for _, item := range list {
		for _, text := range strings.Split(item, ",") {
			text = strings.TrimSpace(text)
			if text == "" {
				continue
			}
			g := &funcGlob{flag: flag, text: text, modules: []*symbols.Mapped{t.space.Main()}, anyModule: true}
			spec := strings.TrimPrefix(text, "!")
			g.exclude = spec != text
			if i := strings.IndexByte(spec, ':'); i > 0 && !strings.HasPrefix(spec[i:], "::") {
				m, err := t.space.FindModule(spec[:i])
				if err == nil {
					g.modules = []*symbols.Mapped{m}
				} else if later {
					g.lib, g.modules = t.libraryToCome(spec[:i]), nil
				}
				if err != nil && g.lib == nil {
					return nil, badInput(fmt.Errorf("%s %q: %w", flag, text, err))
				}
				spec, g.anyModule = spec[i+1:], false
			}
			if rest := strings.TrimPrefix(spec, "!"); rest != spec {
				if g.exclude {
					return nil, badInput(fmt.Errorf("%s %q: one '!' at most", flag, text))
				}
				spec, g.exclude = rest, true
			}
			g.pattern = spec
			if g.pattern == "" {
				return nil, badInput(fmt.Errorf("%s %q: no function named", flag, text))
			}
			if g.exclude && flag != "--filter" && flag != "--calls" {
				return nil, badInput(fmt.Errorf("%s %q: '!' leaves functions out of --filter or --calls only", flag, text))
			}
			if g.anyModule {
				if m := t.firstMatching(g.pattern); m != nil {
					g.modules = []*symbols.Mapped{m}
				}
			}
			if g.lib != nil {
				if err := matchesOnDisk(g); err != nil {
					return nil, err
				}
			}
			gs = append(gs, g)
		}
	}
	return gs, nil
}

// matchesOnDisk checks glob g, which waits for its library, against the
// library's file: it must match a function there, as a glob must in a
// loaded module.
func matchesOnDisk(g *funcGlob) error {
	disk, err := symbols.LoadBinaryAt(g.lib.path, symbols.ShelfBias)
	if err != nil {
		return badInput(fmt.Errorf("%s %q: %w", g.flag, g.text, err))
	}
	defer disk.Close()
	if countMatching(disk.Main(), g.pattern) == 0 {
		return badInput(fmt.Errorf("%s %q matches no function in %s", g.flag, g.text, filepath.Base(g.lib.path)))
	}
	g.matched = true
	return nil
}

// firstMatching is the first module, the program then its libraries in
// the order p:SYM looks in them, with a function that pattern matches.
func (t *Tracer) firstMatching(pattern string) *symbols.Mapped {
	for _, m := range t.space.Mapped {
		if countMatching(m, pattern) > 0 {
			return m
		}
	}
	return nil
}

// countMatching counts the functions of m that pattern matches.
func countMatching(m *symbols.Mapped, pattern string) int {
	n := 0
	for _, sym := range m.Functions() {
		if sym.Size > 0 && (fetch.GlobMatch(pattern, sym.Name) || fetch.GlobMatch(pattern, displayName(sym.Name))) {
			n++
		}
	}
	return n
}

// noMatch is the error of a glob that matches nothing where it looked,
// naming the modules where it does match.
func (t *Tracer) noMatch(g *funcGlob) error {
	where := g.modules[0].Name
	if g.anyModule {
		where += " or its libraries"
	}
	var elsewhere []string
	for _, m := range t.space.Mapped {
		if m == g.modules[0] {
			continue
		}
		if n := countMatching(m, g.pattern); n > 0 {
			elsewhere = append(elsewhere, fmt.Sprintf("%s: %d", m.Name, n))
		}
	}
	if len(elsewhere) > 0 {
		return badInput(fmt.Errorf("%s %q matches no function in %s (matches in %s; say MOD:GLOB)", g.flag, g.text, where, strings.Join(elsewhere, ", ")))
	}
	return badInput(fmt.Errorf("%s %q matches no function in %s", g.flag, g.text, where))
}

func matchAny(gs []*funcGlob, m *symbols.Mapped, name, display string, aliases []string) bool {
	hit := false
	for _, g := range gs {
		if !g.covers(m) {
			continue
		}
		if !fetch.GlobMatch(g.pattern, name) && !fetch.GlobMatch(g.pattern, display) &&
			!slices.ContainsFunc(aliases, func(a string) bool { return fetch.GlobMatch(g.pattern, a) }) {
			continue
		}
		g.matched, hit = true, true
	}
	return hit
}

func (g *funcGlob) covers(m *symbols.Mapped) bool {
	for _, gm := range g.modules {
		if gm == m {
			return true
		}
	}
	return false
}

// funcGlobs are a function tracer's parsed globs.
type funcGlobs struct {
	filter, include, exclude, notrace, graph []*funcGlob
}

// parseFuncGlobs parses opts' globs; one on a library not loaded yet
// waits for it (but for --calls: the program's calls go through what it
// imports).
func (t *Tracer) parseFuncGlobs(opts *FuncTraceOptions) (*funcGlobs, error) {
	later := !opts.FromMain
	flag := "--filter"
	if opts.FromMain {
		flag = "--calls" // (ltrace's selection is of the calls)
	}
	var gs funcGlobs
	var err error
	if gs.filter, err = t.parseGlobs(flag, opts.Filter, later); err != nil {
		return nil, err
	}
	for _, g := range gs.filter {
		if g.exclude {
			gs.exclude = append(gs.exclude, g)
		} else {
			gs.include = append(gs.include, g)
		}
	}
	if gs.notrace, err = t.parseGlobs("--notrace", opts.Notrace, later); err != nil {
		return nil, err
	}
	if gs.graph, err = t.parseGlobs("--graph-function", opts.GraphFunction, later); err != nil {
		return nil, err
	}
	return &gs, nil
}

// all is every glob.
func (gs *funcGlobs) all() []*funcGlob {
	return slices.Concat(gs.filter, gs.notrace, gs.graph)
}

// waiting is the libraries that globs wait for, once each.
func (gs *funcGlobs) waiting() []*pendingLib {
	var libs []*pendingLib
	for _, g := range gs.all() {
		if g.lib != nil && !slices.ContainsFunc(libs, func(l *pendingLib) bool { return l.path == g.lib.path }) {
			libs = append(libs, g.lib)
		}
	}
	return libs
}

// selectFunctions applies the filters to the functions of the modules
// they name. Every pattern must match something, as writing a glob that
// matches nothing to set_ftrace_filter fails; one on a library not
// loaded yet matches in its file, and waits for the library
// (funcGlobs.waiting, selectLoaded).
func (t *Tracer) selectFunctions(opts *FuncTraceOptions) ([]candidate, *funcGlobs, error) {
	if opts.NoFunctions {
		return nil, &funcGlobs{}, nil
	}
	gs, err := t.parseFuncGlobs(opts)
	if err != nil {
		return nil, nil, err
	}
	mods := []*symbols.Mapped{t.space.Main()}
	for _, g := range gs.all() {
		for _, m := range g.modules {
			if !containsModule(mods, m) {
				mods = append(mods, m)
			}
		}
	}
	out := t.candidatesIn(opts, gs, mods)
	for _, g := range gs.all() {
		if !g.matched {
			return nil, nil, t.noMatch(g)
		}
	}
	if len(out) == 0 && len(gs.waiting()) == 0 {
		return nil, nil, badInput(fmt.Errorf("no function of %s to trace", t.space.Main().Name))
	}
	return out, gs, nil
}

// selectLoaded is what the function tracer's globs select in mods,
// libraries just loaded that some of them waited for: each such glob
// covers its library's new mapping (the one of an earlier load is gone).
func (t *Tracer) selectLoaded(mods []*symbols.Mapped) []candidate {
	gs := t.ft.globs
	for _, g := range gs.all() {
		if g.lib == nil {
			continue
		}
		if i := slices.IndexFunc(mods, func(m *symbols.Mapped) bool { return m.FilePath() == g.lib.path }); i >= 0 {
			g.modules = []*symbols.Mapped{mods[i]}
		}
	}
	return t.candidatesIn(&t.ft.opts, gs, mods)
}

// candidatesIn is the functions of mods that globs select.
func (t *Tracer) candidatesIn(opts *FuncTraceOptions, gs *funcGlobs, mods []*symbols.Mapped) []candidate {
	filter, include, exclude, notrace, graph := gs.filter, gs.include, gs.exclude, gs.notrace, gs.graph
	var out []candidate
	seen := map[uint64]int{} // by runtime address, its candidate: an IFUNC's implementation may match by name too
	for _, m := range mods {
		goMod := isGo(m)
		for _, nf := range t.functionsToSelect(opts, gs, m) {
			sym, aliases := nf.Symbol, nf.Aliases // (glibc's strchr is index)
			display := displayName(sym.Name)
			names := aliases
			if names == nil {
				names = []string{sym.Name}
			}
			var selected bool
			switch {
			case len(filter) == 0:
				selected = m == t.space.Main() && (goMod && strings.HasPrefix(sym.Name, "main.") || !goMod && !crtGlue[sym.Name])
			case len(include) == 0:
				// Only exclusions: every function of the modules
				// they name but theirs (ltrace -e '!strlen').
				selected = slices.ContainsFunc(exclude, func(g *funcGlob) bool { return g.covers(m) }) &&
					(goMod || !crtGlue[sym.Name])
			default:
				// The toolchain's glue only by its own name, not a
				// wildcard's (*e* is not a request for frame_dummy).
				selected = matchAny(include, m, sym.Name, display, aliases) &&
					(goMod || !crtGlue[sym.Name] || namedExactly(include, sym.Name))
			}
			if len(exclude) > 0 && matchAny(exclude, m, sym.Name, display, aliases) {
				selected = false
			}
			inGraph := matchAny(graph, m, sym.Name, display, aliases)
			noTrace := matchAny(notrace, m, sym.Name, display, aliases)
			if !selected && !inGraph && !(noTrace && opts.Returns) {
				continue
			}
			if noTrace && !opts.Returns {
				continue
			}
			if stubs := t.pltEntries(opts, m, names); len(stubs) > 0 {
				// ltrace's way: the program's PLT entry for a library
				// function takes every call of it the program makes,
				// a tail call's jmp too (a qsort comparator's `jmp
				// strcmp@plt`, whose return address is in libc), and
				// none of the library's own calls, which would only
				// fill the rings. An IFUNC whose pick cannot be read
				// (glibc's time picks the vDSO's code) is hooked
				// there too. (Its pick is looked up only if its
				// DWARF is wanted: naming it takes the library's full
				// tables.)
				callee := &resolved{module: m, sym: sym}
				for _, stub := range stubs {
					out = t.addPLTCandidate(out, seen, stub, callee, unsafeToTrace(sym.Name, false, opts.Returns))
				}
				continue
			}
			cm, csym := m, sym
			r, skip := t.implementation(opts, m, sym, names)
			if skip == "" {
				cm, csym = r.module, r.sym
				if sym.IFunc && !opts.FromMain {
					// (ltrace names the function the program called:
					// strlen, not __strlen_avx2.)
					display = displayName(csym.Name)
				}
			}
			if i, dup := seen[csym.Addr+cm.Bias]; dup {
				if sym.IFunc && opts.FromMain {
					out[i].fn.name = display // the name the program called
				}
				continue
			}
			seen[csym.Addr+cm.Bias] = len(out)
			fn := &traceFunc{name: display, isGo: goMod, notrace: noTrace, graph: inGraph,
				where: fmt.Sprintf("%s+0x0/%#x", csym.Name, csym.Size), own: opts.FromMain && cm == t.space.Main()}
			if skip == "" {
				skip = unsafeToTrace(csym.Name, goMod, opts.Returns)
			}
			if skip == "" && !goMod {
				// Without returns too: the function tracer names the
				// caller from the return address at [sp].
				if ok, why := cm.CallEntry(csym); !ok {
					skip = why
				}
			}
			out = append(out, candidate{module: cm, sym: csym, fn: fn, skip: skip, names: names})
		}
		if opts.FromMain && m != t.space.Main() {
			markMatches(gs, m)
		}
	}
	return out
}

// functionsToSelect is the functions of m that candidatesIn looks at.
// For --calls, of a library only those the program imports: it calls a
// library only through them, and hooking libc's ~3,500 functions for
// the dozens /bin/true imports cost a second before main (issue 39);
// reading only the library's dynamic symbols keeps its full tables,
// from its debug file, out of the start. A glob that names none of them
// still matches (markMatches), selecting nothing, as ltrace's -e does.
func (t *Tracer) functionsToSelect(opts *FuncTraceOptions, gs *funcGlobs, m *symbols.Mapped) []symbols.NamedFunction {
	main := t.space.Main()
	if !opts.FromMain || m == main {
		syms := m.Functions()
		out := make([]symbols.NamedFunction, len(syms))
		for i, sym := range syms {
			out[i] = symbols.NamedFunction{Symbol: sym, Aliases: m.Aliases(sym.Addr)}
		}
		return out
	}
	return m.ExportedFunctions(main.ImportNames())
}

// markMatches marks the globs of gs on m that match none of the
// functions functionsToSelect gave but another of m's.
func markMatches(gs *funcGlobs, m *symbols.Mapped) {
	globs := gs.all()
	if !slices.ContainsFunc(globs, func(g *funcGlob) bool { return g.covers(m) && !g.matched }) {
		return
	}
	for _, sym := range m.Functions() {
		matchAny(globs, m, sym.Name, displayName(sym.Name), m.Aliases(sym.Addr))
	}
}

// namedExactly reports whether one of globs is name itself, no wildcard.
func namedExactly(globs []*funcGlob, name string) bool {
	for _, g := range globs {
		if g.pattern == name {
			return true
		}
	}
	return false
}

func containsModule(ms []*symbols.Mapped, m *symbols.Mapped) bool {
	for _, x := range ms {
		if x == m {
			return true
		}
	}
	return false
}

// implementation is the code that m's function sym (whose names are
// names) runs: itself or, for an IFUNC, the implementation its resolver
// picked, as p:SYM traces; or why that is not known.
func (t *Tracer) implementation(opts *FuncTraceOptions, m *symbols.Mapped, sym symbols.Symbol, names []string) (resolved, string) {
	if !sym.IFunc {
		return resolved{module: m, sym: sym}, ""
	}
	r, why := t.ifuncImplementation(m, sym)
	if why == "" {
		return r, ""
	}
	if r, ok := t.boundImplementation(opts, sym, names); ok {
		return r, ""
	}
	return resolved{}, why
}

// boundImplementation is, for FromMain, the implementation of IFUNC sym
// (whose names are names) that the main executable's GOT slot for it
// holds, bound already (as -fno-plt's slots are at load): where its calls
// go.
func (t *Tracer) boundImplementation(opts *FuncTraceOptions, sym symbols.Symbol, names []string) (resolved, bool) {
	if !opts.FromMain {
		return resolved{}, false
	}
	main := t.space.Main()
	for _, name := range names {
		slot, ok := main.ImportSlot(name)
		if !ok {
			continue
		}
		impl, ok := t.readWord(slot + main.Bias)
		im := t.space.ModuleAt(impl)
		if !ok || im == nil || im == main {
			return resolved{}, false // (not bound yet: its PLT entry's, or the vDSO's)
		}
		fn, ok := im.Module.FunctionAt(impl-im.Bias, sym.Name)
		if !ok {
			return resolved{}, false
		}
		r, err := t.inFunction(im, fn, fn.Addr)
		return r, err == nil
	}
	return resolved{}, false
}

// pltEntries are, for FromMain, the main executable's PLT entries for
// the function of module m with these names (one an import name the
// program calls it by), to hook in its place.
func (t *Tracer) pltEntries(opts *FuncTraceOptions, m *symbols.Mapped, names []string) []symbols.Symbol {
	main := t.space.Main()
	if !opts.FromMain || m == main {
		return nil
	}
	var stubs []symbols.Symbol
	for _, name := range names {
		if stub, ok := main.PLTEntry(name); ok {
			stubs = append(stubs, stub)
		}
	}
	return stubs
}

// addPLTCandidate adds the program's PLT entry stub (named by its
// import) to out, once: its calls are the function callee's (nil where
// it is not known).
func (t *Tracer) addPLTCandidate(out []candidate, seen map[uint64]int, stub symbols.Symbol, callee *resolved, skip string) []candidate {
	main := t.space.Main()
	if _, dup := seen[stub.Addr+main.Bias]; dup {
		return out
	}
	seen[stub.Addr+main.Bias] = len(out)
	fn := &traceFunc{name: displayName(stub.Name), plt: true, where: fmt.Sprintf("%s@plt+0x0/%#x", stub.Name, stub.Size)}
	if skip == "" {
		if ok, why := main.CallEntry(stub); !ok {
			skip = why
		}
	}
	return append(out, candidate{module: main, sym: stub, fn: fn, skip: skip, names: []string{stub.Name}, callee: callee})
}

// imported reports whether the main executable imports c's function
// under one of its names (a GOT slot of its is for it).
func (t *Tracer) imported(c candidate) bool {
	return t.importsAny(append([]string{c.fn.name}, c.names...))
}

// importsAny reports whether the main executable imports one of names.
func (t *Tracer) importsAny(names []string) bool {
	main := t.space.Main()
	return slices.ContainsFunc(names, func(name string) bool {
		_, ok := main.ImportSlot(name)
		return ok
	})
}
