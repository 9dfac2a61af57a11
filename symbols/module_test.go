package symbols

import (
	"bytes"
	"debug/elf"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func openTestModule(t *testing.T, path string) *Module {
	t.Helper()
	m, err := OpenModule(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	if err := m.LoadSymbols(); err != nil {
		t.Fatal(err)
	}
	return m
}

func mustLookup(t *testing.T, m *Module, name string) Symbol {
	t.Helper()
	s, ok := m.Lookup(name)
	if !ok {
		t.Fatalf("Lookup(%q) in %s: not found", name, m.Path)
	}
	return s
}

func TestModuleMatchesNM(t *testing.T) {
	for _, tc := range []struct {
		name  string
		flags []string
		pie   bool
	}{
		{"pie", []string{"-fPIE", "-pie"}, true},
		{"nopie", []string{"-fno-PIE", "-no-pie"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := buildProg(t, t.TempDir(), "prog", tc.flags...)
			m := openTestModule(t, path)
			if m.PIE != tc.pie {
				t.Errorf("PIE = %v, want %v", m.PIE, tc.pie)
			}
			if want := readelfBuildID(t, path); m.BuildID != want {
				t.Errorf("BuildID = %q, readelf says %q", m.BuildID, want)
			}
			nm := nmSymbols(t, path)
			checked := 0
			for name, want := range nm {
				isFunc := strings.IndexByte("Tti", want.kind) >= 0
				if !isFunc && strings.IndexByte("DdBbRrVvWw", want.kind) < 0 {
					continue
				}
				got, ok := m.Lookup(name)
				if !ok {
					t.Errorf("Lookup(%q): not found; nm: %c %#x", name, want.kind, want.addr)
					continue
				}
				if got.Addr != want.addr || (want.hasSize && got.Size != want.size) {
					t.Errorf("Lookup(%q) = %#x/%#x; nm: %#x/%#x", name, got.Addr, got.Size, want.addr, want.size)
				}
				if isFunc && !got.Func {
					t.Errorf("Lookup(%q).Func = false; nm kind %c", name, want.kind)
				}
				checked++
			}
			for _, name := range []string{"main", "work", "worker", "helper", "counter", "call_twin"} {
				if _, ok := nm[name]; !ok {
					t.Errorf("nm does not list %q once; test program broken?", name)
				}
			}
			if counter := mustLookup(t, m, "counter"); counter.Func || counter.Size != 4 {
				t.Errorf("counter = %+v, want a 4-byte object", counter)
			}
			t.Logf("%d symbols agree with nm", checked)
		})
	}
}

// nmDuplicates returns the nm entries of a name defined more than once.
func nmDuplicates(t *testing.T, path, name string) map[byte]uint64 {
	t.Helper()
	out := run(t, "", "nm", "--defined-only", path)
	found := make(map[byte]uint64)
	for _, line := range strings.Split(out, "\n") {
		var addr uint64
		var kind byte
		var sym string
		if n, _ := fmt.Sscanf(line, "%x %c %s", &addr, &kind, &sym); n == 3 && sym == name {
			found[kind] = addr
		}
	}
	return found
}

func TestLookupPrefersFunctionThenGlobal(t *testing.T) {
	path := buildProg(t, t.TempDir(), "prog")
	m := openTestModule(t, path)

	// twin: a static function in prog.c and a global one in other.c.
	twins := nmDuplicates(t, path, "twin")
	if twins['t'] == 0 || twins['T'] == 0 {
		t.Fatalf("nm twin entries = %v, want a local and a global function", twins)
	}
	if got := mustLookup(t, m, "twin"); got.Addr != twins['T'] || !got.Func {
		t.Errorf("Lookup(twin) = %+v, want the global function at %#x", got, twins['T'])
	}

	// dupe: a static function in prog.c and a global variable in other.c.
	dupes := nmDuplicates(t, path, "dupe")
	if dupes['t'] == 0 || dupes['D'] == 0 {
		t.Fatalf("nm dupe entries = %v, want a local function and a global variable", dupes)
	}
	if got := mustLookup(t, m, "dupe"); got.Addr != dupes['t'] || !got.Func {
		t.Errorf("Lookup(dupe) = %+v, want the function at %#x", got, dupes['t'])
	}

	// Both twins are functions, so both must be in Functions().
	var twinAddrs []uint64
	for _, f := range m.Functions() {
		if f.Name == "twin" {
			twinAddrs = append(twinAddrs, f.Addr)
		}
	}
	if len(twinAddrs) != 2 {
		t.Errorf("Functions() has twin at %#x, want both %#x and %#x", twinAddrs, twins['t'], twins['T'])
	}
}

func TestFunctionsAndSymbolAt(t *testing.T) {
	path := buildProg(t, t.TempDir(), "prog")
	m := openTestModule(t, path)
	funcs := m.Functions()
	if len(funcs) < 8 {
		t.Fatalf("Functions() = %d symbols, want at least 8", len(funcs))
	}
	for i, f := range funcs {
		if !f.Func || f.Size == 0 {
			t.Errorf("Functions()[%d] = %+v: not a sized function", i, f)
		}
		if i > 0 && funcs[i-1].Addr >= f.Addr {
			t.Errorf("Functions() not strictly sorted at %d: %#x then %#x", i, funcs[i-1].Addr, f.Addr)
		}
	}
	work := mustLookup(t, m, "work")
	if !slices.Contains(funcs, work) {
		t.Errorf("Functions() lacks %+v", work)
	}
	for _, addr := range []uint64{work.Addr, work.Addr + 1, work.Addr + work.Size - 1} {
		if got, ok := m.SymbolAt(addr); !ok || got != work {
			t.Errorf("SymbolAt(%#x) = %+v, %v; want %+v", addr, got, ok, work)
		}
	}
	if got, ok := m.SymbolAt(work.Addr + work.Size); ok && got.Name == "work" {
		t.Errorf("SymbolAt(end of work) = %+v, want the next symbol or none", got)
	}
	counter := mustLookup(t, m, "counter")
	if got, ok := m.SymbolAt(counter.Addr + 2); !ok || got.Name != "counter" {
		t.Errorf("SymbolAt(counter+2) = %+v, %v; want counter", got, ok)
	}
	if got, ok := m.SymbolAt(0); ok {
		t.Errorf("SymbolAt(0) = %+v, want none", got)
	}
	// Returned slices are copies: editing one must not corrupt the module.
	funcs[0].Name = "clobbered"
	if m.Functions()[0].Name == "clobbered" {
		t.Error("Functions() returns the module's own slice")
	}
}

func TestOffsetToAddrAndReadCode(t *testing.T) {
	for _, flags := range [][]string{{"-fPIE", "-pie"}, {"-fno-PIE", "-no-pie"}} {
		t.Run(flags[1], func(t *testing.T) {
			path := buildProg(t, t.TempDir(), "prog", flags...)
			m := openTestModule(t, path)
			ef, err := elf.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer ef.Close()
			text := ef.Section(".text")
			textData, err := text.Data()
			if err != nil {
				t.Fatal(err)
			}
			for _, name := range []string{"work", "main", "helper"} {
				sym := mustLookup(t, m, name)
				fileOff := sym.Addr - text.Addr + text.Offset
				if got, err := m.OffsetToAddr(fileOff); err != nil || got != sym.Addr {
					t.Errorf("OffsetToAddr(%#x) = %#x, %v; want %s at %#x", fileOff, got, err, name, sym.Addr)
				}
				code, err := m.ReadCode(sym.Addr, sym.Size)
				if err != nil {
					t.Fatalf("ReadCode(%s): %v", name, err)
				}
				want := textData[sym.Addr-text.Addr:][:sym.Size]
				if !bytes.Equal(code, want) {
					t.Errorf("ReadCode(%s) = % x, .text has % x", name, code, want)
				}
			}
			st, err := os.Stat(path)
			if err != nil {
				t.Fatal(err)
			}
			if got, err := m.OffsetToAddr(uint64(st.Size()) + 0x10000); err == nil {
				t.Errorf("OffsetToAddr(past EOF) = %#x, want an error", got)
			}
			var top uint64
			for _, p := range ef.Progs {
				top = max(top, p.Vaddr+p.Memsz)
			}
			if _, err := m.ReadCode(top+0x10000, 4); err == nil {
				t.Error("ReadCode(beyond all segments) succeeded, want an error")
			}
			last := text.Addr + text.Size
			if _, err := m.ReadCode(last-4, 1<<30); err == nil {
				t.Error("ReadCode past the segment succeeded, want an error")
			}
		})
	}
}

func TestStrippedWithBuildIDDebugFile(t *testing.T) {
	needTools(t, "objcopy", "strip")
	dir := t.TempDir()
	full := buildProg(t, dir, "prog", "-fPIE", "-pie")
	id := readelfBuildID(t, full)
	if len(id) < 4 {
		t.Fatalf("gcc made no build ID (%q)", id)
	}
	debugRoot := filepath.Join(dir, "debug")
	debugFile := filepath.Join(debugRoot, ".build-id", id[:2], id[2:]+".debug")
	if err := os.MkdirAll(filepath.Dir(debugFile), 0o755); err != nil {
		t.Fatal(err)
	}
	run(t, dir, "objcopy", "--only-keep-debug", full, debugFile)
	stripped := filepath.Join(dir, "prog.stripped")
	run(t, dir, "strip", "--strip-all", "-o", stripped, full)

	setDebugDirs(t, filepath.Join(dir, "empty"))
	bare := openTestModule(t, stripped)
	if _, ok := bare.Lookup("helper"); ok {
		t.Fatal("stripped binary without debug file still resolves the static helper; test is void")
	}
	if bare.DebugFile() != "" {
		t.Errorf("DebugFile() = %q without a debug dir", bare.DebugFile())
	}

	setDebugDirs(t, debugRoot)
	m := openTestModule(t, stripped)
	if m.DebugFile() != debugFile {
		t.Errorf("DebugFile() = %q, want %q", m.DebugFile(), debugFile)
	}
	ref := openTestModule(t, full)
	for _, name := range []string{"helper", "work", "main", "twin"} {
		if got, want := mustLookup(t, m, name), mustLookup(t, ref, name); got != want {
			t.Errorf("Lookup(%q) via debug file = %+v, unstripped has %+v", name, got, want)
		}
	}
	if got, want := len(m.Functions()), len(ref.Functions()); got != want {
		t.Errorf("Functions() via debug file: %d, unstripped: %d", got, want)
	}
	// Code still comes from the stripped file: the debug file has no .text bytes.
	work := mustLookup(t, m, "work")
	code, err := m.ReadCode(work.Addr, work.Size)
	if err != nil {
		t.Fatal(err)
	}
	if want, _ := ref.ReadCode(work.Addr, work.Size); !bytes.Equal(code, want) {
		t.Errorf("ReadCode(work) of stripped = % x, unstripped % x", code, want)
	}
}

func TestStrippedWithDebugLink(t *testing.T) {
	needTools(t, "objcopy", "strip")
	dir := t.TempDir()
	full := buildProg(t, dir, "prog", "-Wl,--build-id=none")
	if id := readelfBuildID(t, full); id != "" {
		t.Fatalf("build ID %q despite --build-id=none", id)
	}
	// A decoy with the right name but another CRC sits where gdb looks first.
	decoy := buildProg(t, t.TempDir(), "other", "-Wl,--build-id=none", "-O1") // other code, other CRC
	binDir := filepath.Join(dir, "bin")
	if err := os.MkdirAll(filepath.Join(binDir, ".debug"), 0o755); err != nil {
		t.Fatal(err)
	}
	debugFile := filepath.Join(dir, "prog.debug")
	run(t, dir, "objcopy", "--only-keep-debug", full, debugFile)
	stripped := filepath.Join(binDir, "prog")
	run(t, dir, "strip", "--strip-all", "-o", stripped, full)
	run(t, dir, "objcopy", "--add-gnu-debuglink="+debugFile, stripped)
	linked := filepath.Join(binDir, ".debug", "prog.debug")
	if err := os.Rename(debugFile, linked); err != nil {
		t.Fatal(err)
	}
	run(t, dir, "objcopy", "--only-keep-debug", decoy, filepath.Join(binDir, "prog.debug"))

	setDebugDirs(t, filepath.Join(dir, "empty"))
	m := openTestModule(t, stripped)
	if m.DebugFile() != linked {
		t.Errorf("DebugFile() = %q, want %q (the decoy has a wrong CRC)", m.DebugFile(), linked)
	}
	ref := openTestModule(t, full)
	if got, want := mustLookup(t, m, "helper"), mustLookup(t, ref, "helper"); got != want {
		t.Errorf("Lookup(helper) via debuglink = %+v, want %+v", got, want)
	}
}

func TestGoBinary(t *testing.T) {
	needTools(t, "go")
	dir := t.TempDir()
	src := `package main

//go:noinline
func work(n int) int { return n*7 + 1 }

func main() { println(work(3)) }
`
	if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module gotest\n\ngo 1.21\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	run(t, dir, "go", "build", "-o", "gotest", ".")
	m := openTestModule(t, filepath.Join(dir, "gotest"))
	work := mustLookup(t, m, "main.work")
	if !work.Func || work.Size == 0 {
		t.Fatalf("main.work = %+v, want a sized function", work)
	}
	if got, ok := m.SymbolAt(work.Addr + 1); !ok || got.Name != "main.work" {
		t.Errorf("SymbolAt(main.work+1) = %+v, %v", got, ok)
	}
	if got := m.Suggest("work", 3); !slices.Contains(got, "main.work") {
		t.Errorf("Suggest(work) = %v, want main.work among them", got)
	}
	if _, ok := m.Lookup("runtime.main"); !ok {
		t.Error("runtime.main not found")
	}
}

func TestSuggest(t *testing.T) {
	path := buildProg(t, t.TempDir(), "prog")
	m := openTestModule(t, path)
	if got := m.Suggest("wrk", 2); !slices.Equal(got, []string{"work", "worker"}) {
		t.Errorf("Suggest(wrk, 2) = %v, want [work worker]", got)
	}
	if got := m.Suggest("WORKER", 1); !slices.Equal(got, []string{"worker"}) {
		t.Errorf("Suggest(WORKER, 1) = %v, want [worker]", got)
	}
	if got := m.Suggest("helpr", 5); len(got) == 0 || got[0] != "helper" {
		t.Errorf("Suggest(helpr) = %v, want helper first", got)
	}
	if got := m.Suggest("zzzzqqq", 5); len(got) != 0 {
		t.Errorf("Suggest(zzzzqqq) = %v, want nothing", got)
	}
	if got := m.Suggest("counter", 5); slices.Contains(got, "counter") {
		t.Errorf("Suggest(counter) = %v: suggests a data object", got)
	}
}

// TestManySymbols checks that a 100k-symbol binary loads whole and answers
// lookups; how fast is the benchmarks' business (load_bench_test.go) (a timed assertion here,
// under -race on a shared machine, only measured the machine).
func TestManySymbols(t *testing.T) {
	needTools(t, "gcc")
	const n = 100000
	dir := t.TempDir()
	var asm strings.Builder
	asm.WriteString(".text\n")
	for i := range n {
		fmt.Fprintf(&asm, ".globl f%d\n.type f%d,@function\nf%d:\n\tnop\n\tret\n.size f%d,.-f%d\n", i, i, i, i, i)
	}
	if err := os.WriteFile(filepath.Join(dir, "big.s"), []byte(asm.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	run(t, dir, "gcc", "-nostdlib", "-static", "-Wl,-e,f0", "-o", "big", "big.s")

	begin := time.Now()
	space, err := LoadBinary(filepath.Join(dir, "big"))
	if err != nil {
		t.Fatal(err)
	}
	defer space.Close()
	mod, last, err := space.Lookup(fmt.Sprintf("f%d", n-1))
	if err != nil {
		t.Fatal(err)
	}
	funcs := mod.Functions()
	desc := space.Describe(last.Addr + 1)
	elapsed := time.Since(begin)
	t.Logf("load + lookup + Functions + Describe of %d symbols: %v", n, elapsed)

	if len(funcs) != n {
		t.Errorf("Functions() = %d symbols, want %d", len(funcs), n)
	}
	if want := fmt.Sprintf("f%d+0x1/0x2", n-1); desc != want {
		t.Errorf("Describe = %q, want %q", desc, want)
	}
	begin = time.Now()
	if _, _, err := space.Lookup("f12345x"); err == nil {
		t.Error("Lookup(f12345x) succeeded")
	}
	t.Logf("failed lookup with suggestions: %v", time.Since(begin))
}

// TestLookupExportedRaw: LookupExported reads a library's dynamic
// symbols as bytes, without decoding them all; for every name libc
// exports (and names it does not), it finds what the decoded table
// gives: the first defined function or object of that name that is not
// of a hidden version.
func TestLookupExportedRaw(t *testing.T) {
	libc := strings.TrimSpace(run(t, "", "gcc", "-print-file-name=libc.so.6"))
	if !filepath.IsAbs(libc) {
		t.Fatalf("gcc does not know where libc.so.6 is (%q)", libc)
	}
	m := openTestModule(t, libc)
	if m.elf.Section(".symtab") != nil {
		t.Fatalf("%s has a .symtab, where LookupExported is Lookup: the test is void", libc)
	}
	dynsym, err := m.elf.DynamicSymbols()
	if err != nil {
		t.Fatal(err)
	}
	names := []string{"no_such_function", "malloc@GLIBC_2.2.5", ""}
	for _, s := range dynsym {
		names = append(names, s.Name)
	}
	checked := 0
	for _, name := range names {
		var want Symbol
		found := false
		for _, s := range dynsym {
			if exportedAs(s, name) {
				typ := elf.ST_TYPE(s.Info)
				want, found = Symbol{Name: s.Name, Addr: s.Value, Size: s.Size, Func: typ != elf.STT_OBJECT, IFunc: typ == sttGNUIFunc}, true
				break
			}
		}
		got, ok := m.LookupExported(name)
		if ok != found || got != want {
			t.Errorf("LookupExported(%q) = %+v, %v; want %+v, %v", name, got, ok, want, found)
		}
		if found {
			checked++
		}
	}
	if checked < 1000 {
		t.Errorf("only %d names of %s found: want its exports", checked, libc)
	}
	// The decoded table is for the rare hidden candidate only.
	if m, err = OpenModule(libc); err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if _, ok := m.LookupExported("malloc"); !ok || m.dynsym != nil {
		t.Errorf("LookupExported(malloc): found %v; decoded every dynamic symbol: %v", ok, m.dynsym != nil)
	}
}

// TestBuiltByGoKept: the answer is worked out once (the tracer asks for
// every site, many times at a start), not from the sections again.
func TestBuiltByGoKept(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	m := openTestModule(t, exe)
	if !m.BuiltByGo() {
		t.Fatalf("%s (a Go test binary): BuiltByGo is false", exe)
	}
	m.elf.Sections = nil // what it was worked out from
	if !m.BuiltByGo() {
		t.Error("BuiltByGo worked its answer out again")
	}
}
