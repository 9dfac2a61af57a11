package probe

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/probedbg/probe/fetch"
	"github.com/probedbg/probe/singlestep"
	"github.com/probedbg/probe/symbols"
	"github.com/probedbg/probe/tracee"
)

// Live patching, as ksplice patches a running kernel: a function of the
// process is replaced by one from a shared library, loaded into the
// process by an injected call of the C library's dlopen. FUNC's entry
// becomes a branch to a trampoline in a page near it, which jumps to
// NEWFUNC; the patch stays after the tracer detaches (that is its
// point), and a marker (a memory file named "probe-patches", its text a
// line per patch with FUNC's original bytes) tells a later session what
// is patched, for ListPatches and Unpatch.
//
// Safety, as ksplice's: the branch goes in only while no thread is inside
// FUNC, neither running it (its pc) nor below it on its stack (a return
// address in it, found by unwinding each stack to its first frame); a
// stack that cannot be unwound that far proves nothing, and counts as
// inside. Every thread is stopped for the check and the write; while a
// thread is inside, the process runs on and the check is made again
// until the time allowed is over. NEWFUNC must take and return what FUNC
// does, as both modules' DWARF says (the classes and sizes the calling
// convention places them by); without DWARF for either, no patch.

// PatchMarkerName is the name of the memory file that records a
// process's patches (its /proc/PID/maps line ends "/memfd:probe-patches
// (deleted)").
const PatchMarkerName = "probe-patches"

const (
	patchMarkerSize = 64 << 10
	patchScratch    = 4096 // at the end of the marker: a string for an injected call
	patchMagic      = "probe-patches 1\n"
	rtldNow         = 2
)

// Patch is one function of the process redirected to another.
type Patch struct {
	Func    string // FUNC's symbol
	Addr    uint64 // its entry
	With    string // LIB:NEWFUNC, LIB an absolute path
	NewAddr uint64 // NEWFUNC's entry
	Tramp   uint64 // the trampoline the branch at Addr goes to
	Orig    []byte // FUNC's bytes the branch replaced
	// Inlined is where FUNC was also inlined into its callers: those
	// copies keep the old code (Patch refuses them unless told).
	Inlined []string
}

// PatchOptions are how Patch goes about it.
type PatchOptions struct {
	Wait time.Duration // how long to try while a thread is in the way
	// Inlined: patch FUNC's entry even though copies of it inlined into
	// its callers keep the old code.
	Inlined bool
}

// injectState is what calls and errors injected into the tracee need.
type injectState struct {
	errno errnoPlace // where the C library keeps errno (errno.go)
	// trap is the breakpoint injected calls return to.
	trap uint64
	// skipped are the threads in a system call an o: probe skipped, and
	// the result each gets at its exit stop (override.go).
	skipped map[int]skippedCall
}

func (p Patch) String() string {
	return fmt.Sprintf("%s (%#x) -> %s (%#x)", p.Func, p.Addr, p.With, p.NewAddr)
}

// ErrBusy is why a patch did not go in: a thread stayed inside the
// function for all the time allowed.
var ErrBusy = errors.New("the function is in use")

// busyError says which thread is inside, and how; it is an ErrBusy.
type busyError struct{ why string }

func (e *busyError) Error() string        { return e.why }
func (e *busyError) Is(target error) bool { return target == ErrBusy }

func busy(format string, a ...any) error { return &busyError{fmt.Sprintf(format, a...)} }

// Patch redirects function fn (FUNC or MOD:FUNC) to function newFn of
// the shared library lib, loading it into the process if it is not
// already, once no thread is inside fn; it tries for opts.Wait.
func (t *Tracer) Patch(fn, lib, newFn string, opts PatchOptions) (Patch, error) {
	wait := opts.Wait
	var p Patch
	var inlined []string
	var r resolved
	var newSym symbols.Symbol
	lib, err := filepath.Abs(lib)
	if err != nil {
		return p, err
	}
	if strings.ContainsAny(lib, " \t\n") {
		return p, badInput(fmt.Errorf("%s: a library path with white space is not supported", lib))
	}
	// What this session adds to the process, taken out again if no patch
	// goes in: the library's load, the marker.
	var handle, newMarker uint64
	undo := func(anchor int) {
		if handle != 0 {
			t.unloadLibrary(anchor, handle)
		}
		if newMarker != 0 {
			t.proc.InjectSyscall(anchor, unix.SYS_MUNMAP, newMarker, patchMarkerSize)
		}
	}
	err = untilNotBusy(wait, func() error {
		return t.do(func(anchor int) error {
			marker, patches, err := readPatches(t.pid, t.proc)
			if err != nil && !errors.Is(err, errNoMarker) {
				return err
			}
			if r, err = t.patchTarget(fn, patches); err != nil {
				return err
			}
			if newSym, err = checkReplacement(r, lib, newFn); err != nil {
				return err
			}
			if inlined, err = t.checkInlined(r, opts.Inlined); err != nil {
				return err
			}
			if _, err := t.space.FindModule(lib); err != nil {
				// Before anything is injected: a thread that cannot
				// call dlopen now is let run untouched until it can.
				if why := t.unsafeToCall(anchor); why != "" {
					return busy("thread %d %s, where a call of dlopen is not safe: it cannot load %s now", anchor, why, filepath.Base(lib))
				}
			}
			if marker == 0 {
				if marker, err = t.newPatchMarker(anchor); err != nil {
					return err
				}
				newMarker = marker
			}
			if handle, err = t.loadLibrary(anchor, lib, marker); err != nil {
				undo(anchor)
				newMarker = 0
			}
			return err
		})
	})
	if err != nil {
		return p, err
	}
	p = Patch{Func: r.sym.Name, Addr: r.addr, With: lib + ":" + newFn, Inlined: inlined}
	err = t.whenOutside(r, wait, func(anchor int) error {
		m, err := t.space.FindModule(lib)
		if err != nil {
			return fmt.Errorf("%s is not mapped after dlopen: %w", lib, err)
		}
		p.NewAddr = newSym.Addr + m.Bias
		return t.writePatch(anchor, &p)
	})
	if err != nil {
		t.do(func(anchor int) error { undo(anchor); return nil })
	}
	return p, err
}

// Unpatch puts back fn's original bytes, once no thread is in the middle
// of the branch that replaced them. The library stays loaded: a thread
// may still be running its function.
func (t *Tracer) Unpatch(fn string, wait time.Duration) (Patch, error) {
	var p Patch
	err := t.allStopped(wait, func(anchor int, tids []int) error {
		marker, patches, err := readPatches(t.pid, t.proc)
		if err != nil && !errors.Is(err, errNoMarker) {
			return err
		}
		i := slices.IndexFunc(patches, func(q Patch) bool { return q.Func == fn || fmt.Sprintf("%#x", q.Addr) == fn })
		if i < 0 {
			return badInput(fmt.Errorf("%s: not patched in pid %d", fn, t.pid))
		}
		p = patches[i]
		for _, tid := range tids {
			var regs unix.PtraceRegs
			if err := t.proc.GetRegs(tid, &regs); err != nil {
				continue // gone
			}
			if pc := regs.PC(); pc > p.Addr && pc < p.Addr+uint64(len(p.Orig)) {
				return busy("%s: thread %d is in the middle of the branch at %#x", p.Func, tid, p.Addr)
			}
		}
		if _, err := t.proc.WriteAt(p.Orig, int64(p.Addr)); err != nil {
			return fmt.Errorf("put back %s's bytes: %w", p.Func, err)
		}
		return writePatches(t.proc, marker, slices.Delete(patches, i, i+1))
	})
	return p, err
}

// patchTarget resolves fn, which must be a C function's entry not among
// patches, the process's.
func (t *Tracer) patchTarget(fn string, patches []Patch) (resolved, error) {
	loc, err := fetch.ParseLocation(fn)
	if err != nil || loc.Symbol == "" || loc.Offset != 0 || loc.HasLine {
		return resolved{}, badInput(fmt.Errorf("%s: name a function (FUNC or MOD:FUNC)", fn))
	}
	r, err := t.resolveOne(loc)
	switch {
	case err != nil:
		return r, err
	case r.sym.Name == "" || !r.sym.Func || r.addr != r.sym.Addr+r.module.Bias:
		return r, badInput(fmt.Errorf("%s: not a function's entry", fn))
	case isGo(r.module):
		return r, badInput(fmt.Errorf("%s: Go functions cannot be patched: their callers' ABI and the runtime's tables (stack maps, defers) are not checked", fn))
	}
	for _, q := range patches {
		if q.Addr == r.addr {
			return r, badInput(fmt.Errorf("%s is already patched (%s): unpatch it first", fn, q.With))
		}
	}
	return r, nil
}

// checkReplacement finds newFn in lib and checks, from both DWARFs,
// that it takes and returns what the function at r does.
func checkReplacement(r resolved, lib, newFn string) (symbols.Symbol, error) {
	const bias = symbols.ShelfBias
	space, err := symbols.LoadBinaryAt(lib, bias)
	if err != nil {
		return symbols.Symbol{}, badInput(err)
	}
	defer space.Close()
	m := space.Main()
	if !m.PIE {
		return symbols.Symbol{}, badInput(fmt.Errorf("%s: not a shared library", lib))
	}
	sym, ok := m.Lookup(newFn)
	if !ok || !sym.Func {
		return sym, badInput(fmt.Errorf("%s: no function %s", lib, newFn))
	}
	signature := func(m *symbols.Mapped, addr uint64, what string) (symbols.Signature, error) {
		d, err := m.Debug()
		if err == nil {
			var sig symbols.Signature
			if sig, err = d.Signature(addr); err == nil {
				return sig, nil
			}
		}
		return symbols.Signature{}, badInput(fmt.Errorf("%s: its parameters cannot be checked without DWARF (%v): build it with -g", what, err))
	}
	old, err := signature(r.module, r.addr, r.sym.Name)
	if err != nil {
		return sym, err
	}
	repl, err := signature(m, sym.Addr+bias, lib+":"+newFn)
	if err != nil {
		return sym, err
	}
	if !sameCall(old, repl) {
		return sym, badInput(fmt.Errorf("%s%s and %s%s are called differently", r.sym.Name, describeSignature(old), newFn, describeSignature(repl)))
	}
	return sym, nil
}

// checkInlined says where the function at r was also inlined into its
// callers (its DWARF's inlined copies), and refuses the patch if it was,
// unless allowed: the branch at its entry does not reach those copies,
// and its callers there would keep the old code.
func (t *Tracer) checkInlined(r resolved, allowed bool) ([]string, error) {
	d, err := r.module.Debug()
	if err != nil {
		return nil, nil // checkReplacement has refused a module without DWARF
	}
	var where []string
	for _, at := range d.InlinedAt(r.sym.Name) {
		where = append(where, t.space.Describe(at))
	}
	if len(where) == 0 || allowed {
		return where, nil
	}
	places := "1 place"
	if len(where) > 1 {
		places = fmt.Sprintf("%d places", len(where))
	}
	return nil, badInput(fmt.Errorf("%s is also inlined at %s (%s): the callers there would keep the old code (--inlined patches its entry all the same)", r.sym.Name, places, strings.Join(where, ", ")))
}

// sameCall reports whether a call passes a's parameters and result
// where b's would be.
func sameCall(a, b symbols.Signature) bool {
	same := func(x, y symbols.ABIValue) bool {
		return x.Class == y.Class && x.Size == y.Size && slices.Equal(x.Words, y.Words) && x.HFA == y.HFA && x.ByReference == y.ByReference
	}
	return a.Variadic == b.Variadic && same(a.Result, b.Result) && slices.EqualFunc(a.Params, b.Params, same)
}

// describeSignature is a signature as the calling convention sees it:
// "(int32, ptr) int32".
func describeSignature(s symbols.Signature) string {
	word := func(v symbols.ABIValue) string {
		switch v.Class {
		case symbols.ClassVoid:
			return "void"
		case symbols.ClassInt:
			return fmt.Sprintf("int%d", 8*v.Size)
		case symbols.ClassPointer:
			return "ptr"
		case symbols.ClassFloat:
			return fmt.Sprintf("float%d", 8*v.Size)
		case symbols.ClassAggregate:
			if v.ByReference {
				return fmt.Sprintf("struct%d by reference", v.Size)
			}
			return fmt.Sprintf("struct%d", v.Size)
		}
		return fmt.Sprintf("other%d", v.Size)
	}
	var params []string
	for _, p := range s.Params {
		params = append(params, word(p))
	}
	if s.Variadic {
		params = append(params, "...")
	}
	return fmt.Sprintf("(%s) %s", strings.Join(params, ", "), word(s.Result))
}

// loadLibrary has thread anchor call dlopen(lib, RTLD_NOW) unless lib is
// mapped already (its path written in the scratch of the marker at
// marker), and reads the address space again; it returns the handle
// dlopen gave, 0 when lib was there before.
func (t *Tracer) loadLibrary(anchor int, lib string, marker uint64) (uint64, error) {
	if _, err := t.space.FindModule(lib); err == nil {
		return 0, nil
	}
	path := marker + patchMarkerSize - patchScratch
	if _, err := t.proc.WriteAt(append([]byte(lib), 0), int64(path)); err != nil {
		return 0, err
	}
	handle, err := t.callLibc(anchor, "dlopen", path, rtldNow)
	if err != nil {
		return 0, err
	}
	if handle == 0 {
		why := "dlopen returned NULL"
		if msg, err := t.callLibc(anchor, "dlerror"); err == nil && msg != 0 {
			if text, ok := fetch.ReadString(t.proc, msg); ok {
				why = text
			}
		}
		return 0, badInput(fmt.Errorf("load %s into pid %d: %s", lib, t.pid, why))
	}
	t.librariesChanged(anchor)
	return handle, nil
}

// unloadLibrary has thread anchor call dlclose(handle): a library this
// session loaded for a patch that did not go in.
func (t *Tracer) unloadLibrary(anchor int, handle uint64) {
	if why := t.unsafeToCall(anchor); why != "" {
		t.note("the library loaded for the patch stays: thread %d %s", anchor, why)
		return
	}
	if _, err := t.callLibc(anchor, "dlclose", handle); err != nil {
		t.note("the library loaded for the patch stays: %v", err)
		return
	}
	t.librariesChanged(anchor)
}

// callLibc has thread anchor call the C library's function fn.
func (t *Tracer) callLibc(anchor int, fn string, args ...uint64) (uint64, error) {
	m, sym, err := t.space.Lookup(fn)
	if err != nil {
		return 0, fmt.Errorf("no %s in pid %d (glibc 2.34 and later have it in libc)", fn, t.pid)
	}
	trap, err := t.callTrap(anchor, sym.Addr+m.Bias)
	if err != nil {
		return 0, err
	}
	return t.proc.InjectCall(anchor, sym.Addr+m.Bias, trap, args...)
}

// callTrap returns a breakpoint instruction in an injected page near
// near, for injected calls to return to.
func (t *Tracer) callTrap(anchor int, near uint64) (uint64, error) {
	if t.inject.trap != 0 {
		return t.inject.trap, nil
	}
	slot, err := t.allocSlot(anchor, near)
	if err != nil {
		return 0, err
	}
	if _, err := t.proc.WriteAt(singlestep.BreakpointInsn, int64(slot)); err != nil {
		return 0, err
	}
	t.inject.trap = slot
	return slot, nil
}

// whenOutside runs write with every thread of the process stopped and
// none inside r's function, trying again while one is, for wait.
func (t *Tracer) whenOutside(r resolved, wait time.Duration, write func(anchor int) error) error {
	ranges := [][2]uint64{{r.addr, r.addr + max(r.sym.Size, 1)}}
	if cold, ok := r.module.Lookup(r.sym.Name + ".cold"); ok && cold.Func {
		// gcc's cold part of the function is the function too.
		ranges = append(ranges, [2]uint64{cold.Addr + r.module.Bias, cold.Addr + r.module.Bias + max(cold.Size, 1)})
	}
	inside := func(pc uint64) bool {
		return slices.ContainsFunc(ranges, func(rg [2]uint64) bool { return pc >= rg[0] && pc < rg[1] })
	}
	return t.allStopped(wait, func(anchor int, tids []int) error {
		for _, tid := range tids {
			if why := t.threadInside(tid, inside); why != "" {
				return busy("%s: thread %d %s", r.sym.Name, tid, why)
			}
		}
		return write(anchor)
	})
}

// allStopped runs fn with every thread of the process stopped (tids,
// anchor among them), and again, the process let run a little between,
// while fn says ErrBusy, for wait.
func (t *Tracer) allStopped(wait time.Duration, fn func(anchor int, tids []int) error) error {
	return untilNotBusy(wait, func() error {
		return t.do(func(anchor int) error {
			held, ok := t.stopOthers(anchor)
			defer t.contAll(held)
			if !ok {
				return busy("could not stop every thread of pid %d", t.pid)
			}
			return fn(anchor, append(held, anchor))
		})
	})
}

// untilNotBusy calls attempt, and again while it says ErrBusy, the
// process let run a little between, for wait.
func untilNotBusy(wait time.Duration, attempt func() error) error {
	deadline := time.Now().Add(wait)
	for {
		err := attempt()
		if !errors.Is(err, ErrBusy) || time.Now().After(deadline) {
			return err
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// threadInside says how stopped thread tid is inside the function
// (inside tells its addresses), or "" when it is not.
func (t *Tracer) threadInside(tid int, inside func(pc uint64) bool) string {
	var regs unix.PtraceRegs
	if err := t.proc.GetRegs(tid, &regs); err != nil {
		return "" // gone
	}
	frames, outermost := (&Hit{tracer: t, Tid: tid, regs: &regs}).walk(maxPatchFrames)
	for i, f := range frames {
		look := f.PC
		if i > 0 {
			look-- // a return address: the call is before it
		}
		if inside(look) {
			if i == 0 {
				return "is running it"
			}
			return fmt.Sprintf("has it on its stack (%s)", f.Text)
		}
	}
	if !outermost {
		last := "no frame"
		if len(frames) > 0 {
			last = frames[len(frames)-1].Text
		}
		return fmt.Sprintf("has a stack that cannot be unwound to its first frame (it stops at %s): it may be", last)
	}
	return ""
}

const maxPatchFrames = 1024

func (t *Tracer) contAll(tids []int) {
	for _, tid := range tids {
		t.proc.Cont(tid, 0)
	}
}

// writePatch writes p's trampoline and the branch to it at p.Addr, and
// adds p to the marker.
func (t *Tracer) writePatch(anchor int, p *Patch) error {
	marker, patches, err := readPatches(t.pid, t.proc)
	if err != nil {
		return err
	}
	if why := t.landsInPatch(p.Addr, patchBranchLen); why != "" {
		return errors.New(why)
	}
	tramp := patchTrampoline(p.NewAddr)
	p.Tramp, _, err = t.allocDetour(anchor, p.Addr, len(tramp))
	if err != nil {
		return err
	}
	branch, err := patchBranch(p.Addr, p.Tramp)
	if err != nil {
		return err
	}
	p.Orig = make([]byte, len(branch))
	if _, err := t.proc.ReadAt(p.Orig, int64(p.Addr)); err != nil {
		return err
	}
	if _, err := t.proc.WriteAt(tramp, int64(p.Tramp)); err != nil {
		return err
	}
	if err := writePatches(t.proc, marker, append(patches, *p)); err != nil {
		return err
	}
	if _, err := t.proc.WriteAt(branch, int64(p.Addr)); err != nil {
		writePatches(t.proc, marker, patches)
		return fmt.Errorf("write the branch at %#x: %w", p.Addr, err)
	}
	return nil
}

// landsInPatch says what branches into the bytes after addr that a
// branch of n bytes covers, or "": a branch there from outside the
// function would land in the middle of ours.
func (t *Tracer) landsInPatch(addr uint64, n int) string {
	if patchBranchIsOneInsn {
		return "" // nothing lands inside one instruction
	}
	m := t.space.ModuleAt(addr)
	if m == nil {
		return fmt.Sprintf("%#x: in no module", addr)
	}
	bt, err := m.BranchTargets()
	if err != nil {
		return fmt.Sprintf("cannot tell where %s's code jumps: %v", m.Name, err)
	}
	sym, _ := m.SymbolAt(addr - m.Bias)
	link := addr - m.Bias
	for _, l := range bt.Landings(link, link+uint64(n)) {
		if l.Entry || l.From < sym.Addr || l.From >= sym.Addr+sym.Size {
			return fmt.Sprintf("%s: a branch at %s lands inside the bytes the patch's branch covers", t.space.Describe(addr), t.space.Describe(l.From+m.Bias))
		}
	}
	return ""
}

// newPatchMarker maps the process's marker, empty, through anchor.
func (t *Tracer) newPatchMarker(anchor int) (uint64, error) {
	addr, mem, err := t.proc.MapSharedNamed(anchor, PatchMarkerName, 0, patchMarkerSize)
	if err != nil {
		return 0, fmt.Errorf("map the patch marker: %w", err)
	}
	copy(mem, patchMagic)
	unix.Munmap(mem)
	return addr, nil
}

var errNoMarker = errors.New("no patch marker")

// ListPatches reads the patches of process pid from its marker, without
// attaching (reading its memory needs the permission ptrace does).
func ListPatches(pid int) ([]Patch, error) {
	mem, err := os.Open(fmt.Sprintf("/proc/%d/mem", pid))
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, badInput(fmt.Errorf("pid %d: %w", pid, tracee.ErrNoProcess))
		}
		return nil, err
	}
	defer mem.Close()
	_, patches, err := readPatches(pid, mem)
	if errors.Is(err, errNoMarker) {
		return nil, nil
	}
	return patches, err
}

// readPatches finds pid's marker in its mappings and parses it.
func readPatches(pid int, mem interface {
	ReadAt([]byte, int64) (int, error)
}) (uint64, []Patch, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/maps", pid))
	if err != nil {
		return 0, nil, err
	}
	defer f.Close()
	var addr uint64
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasSuffix(line, "/memfd:"+PatchMarkerName+" (deleted)") {
			start, _, _ := strings.Cut(line, "-")
			addr, err = strconv.ParseUint(start, 16, 64)
			if err != nil {
				return 0, nil, fmt.Errorf("pid %d's maps: %q", pid, line)
			}
			break
		}
	}
	if addr == 0 {
		return 0, nil, errNoMarker
	}
	buf := make([]byte, patchMarkerSize-patchScratch)
	if _, err := mem.ReadAt(buf, int64(addr)); err != nil {
		return 0, nil, fmt.Errorf("read pid %d's patch marker: %w", pid, err)
	}
	text, ok := bytes.CutPrefix(buf, []byte(patchMagic))
	if !ok {
		return 0, nil, fmt.Errorf("pid %d's patch marker at %#x: not ours (no %q)", pid, addr, strings.TrimSpace(patchMagic))
	}
	if i := bytes.IndexByte(text, 0); i >= 0 {
		text = text[:i]
	}
	var patches []Patch
	for _, line := range strings.Split(strings.TrimSpace(string(text)), "\n") {
		if line == "" {
			continue
		}
		p, err := parsePatchLine(line)
		if err != nil {
			return 0, nil, fmt.Errorf("pid %d's patch marker: %q: %w", pid, line, err)
		}
		patches = append(patches, p)
	}
	return addr, patches, nil
}

// A marker line: ADDR FUNC NEWADDR LIB:NEWFUNC TRAMP ORIG (hex).
func (p Patch) line() string {
	return fmt.Sprintf("%#x %s %#x %s %#x %s\n", p.Addr, p.Func, p.NewAddr, p.With, p.Tramp, hex.EncodeToString(p.Orig))
}

func parsePatchLine(line string) (Patch, error) {
	f := strings.Fields(line)
	if len(f) != 6 {
		return Patch{}, errors.New("want 6 fields")
	}
	var p Patch
	var err error
	num := func(s string) uint64 {
		v, e := strconv.ParseUint(s, 0, 64)
		if e != nil && err == nil {
			err = e
		}
		return v
	}
	p.Addr, p.Func, p.NewAddr, p.With, p.Tramp = num(f[0]), f[1], num(f[2]), f[3], num(f[4])
	if err != nil {
		return p, err
	}
	p.Orig, err = hex.DecodeString(f[5])
	return p, err
}

// writePatches writes the marker's text: the magic, a line a patch, the
// rest of its text zeroed.
func writePatches(mem fetch.Memory, marker uint64, patches []Patch) error {
	var b bytes.Buffer
	b.WriteString(patchMagic)
	for _, p := range patches {
		b.WriteString(p.line())
	}
	if b.Len() >= patchMarkerSize-patchScratch {
		return errors.New("the patch marker is full")
	}
	text := make([]byte, patchMarkerSize-patchScratch)
	copy(text, b.Bytes())
	_, err := mem.WriteAt(text, int64(marker))
	return err
}
