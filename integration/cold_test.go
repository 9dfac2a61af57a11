package integration

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// Functions not entered by a call (symbols.Module.CallEntry): gcc's cold
// parts (f.cold, reached by a jump from f, f's frame in place) and
// _start. Their [sp] is no return address, so no return hook may go
// there: the function tracers leave them out, saying why, `r:` refuses
// them, and `probe list` marks them; entry probes work.

// coldBin builds testdata/tracers/cold.c at -O2 (v's PIE-ness) and checks
// gcc split f as the tests expect.
func coldBin(t *testing.T, v variant) string {
	t.Helper()
	exe := builtOnce(t, "cold_"+v.String(), filepath.Join("testdata", "tracers", "cold.c"), v.flags()...)
	out, err := exec.Command("nm", exe).Output()
	if err != nil || !regexp.MustCompile(`(?m) t f\.cold$`).Match(out) {
		t.Fatalf("nm %s: no f.cold symbol (%v): gcc no longer splits f, the test proves nothing", exe, err)
	}
	return exe
}

func TestColdPartsNotHooked(t *testing.T) {
	for _, v := range []variant{o2pie, o2nopie} {
		t.Run(v.String(), func(t *testing.T) {
			exe := coldBin(t, v)
			want := runCmd(t, nil, exe)
			if want.code != 0 || want.stdout != "s=-1960\n" {
				t.Fatalf("cold untraced: %v", want)
			}
			for _, tracer := range []string{"function", "function_graph", "profile", "stack", "function_graph,profile"} {
				trace := filepath.Join(t.TempDir(), "trace")
				r := probe(t, "run", "--tracer", tracer, "-o", trace, "--", exe)
				if r.code != 0 || r.stdout != want.stdout {
					t.Errorf("--tracer %s: want exit 0 and %q (as untraced), got %v", tracer, want.stdout, r)
					continue
				}
				b, _ := os.ReadFile(trace)
				note := "# 1 functions not traced: f.cold (not entered by a call: a cold part of another function, jumped to)"
				if !strings.Contains(string(b)+r.stderr, note) {
					t.Errorf("--tracer %s: no %q note in the trace or on stderr:\n%s%s", tracer, note, limit(string(b)), r.stderr)
				}
				if strings.Contains(string(b), "f.cold <-") || strings.Contains(string(b), "f.cold()") {
					t.Errorf("--tracer %s traced f.cold:\n%s", tracer, limit(string(b)))
				}
			}
			for _, spec := range []string{"r:f.cold", "r:_start", "p:f.cold%return"} {
				r := probe(t, "run", spec, "--", exe)
				sym := strings.TrimSuffix(strings.TrimPrefix(strings.TrimPrefix(spec, "r:"), "p:"), "%return")
				if r.code != 2 || r.stdout != "" || !regexp.MustCompile(`^probe: `+regexp.QuoteMeta(sym)+`\+0x0/0x[0-9a-f]+: no return probe on `+regexp.QuoteMeta(sym)+`: not entered by a call: [^\n]+\n$`).MatchString(r.stderr) {
					t.Errorf("%s: want exit 2 and one line saying why, got %v", spec, r)
				}
			}
			trace := filepath.Join(t.TempDir(), "trace")
			r := probe(t, "run", "-o", trace, "p:f.cold", "p:f", "--", exe)
			if r.code != 0 || r.stdout != want.stdout {
				t.Fatalf("p:f.cold: want exit 0 and %q, got %v", want.stdout, r)
			}
			if n := countByName(eventsIn(t, trace)); n["p_f_cold_0"] != 8 || n["p_f_0"] != 50 {
				t.Errorf("p:f.cold and p:f fired %d and %d times, want 8 and 50", n["p_f_cold_0"], n["p_f_0"])
			}
			r = probe(t, "list", exe)
			for _, line := range strings.Split(r.stdout, "\n") {
				fields := strings.Fields(line)
				if len(fields) < 4 {
					continue
				}
				marked := strings.Contains(line, "no-return-hook")
				if want := fields[3] == "f.cold" || fields[3] == "_start"; marked != want {
					t.Errorf("probe list: %q: no-return-hook %v, want %v", line, marked, want)
				}
			}
		})
	}
}

// TestColdLandingPads: g++ -O2 puts a function's exception landing pads in
// its .cold part, which the unwinder enters: function_graph over a C++
// program that throws through traced frames leaves those parts out and
// the program prints what it prints untraced.
func TestColdLandingPads(t *testing.T) {
	exe := filepath.Join(t.TempDir(), "exc_O2")
	if err := build(binDir, "g++", "-O2", "-g", "-Wall", "-o", exe, filepath.Join(repoRoot, "integration", "testdata", "tracers", "exc.cpp")); err != nil {
		t.Fatal(err)
	}
	out, _ := exec.Command("nm", "-C", exe).Output()
	if !strings.Contains(string(out), "[clone .cold]") {
		t.Fatalf("nm -C %s: no .cold part: g++ no longer splits them, the test proves nothing", exe)
	}
	want := runCmd(t, nil, exe, "20") // its exit status is part of what it says
	for _, tracer := range []string{"function_graph", "function"} {
		trace := filepath.Join(t.TempDir(), "trace")
		r := probe(t, "run", "--tracer", tracer, "-o", trace, "--", exe, "20")
		b, _ := os.ReadFile(trace)
		if r.code != want.code || r.stdout != want.stdout {
			t.Errorf("--tracer %s: want exit %d and %q, got %v", tracer, want.code, want.stdout, r)
		}
		if !strings.Contains(string(b)+r.stderr, ".cold (not entered by a call: a cold part of another function, jumped to)") {
			t.Errorf("--tracer %s: the .cold parts are not said to be left out:\n%s%s", tracer, limit(string(b)), r.stderr)
		}
	}
}
