package integration

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// --filter as p:SYM resolves: a glob without MOD: looks in the program,
// then in the first library where it matches; an IFUNC (memcpy, memset,
// strlen) is traced at the implementation its resolver picked.

func filtersProg(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	lib := filepath.Join(dir, "libzfn.so")
	if err := build(dir, "gcc", "-O1", "-g", "-shared", "-fPIC", "-o", lib, filepath.Join(repoRoot, "integration", "testdata", "filters", "lib.c")); err != nil {
		t.Fatal(err)
	}
	exe := filepath.Join(dir, "prog")
	if err := build(dir, "gcc", "-O1", "-g", "-fno-builtin", "-o", exe, filepath.Join(repoRoot, "integration", "testdata", "filters", "prog.c"), "-L"+dir, "-lzfn", "-Wl,-rpath,"+dir); err != nil {
		t.Fatal(err)
	}
	return exe
}

// funcCounts counts the function tracer's lines by function.
func funcCounts(t *testing.T, trace string) map[string]int {
	t.Helper()
	b, err := os.ReadFile(trace)
	if err != nil {
		t.Fatal(err)
	}
	n := map[string]int{}
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "#") || line == "" {
			continue
		}
		f := strings.Fields(line)
		if len(f) >= 5 {
			n[f[3]]++
		}
	}
	return n
}

func TestFilterLikeSymbols(t *testing.T) {
	exe := filtersProg(t)
	dir := t.TempDir()

	// In the library, though no MOD: is given.
	trace := filepath.Join(dir, "lib.txt")
	if r := probe(t, "run", "--tracer", "function", "--filter", "zfn_*", "-o", trace, "--", exe, "10"); r.code != 0 {
		t.Fatalf("--filter zfn_*: %v", r)
	}
	if n := funcCounts(t, trace); n["zfn_twice"] != 10 || n["zfn_add"] != 10 {
		t.Errorf("--filter zfn_*: %v, want zfn_twice and zfn_add 10 times each", n)
	}
	// A glob that matches nothing where it was told to look names where
	// it does match.
	r := probe(t, "run", "--tracer", "function", "--filter", "prog:zfn_*", "--", exe, "1")
	if want := "probe: --filter \"prog:zfn_*\" matches no function in prog (matches in libzfn.so: 2; say MOD:GLOB)\n"; r.code != 2 || r.stderr != want {
		t.Errorf("--filter prog:zfn_*: want exit 2 and %q, got %v", want, r)
	}
	r = probe(t, "run", "--tracer", "function", "--filter", "nosuchfn*", "--", exe, "1")
	if want := "probe: --filter \"nosuchfn*\" matches no function in prog or its libraries\n"; r.code != 2 || r.stderr != want {
		t.Errorf("--filter nosuchfn*: want exit 2 and %q, got %v", want, r)
	}

	// IFUNCs: each call seen at the implementation picked for this CPU.
	for _, tracer := range []string{"function", "function_graph"} {
		trace = filepath.Join(dir, tracer+".txt")
		if r := probe(t, "run", "--tracer", tracer, "--filter", "libc:memcpy,libc:memset,libc:strlen", "--format", "json", "-o", trace, "--", exe, "10"); r.code != 0 {
			t.Fatalf("--filter libc IFUNCs: %v", r)
		}
		impls := map[string]int{}
		for _, e := range readJSONLines(t, trace) {
			if e.Event == "func_entry" {
				impls[e.Func]++
			}
		}
		for _, fn := range []string{"memcpy", "memset", "strlen"} {
			n := 0
			for impl, c := range impls {
				if strings.Contains(impl, fn) && impl != fn {
					n += c
				}
			}
			if n < 10 {
				t.Errorf("%s: %s's implementation entered %d times, want at least 10 (entries: %v)", tracer, fn, n, impls)
			}
		}
	}
}

// TestGoEntryOnceWhenStackGrows: a Go function whose call grows the
// goroutine's stack comes back to its first instruction from
// runtime.morestack; p:main.deep counts each call once, at +0, with its
// argument.
func TestGoEntryOnceWhenStackGrows(t *testing.T) {
	trace := filepath.Join(t.TempDir(), "trace")
	r := probe(t, "run", "-o", trace, "p:main.deep n=%ax:s64", "--", gorecBin, "300", "4")
	if r.code != 0 || r.stdout != "calls=1204 total=134520\n" {
		t.Fatalf("probe run gorec: %v", r)
	}
	evs := eventsIn(t, trace)
	if n := countByName(evs)["p_main_deep_0"]; n != 4*301 {
		t.Errorf("p:main.deep fired %d times, want 4*301 (every call once, though 512-byte frames grow the stacks)", n)
	}
	seen := map[string]int{}
	for _, e := range evs {
		if !strings.HasPrefix(e.loc, "main.deep+0x0/") {
			t.Fatalf("event at %q, want main.deep+0x0", e.loc)
		}
		seen[e.rest]++
	}
	for n := 0; n <= 300; n++ {
		if c := seen[" n="+strconv.Itoa(n)]; c != 4 {
			t.Fatalf("n=%d seen %d times, want 4 (one call per goroutine)", n, c)
		}
	}
}
