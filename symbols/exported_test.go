package symbols

import (
	"debug/elf"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
)

const exportsC = `
int shared_impl(int x) { return x * 3; }
int alias_one(int) __attribute__((alias("shared_impl")));
int __alias_two(int) __attribute__((alias("shared_impl")));
static int __attribute__((noinline)) helper(int x) { return x + 1; }
int other(int x) { return helper(x) * 2; }
int data_obj = 4;
`

// strippedLib builds exportsC as a shared library with flags, and a
// stripped copy whose names are in a debug file next to it (gdb's
// debuglink), as libc's are with libc6-dbg.
func strippedLib(t *testing.T, flags ...string) (full, stripped string) {
	t.Helper()
	needTools(t, "gcc", "objcopy", "strip")
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "lib.c"), []byte(exportsC), 0o644); err != nil {
		t.Fatal(err)
	}
	full = filepath.Join(dir, "full.so")
	run(t, dir, "gcc", append([]string{"-O1", "-g", "-shared", "-fPIC", "-o", full, "lib.c"}, flags...)...)
	bin := filepath.Join(dir, "bin")
	if err := os.Mkdir(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	stripped = filepath.Join(bin, "lib.so")
	run(t, dir, "objcopy", "--only-keep-debug", full, filepath.Join(bin, "lib.debug"))
	run(t, dir, "strip", "--strip-all", "-o", stripped, full)
	run(t, bin, "objcopy", "--add-gnu-debuglink=lib.debug", stripped)
	return full, stripped
}

// TestExportedFunctions: what --calls needs of a library, the functions
// the program imports with all their names, comes from its dynamic
// symbols alone, without the debug file's tables, and is what Functions
// and Aliases say with them.
func TestExportedFunctions(t *testing.T) {
	_, stripped := strippedLib(t)
	m, err := OpenModule(stripped)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	got := m.ExportedFunctions([]string{"alias_one", "other", "data_obj", "nosuch"})
	if m.entries != nil {
		t.Error("ExportedFunctions read the full tables")
	}
	if m.profilingBuild() || m.entries != nil {
		t.Error("profilingBuild of a library without -pg said yes or read the full tables")
	}
	if err := m.LoadSymbols(); err != nil {
		t.Fatal(err)
	}
	if m.DebugFile() == "" {
		t.Fatal("the debug file was not found: the test is void")
	}
	if _, ok := m.Lookup("helper"); !ok {
		t.Fatal("the debug file's tables lack the static helper: the test is void")
	}
	var want []NamedFunction
	for _, name := range []string{"alias_one", "other"} {
		sym := mustLookup(t, m, name)
		i := slices.IndexFunc(m.Functions(), func(s Symbol) bool { return s.Addr == sym.Addr })
		want = append(want, NamedFunction{m.Functions()[i], m.Aliases(sym.Addr)})
	}
	if len(want[0].Aliases) != 3 {
		t.Fatalf("shared_impl's names: %q, want 3: the test is void", want[0].Aliases)
	}
	sorted := func(fs []NamedFunction) []NamedFunction {
		fs = slices.Clone(fs)
		for i := range fs {
			fs[i].Aliases = slices.Sorted(slices.Values(fs[i].Aliases))
		}
		return fs
	}
	if !slices.EqualFunc(sorted(got), sorted(want), func(a, b NamedFunction) bool {
		return a.Symbol == b.Symbol && slices.Equal(a.Aliases, b.Aliases)
	}) {
		t.Errorf("ExportedFunctions:\n got %+v\nwant %+v", got, want)
	}
}

// TestProfilingBuildStripped: a stripped -pg library's sites are found as
// the unstripped one's, though only its dynamic symbols say it is a -pg
// build.
func TestProfilingBuildStripped(t *testing.T) {
	full, stripped := strippedLib(t, "-pg")
	ref := openTestModule(t, full)
	m, err := OpenModule(stripped)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if !m.profilingBuild() || m.entries != nil {
		t.Error("profilingBuild of a stripped -pg library said no or read the full tables")
	}
	want := ref.PatchSites()
	if len(want) < 3 {
		t.Fatalf("the unstripped -pg library has %d sites: the test is void", len(want))
	}
	if got := m.PatchSites(); !slices.Equal(got, want) {
		t.Errorf("PatchSites of the stripped library:\n got %+v\nwant %+v", got, want)
	}
}

// TestExportedRaw: libc's exported functions read off .dynsym's bytes
// are those its decoded dynamic symbols give, but for the names of
// hidden versions (memcpy@GLIBC_2.2.5), asked one name at a time and
// all at once.
func TestExportedRaw(t *testing.T) {
	m, dynsym := openLibc(t)
	decoded := func(names []string) []NamedFunction {
		saved := m.elf
		m.elf = nil // (exportedRaw refuses: the decoded symbols)
		defer func() { m.elf = saved }()
		fs := m.ExportedFunctions(names)
		for i := range fs {
			fs[i].Aliases = slices.DeleteFunc(slices.Clone(fs[i].Aliases), func(a string) bool { return strings.Contains(a, "@") })
			if len(fs[i].Aliases) < 2 {
				fs[i].Aliases = nil
			}
		}
		return fs
	}
	same := func(a, b []NamedFunction) bool {
		return slices.EqualFunc(a, b, func(x, y NamedFunction) bool {
			return x.Symbol == y.Symbol && slices.Equal(slices.Sorted(slices.Values(x.Aliases)), slices.Sorted(slices.Values(y.Aliases)))
		})
	}
	var all []string
	for _, s := range dynsym {
		if s.Section == elf.SHN_UNDEF || elf.ST_TYPE(s.Info) != elf.STT_FUNC {
			continue
		}
		if all = append(all, s.Name); len(all)%10 != 0 {
			continue // (one in ten asked alone: each read is of the whole table)
		}
		got, ok := m.exportedRaw([]string{s.Name})
		if !ok {
			t.Fatalf("%s: not read raw", s.Name)
		}
		if want := decoded([]string{s.Name}); !same(got, want) {
			t.Errorf("%s: raw %+v, decoded %+v", s.Name, got, want)
		}
	}
	if len(all) < 1000 {
		t.Fatalf("%d names: the test is void", len(all))
	}
	got, _ := m.exportedRaw(all)
	if want := decoded(all); !same(got, want) || len(got) < 1000 {
		t.Errorf("all %d names: %d functions, decoded %d", len(all), len(got), len(want))
	}
}

// TestExportsFunctionRaw: the functions libc exports, as CallEntry asks
// (off .dynsym's bytes), are those its decoded dynamic symbols say.
func TestExportsFunctionRaw(t *testing.T) {
	m, dynsym := openLibc(t)
	want := map[uint64]bool{}
	for _, s := range dynsym {
		typ, bind := elf.ST_TYPE(s.Info), elf.ST_BIND(s.Info)
		if s.Section != elf.SHN_UNDEF && (typ == elf.STT_FUNC || typ == sttGNUIFunc) &&
			(bind == elf.STB_GLOBAL || bind == elf.STB_WEAK) && elf.ST_VISIBILITY(s.Other) == elf.STV_DEFAULT {
			want[s.Value] = true
		}
	}
	if len(want) < 1000 {
		t.Fatalf("%d functions exported: the test is void", len(want))
	}
	m.exportsFunction(0)
	if !maps.Equal(m.cfi.exported, want) {
		t.Errorf("%d addresses exported, the decoded symbols say %d", len(m.cfi.exported), len(want))
	}
}

// openLibc opens libc.so.6 and reads its dynamic symbols decoded.
func openLibc(t *testing.T) (*Module, []elf.Symbol) {
	t.Helper()
	m, err := OpenModule("/lib/" + map[string]string{"amd64": "x86_64", "arm64": "aarch64"}[runtime.GOARCH] + "-linux-gnu/libc.so.6")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	dynsym, err := m.dynamicSymbols()
	if err != nil {
		t.Fatal(err)
	}
	return m, dynsym
}
