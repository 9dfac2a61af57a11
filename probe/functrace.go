package probe

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/probedbg/probe/fetch"
	"github.com/probedbg/probe/singlestep"
	"github.com/probedbg/probe/symbols"
)

// The function tracers, as ftrace's function and function_graph: an entry
// probe on every selected function and, when returns matter, the return
// hook of return probes (the trampoline and shadow stack; RET probes for
// Go), with ftrace's filters deciding at each entry what is reported.

// FuncEventKind says what a FuncEvent reports.
type FuncEventKind uint8

const (
	FuncEntry  FuncEventKind = iota // a traced function was entered
	FuncReturn                      // it returned
	FuncLost                        // its return will never be seen (longjmp, exception, exit)
)

// FuncEvent is one function tracer event. It is valid only during the
// handler.
type FuncEvent struct {
	Kind      FuncEventKind
	Pid, Tid  int
	Comm      string
	CPU       int
	Time      int64 // CLOCK_MONOTONIC nanoseconds
	Lane      int64 // the call stack: the thread, or for Go the goroutine
	Goroutine int64 // the Go goroutine id, when known; else 0
	Func      string
	Caller    string // FuncEntry of the function tracer: the calling function
	Depth     int    // nesting level, 0 for the outermost reported call
	EntryTime int64  // FuncReturn: when the call began
	// Fields, with Args: the parameters at a FuncEntry, the result at a
	// FuncReturn (none for void, a float or a struct).
	Fields []fetch.Field
}

// FuncTraceOptions selects the functions to trace and what to report,
// with the semantics of ftrace's set_ftrace_filter, set_ftrace_notrace,
// set_graph_function and max_graph_depth.
type FuncTraceOptions struct {
	// Filter globs name the functions traced; "MOD:GLOB" selects in a
	// library. Without any, every function of the main executable (for a
	// Go program, of package main).
	Filter []string
	// Notrace globs remove functions; with Returns, also every call
	// below them.
	Notrace []string
	// GraphFunction globs, with Returns: only calls inside these are
	// reported.
	GraphFunction []string
	// MaxDepth, with Returns: calls nested deeper are not reported.
	MaxDepth int
	// Returns hooks returns (function_graph, profile, stack); without it
	// only entries are reported, with their caller (function).
	Returns bool
	// Stack tracks the deepest stack of each thread (the stack tracer).
	Stack bool
	// Callers names the caller in FuncEntry events (always without
	// Returns).
	Callers bool
	// Args reports the parameters and result of C and C++ functions
	// with DWARF, or in the table of prototypes (funcargs.go, fetch/protos.go).
	Args bool
	// FromMain reports only calls made from the main executable (its
	// return address is there), as ltrace shows a program's library
	// calls and not the libraries' calls among themselves.
	FromMain bool
	// Errno, with Args: a result of -1 is followed by the thread's errno
	// as the call left it, a field "errno" (its name, as EINTR), as
	// strace shows a failed call.
	Errno bool
	// ArrayLen, with Args (ltrace -A): the most elements of an array
	// shown (exec's argv), the rest as "..."; 0: 4, as ltrace's.
	ArrayLen int
	// Syscalls, with Args (ltrace -S): the threads' system calls too,
	// each an entry and a return of a function "SYS_NAME" (syscalltrace.go);
	// with NoFunctions (ltrace -L) those alone.
	Syscalls, NoFunctions bool
	// Handler receives events on the ptrace thread; keep it short.
	Handler func(*FuncEvent)
}

// FuncTraceInfo says what TraceFunctions installed.
type FuncTraceInfo struct {
	Functions int           // functions traced
	Skipped   []SkippedFunc // selected but not probeable
	// NoArgs, with Args: the functions traced whose arguments are not
	// known (no DWARF, no prototype), by name.
	NoArgs []string
	// Waiting are the libraries, not loaded yet, that globs select in
	// (as the user named them): their functions are traced from their
	// dlopen on.
	Waiting []string

	// What the tracer added since, in libraries loaded later.
	mu    sync.Mutex
	later struct {
		functions int
		skipped   []SkippedFunc
		noArgs    []string
		loaded    []string // of Waiting
	}
}

// Now is the info as it is now, with what the tracer added since
// TraceFunctions returned, in the libraries it waited for: functions
// traced, skipped, traced without arguments, and of Waiting those that
// were loaded. Its caller may ask at any time.
func (info *FuncTraceInfo) Now() (functions int, skipped []SkippedFunc, noArgs, loaded []string) {
	info.mu.Lock()
	defer info.mu.Unlock()
	l := &info.later
	return info.Functions + l.functions, slices.Concat(info.Skipped, l.skipped), slices.Concat(info.NoArgs, l.noArgs), slices.Clone(l.loaded)
}

// SkippedFunc is a function left out, and why.
type SkippedFunc struct {
	Func, Reason string
	// Imported, with FromMain: the main executable imports the function
	// (under one of its names): the program's calls of it go unseen.
	Imported bool
}

// traceFunc is one function the tracer hooks.
type traceFunc struct {
	name    string // as displayed: demangled
	where   string // name+0x0/0xsize, for the stack tracer
	isGo    bool
	notrace bool // hooked only to hide the calls below it
	graph   bool // a --graph-function
	args    *funcArgs
	// For FromMain: the same function under the other names the
	// program calls it by (calledAs).
	as map[string]*traceFunc
	// plt: hooked at the program's PLT entry (FromMain): every call
	// there is the program's, whatever its return address.
	plt bool
	// own: a function of the program's own, named to FromMain (ltrace
	// -x): every call of it is shown, a library's (qsort's of its
	// comparator) too.
	own bool
}

// funcTracer is a Tracer's function tracer.
type funcTracer struct {
	opts    FuncTraceOptions
	info    *FuncTraceInfo
	globs   *funcGlobs        // its globs, some on libraries to come (dlopen)
	callers map[uint64]string // return address -> calling function
	ev      FuncEvent         // scratch, reused every event
	stacks  []StackUsage      // stacks of threads gone, for the stack tracer
}

// TraceFunctions starts the function tracer. A Tracer has one.
func (t *Tracer) TraceFunctions(opts FuncTraceOptions) (*FuncTraceInfo, error) {
	var info *FuncTraceInfo
	err := t.do(func(anchor int) error {
		var err error
		if info, err = t.installFuncTracer(anchor, opts); err == nil {
			t.optimizeLate(anchor)
			t.updateSyscallStops() // (Syscalls)
		}
		return err
	})
	return info, err
}

func (t *Tracer) installFuncTracer(anchor int, opts FuncTraceOptions) (*FuncTraceInfo, error) {
	if t.ft != nil {
		return nil, badInput(errors.New("a function tracer is already running"))
	}
	funcs, globs, err := t.selectFunctions(&opts)
	if err != nil {
		return nil, err
	}
	waiting := globs.waiting()
	if len(waiting) > 0 {
		if err := t.armLinkerWatch(anchor); err != nil {
			return nil, badInput(fmt.Errorf("%s is not loaded, and %w", waiting[0].name, err))
		}
	}
	info := &FuncTraceInfo{}
	for _, lib := range waiting {
		info.Waiting = append(info.Waiting, lib.name)
	}
	t.ft = &funcTracer{opts: opts, info: info, globs: globs, callers: map[uint64]string{}}
	if isGo(t.space.Main()) {
		t.ret.findGoid(t.space.Main())
	}
	if err := t.hookCandidates(anchor, funcs, info); err != nil {
		t.ft = nil
		return nil, err
	}
	if info.Functions == 0 && len(waiting) == 0 && !opts.NoFunctions {
		// (hookCandidates took out what it put in.)
		t.ft = nil
		why := "no function selected could be probed"
		if len(info.Skipped) > 0 {
			why += fmt.Sprintf(" (%s: %s)", info.Skipped[0].Func, info.Skipped[0].Reason)
		}
		return info, badInput(errors.New(why))
	}
	return info, nil
}

// hookCandidates hooks the functions funcs, noting in info what it did;
// if it hooks none, or fails, it leaves nothing of theirs in.
func (t *Tracer) hookCandidates(anchor int, funcs []candidate, info *FuncTraceInfo) error {
	opts := &t.ft.opts
	var installed []*site
	var batch siteBatch // the new sites, written together
	written := false
	undo := func() {
		if !written {
			// Nothing of the batch is in memory yet: only forget it.
			t.forgetSites(batch.sites)
		}
		for _, st := range installed {
			st.fn, st.fnRet = nil, nil
		}
		t.dropEmpty(installed)
	}
	needTrampoline, hooked := false, 0
	for _, c := range funcs {
		if c.skip != "" {
			info.Skipped = append(info.Skipped, SkippedFunc{c.fn.name, c.skip, opts.FromMain && t.imported(c)})
			continue
		}
		sites, err := t.hookFunction(anchor, c, opts.Returns, &batch)
		installed = append(installed, sites...)
		var in *inputError
		switch {
		case errors.As(err, &in):
			info.Skipped = append(info.Skipped, SkippedFunc{c.fn.name, err.Error(), opts.FromMain && t.imported(c)})
		case err != nil:
			undo()
			return err
		default:
			hooked++
			needTrampoline = needTrampoline || opts.Returns && !c.fn.isGo
			if opts.Args && !opts.FromMain && c.fn.args == nil {
				info.NoArgs = append(info.NoArgs, c.fn.name)
			}
		}
	}
	if hooked == 0 {
		undo()
		return nil
	}
	if err := t.writeSites(&batch); err != nil {
		undo()
		return err
	}
	written = true
	t.planAhead(batch.sites)
	if needTrampoline {
		if err := t.ensureTrampoline(anchor, funcs[0].module.Start); err != nil {
			undo()
			return err
		}
	}
	info.Functions += hooked
	return nil
}

// traceLoaded hooks the functions the function tracer's globs select in
// the libraries just loaded (added) that they waited for. It reports
// whether it hooked any: their sites want optimizing.
func (t *Tracer) traceLoaded(anchor int, added []*symbols.Mapped) bool {
	if t.ft == nil {
		return false
	}
	var mods []*symbols.Mapped
	var loaded []string // (as the user named them)
	for _, lib := range t.ft.globs.waiting() {
		for _, m := range added {
			if m.FilePath() == lib.path {
				mods, loaded = append(mods, m), append(loaded, lib.name)
			}
		}
	}
	if len(mods) == 0 {
		return false
	}
	var got FuncTraceInfo
	if err := t.hookCandidates(anchor, t.selectLoaded(mods), &got); err != nil {
		got.Skipped = append(got.Skipped, SkippedFunc{Func: mods[0].Name, Reason: err.Error()})
	}
	info := t.ft.info
	info.mu.Lock()
	defer info.mu.Unlock()
	l := &info.later
	l.functions += got.Functions
	l.skipped = append(l.skipped, got.Skipped...)
	l.noArgs = append(l.noArgs, got.NoArgs...)
	for _, name := range loaded {
		if !slices.Contains(l.loaded, name) {
			l.loaded = append(l.loaded, name)
		}
	}
	return got.Functions > 0
}

// StopTracingFunctions removes the function tracer from a running Tracer
// (ftrace's "echo nop > current_tracer"): every site it alone used is
// taken out and the calls it is inside of are forgotten. A hijacked
// return still on a stack keeps coming back through the trampoline, as
// the kernel keeps a task's return stack after function_graph is
// unregistered: it is sent home silently (or to a return probe that also
// waits for it), and a detach puts it back like any other. Afterwards
// TraceFunctions may start another. Without a function tracer it does
// nothing.
func (t *Tracer) StopTracingFunctions() error {
	return t.do(func(int) error { return t.removeFuncTracer() })
}

func (t *Tracer) removeFuncTracer() error {
	if t.ft == nil {
		return nil
	}
	var used []*site
	for _, st := range t.sites {
		if st.fn != nil || st.fnRet != nil {
			st.fn, st.fnRet = nil, nil
			used = append(used, st)
		}
	}
	// The stack tracer's deepest points so far stay reported.
	t.retireAll()
	t.pastStacks = append(t.pastStacks, t.ft.stacks...)
	for tid := range t.ret.shadow {
		for _, cs := range t.ret.threadStacks(tid) {
			t.forgetCalls(cs)
		}
	}
	// Go calls are followed only for the function tracer, at entries and
	// RETs that are going: nothing on those stacks is anyone's any more.
	t.ret.goStacks = make(map[int64]*callStack)
	t.ft = nil
	return t.dropEmpty(used)
}

// forgetCalls makes the calls on cs nobody's: their returns still come
// home through the trampoline, reported to no tracer.
func (t *Tracer) forgetCalls(cs *callStack) {
	for i := range cs.frames {
		f := &cs.frames[i]
		cs.count(f, -1)
		f.fn, f.mode, f.depth = nil, 0, 0
		cs.count(f, 1) // an unhooked frame stays counted as one
	}
	cs.max = stackMax{base: cs.max.base}
}

// returnsTwice are the functions that save their return address to come
// back to it later (setjmp's longjmp, vfork's child): a hijacked one would
// come back to the trampoline with no frame.
var returnsTwice = map[string]bool{
	"setjmp": true, "_setjmp": true, "__setjmp": true, "sigsetjmp": true, "__sigsetjmp": true,
	"getcontext": true, "__getcontext": true, "savectx": true,
	"vfork": true, "__vfork": true, "__libc_vfork": true,
}

// hookFunction puts the tracer's probes on one function: its entry and,
// for Go with returns, each RET; new sites join b, to be written with the
// others. A bad-input error means the function is skipped.
func (t *Tracer) hookFunction(anchor int, c candidate, returns bool, b *siteBatch) ([]*site, error) {
	m, sym := c.module, c.sym
	code, err := m.ReadCode(sym.Addr, sym.Size)
	if err != nil {
		return nil, badInput(err)
	}
	off, above, key := 0, uint64(0), byte(0)
	if c.fn.isGo {
		off = singlestep.GoStackCheckEnd(code)
	} else {
		// Past -mfentry's call of __fentry__, or plain -pg's call of
		// mcount: either reads the real caller (a -pg program's gprof
		// arcs), which a return hooked before it would hide. Past
		// __fentry__ the function is as at its entry; past mcount, as
		// at its entry seen through its frame (but for the arguments'
		// registers on arm64, where mcount takes x0: --args hooks the
		// entry there).
		off = m.FentryCallEnd(sym)
		if off == 0 && (mcountKeepsArgs || !t.ft.opts.Args) {
			off, above, key = m.McountCallEnd(sym)
		}
	}
	at := funcSite(m, sym, code, off)
	var sites []*site
	st, err := t.siteIn(anchor, at, b)
	if err != nil {
		return nil, err
	}
	if above > 0 {
		st.frame, st.frameAbove, st.frameKey = true, above, key
	} else if off == 0 && !c.fn.isGo && m.CallsMcount(sym) {
		st.beforeMcount = true
	}
	if t.ft.opts.Args && c.fn.args == nil {
		// By the first of its names the table has (the one shown, an
		// IFUNC's for --calls, or an alias: glibc's index is strchr):
		// the call's name may be any of them (calledAs), its arguments
		// are the same, and in-process they are what the stub records.
		proto := prototypeName(c.fn.name)
		for _, n := range c.names {
			proto = cmp.Or(proto, prototypeName(n))
		}
		am, asym := m, sym
		if c.callee != nil {
			am, asym = c.callee.module, c.callee.sym // (a PLT entry has no DWARF)
			if asym.IFunc && proto == "" {
				am, asym = m, sym
				if r, why := t.implementation(&t.ft.opts, c.callee.module, c.callee.sym, c.names); why == "" {
					am, asym = r.module, r.sym
				}
			}
		}
		c.fn.args = compileFuncArgs(am, cmp.Or(proto, asym.Name), asym.Addr+am.Bias, am != t.space.Main() || c.fn.plt)
		if c.fn.args == nil && t.ft.opts.FromMain {
			c.fn.args = unknownArgs() // (not "f() = <void>", which says what is not known)
		}
	}
	st.fn = c.fn
	t.keepRecording(st)
	sites = append(sites, st)
	if !c.fn.isGo || !returns {
		return sites, nil
	}
	rets, err := goRetAddrs(code, sym.Addr+m.Bias)
	if err != nil {
		return sites, nil // never returns: entries only
	}
	for _, a := range rets {
		st, err := t.siteIn(anchor, funcSite(m, sym, code, int(a-sym.Addr-m.Bias)), b)
		if err != nil {
			return sites, err
		}
		st.fnRet = c.fn
		sites = append(sites, st)
	}
	return sites, nil
}

// funcSite is the place off bytes into function sym, whose code is code.
func funcSite(m *symbols.Mapped, sym symbols.Symbol, code []byte, off int) resolved {
	return resolved{addr: sym.Addr + m.Bias + uint64(off), module: m, sym: sym, code: code[off:],
		where: fmt.Sprintf("%s+%#x/%#x", sym.Name, off, sym.Size)}
}

// siteAt returns the site at r, made and written if new.
func (t *Tracer) siteAt(anchor int, r resolved) (*site, error) {
	var b siteBatch
	st, err := t.siteIn(anchor, r, &b)
	if err != nil {
		return nil, err
	}
	if err := t.writeSites(&b); err != nil {
		return nil, err
	}
	return st, nil
}

// siteIn returns the site at r, made in b if new.
func (t *Tracer) siteIn(anchor int, r resolved, b *siteBatch) (*site, error) {
	if st := t.sites[r.addr]; st != nil {
		return st, nil
	}
	return t.addSite(anchor, r, b)
}

// dropEmpty takes out the sites of sts nothing uses any more, their bytes
// put back together.
func (t *Tracer) dropEmpty(sts []*site) error {
	var drop []*site
	for _, st := range sts {
		if st.empty() && t.sites[st.addr] == st {
			delete(t.sites, st.addr)
			drop = append(drop, st)
		}
	}
	t.unoptimize(drop)
	return t.restoreSites(drop)
}

// crtGlue are the functions the toolchain adds to every C program: not
// the program's own, and _start's [sp] is argc, not a return address.
var crtGlue = map[string]bool{
	"_start": true, "_init": true, "_fini": true, "deregister_tm_clones": true,
	"register_tm_clones": true, "__do_global_dtors_aux": true, "frame_dummy": true,
	"call_weak_fn":    true, // arm64's crti.o
	"__libc_csu_init": true, "__libc_csu_fini": true, "_dl_relocate_static_pie": true,
}

// displayName is how the tracer names a function: C++ names demangled.
var displayName = symbols.DisplayName

// traceEnter decides, at the entry of fn, what the tracer does with the
// call, as ftrace's graph entry does: nothing inside a notrace call,
// nothing outside the graph functions, nothing deeper than max depth.
func (t *Tracer) traceEnter(cs *callStack, f *shadowFrame, fn *traceFunc, hit *Hit) {
	o := &t.ft.opts
	switch {
	case cs.notrace > 0:
		return
	case fn.notrace:
		f.fn, f.mode = fn, frameNotrace
		return
	case len(o.GraphFunction) > 0 && cs.graph == 0 && !fn.graph:
		return
	case o.MaxDepth > 0 && cs.depth >= o.MaxDepth:
		return
	case fn.plt || fn.own:
	case o.FromMain && (!t.inMain(f.ret) || cs.top() != nil && cs.top().sp == f.sp):
		// Not from the program: from a library, or a library's tail
		// call (it took its caller's slot, and its return address).
		return
	case o.FromMain:
		fn = t.calledAs(fn, f.ret)
	}
	f.fn, f.mode, f.depth = fn, frameRecorded, cs.depth
	if fn.graph {
		f.mode |= frameGraph
	}
	fields := t.entryFields(fn, hit)
	if fa := fn.args; fa != nil && fa.outSlot > 0 {
		if sl := fa.slots[fa.outSlot-1]; sl.i >= 0 && sl.i < len(fa.vals) {
			f.out = fa.vals[sl.i].Value.Uint()
		}
	}
	if o.Callers {
		t.ft.send(FuncEntry, f, hit, cs.lane, cs.goroutine, t.callerName(f.ret), fields)
	} else {
		t.ft.emit(FuncEntry, f, hit, cs, fields)
	}
}

// calledAs is fn as the program called it from the call that returns to
// ret: named as the import that call went through, where that is
// another name of fn's (glibc's strchr is also index; memcpy's IFUNC
// picks memmove's implementation).
func (t *Tracer) calledAs(fn *traceFunc, ret uint64) *traceFunc {
	main := t.space.Main()
	imported, ok := main.CalledImport(ret - main.Bias)
	name := displayName(imported)
	if !ok || name == fn.name {
		return fn
	}
	if as, ok := fn.as[name]; ok {
		return as
	}
	as := *fn // (its arguments too: the stubs record those)
	as.name, as.as = name, nil
	if fn.as == nil {
		fn.as = map[string]*traceFunc{}
	}
	fn.as[name] = &as
	return &as
}

// inMain reports whether addr is in the main executable.
func (t *Tracer) inMain(addr uint64) bool {
	m := t.space.Main()
	return m != nil && t.space.ModuleAt(addr) == m
}

// traceEntryOnly is the function tracer without returns: one event per
// call, naming the caller from the return address: loadedRet when a
// detour loaded it (else 0), read from the stack otherwise.
func (t *Tracer) traceEntryOnly(regs *unix.PtraceRegs, s *site, hit *Hit, loadedRet uint64) {
	f := shadowFrame{fn: s.fn, time: hit.Time, ret: loadedRet}
	if loadedRet == 0 {
		if ret, ok := t.entryReturn(regs); ok {
			f.ret = ret
		}
	}
	t.ft.send(FuncEntry, &f, hit, int64(hit.Tid), 0, t.callerName(f.ret), t.entryFields(s.fn, hit))
}

// callerName names the function a return address is in.
func (t *Tracer) callerName(ret uint64) string {
	if name, ok := t.ft.callers[ret]; ok {
		return name
	}
	name := fmt.Sprintf("0x%x", ret)
	if m := t.space.ModuleAt(ret); m != nil {
		if sym, ok := m.SymbolAt(ret - m.Bias); ok {
			name = displayName(sym.Name)
		}
	}
	t.ft.callers[ret] = name
	return name
}

// emit hands one event about frame f of cs to the handler.
func (ft *funcTracer) emit(kind FuncEventKind, f *shadowFrame, hit *Hit, cs *callStack, fields []fetch.Field) {
	if ft != nil {
		ft.send(kind, f, hit, cs.lane, cs.goroutine, "", fields)
	}
}

// send builds the event in the reused scratch and hands it over; caller
// names the calling function, for the function tracer.
func (ft *funcTracer) send(kind FuncEventKind, f *shadowFrame, hit *Hit, lane, goroutine int64, caller string, fields []fetch.Field) {
	if ft.opts.Handler == nil {
		return
	}
	ft.ev = FuncEvent{Kind: kind, Pid: hit.Pid, Tid: hit.Tid, Comm: hit.Comm, CPU: hit.CPU, Time: hit.Time,
		Lane: lane, Goroutine: goroutine, Func: f.fn.name, Depth: f.depth, Caller: caller, Fields: fields}
	if kind == FuncReturn {
		ft.ev.EntryTime = f.time
	}
	ft.opts.Handler(&ft.ev)
}
