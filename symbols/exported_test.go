package symbols

import (
	"os"
	"path/filepath"
	"slices"
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
