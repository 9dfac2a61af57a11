package symbols

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// progC is the main file of the test program. It prints the runtime
// addresses of main and malloc, then waits for a byte on stdin.
const progC = `#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

int counter = 1;
int call_twin(void);

__attribute__((noinline)) static int helper(int x) { return x * 3 + counter; }
__attribute__((noinline)) int work(int x) { return helper(x) + 1; }
__attribute__((noinline)) int worker(int x) { return work(x) * 2; }
/* Same name as a global function in other.c. */
__attribute__((noinline)) static int twin(void) { return 7; }
/* Same name as a global variable in other.c. */
__attribute__((noinline)) static int dupe(void) { return 9; }

int main(int argc, char **argv) {
	printf("%p %p\n", (void *)main, (void *)malloc);
	fflush(stdout);
	char buf[1];
	if (read(0, buf, 1) < 0)
		return 1;
	return work(argc) + worker(argc) + twin() + call_twin() + dupe();
}
`

// otherC holds the global namesakes of progC's static functions.
const otherC = `int dupe = 5;
__attribute__((noinline)) int twin(void) { return 8; }
int call_twin(void) { return twin() + dupe; }
`

// needTools fails the test when a build tool is missing: .ci/run installs
// them, so a missing one is a broken machine, not a reason to pass.
func needTools(t *testing.T, tools ...string) {
	t.Helper()
	for _, tool := range tools {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s not installed (needed by this test)", tool)
		}
	}
}

func run(t *testing.T, dir, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, stderr.String())
	}
	return string(out)
}

// buildProg compiles the test program into dir/name with extra gcc flags.
func buildProg(t *testing.T, dir, name string, flags ...string) string {
	t.Helper()
	needTools(t, "gcc")
	for file, text := range map[string]string{"prog.c": progC, "other.c": otherC} {
		if err := os.WriteFile(filepath.Join(dir, file), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	out := filepath.Join(dir, name)
	args := append([]string{"-O0", "-g", "-o", out, "prog.c", "other.c"}, flags...)
	run(t, dir, "gcc", args...)
	return out
}

// nmSymbol is one line of `nm -S --defined-only`.
type nmSymbol struct {
	addr, size uint64
	hasSize    bool
	kind       byte
}

// nmSymbols maps each name defined exactly once to its nm entry.
func nmSymbols(t *testing.T, path string) map[string]nmSymbol {
	t.Helper()
	needTools(t, "nm")
	out := run(t, "", "nm", "-S", "--defined-only", path)
	syms := make(map[string]nmSymbol)
	dups := make(map[string]bool)
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		var s nmSymbol
		var name string
		var err error
		switch len(f) {
		case 3:
			s.addr, err = strconv.ParseUint(f[0], 16, 64)
			s.kind, name = f[1][0], f[2]
		case 4:
			s.addr, err = strconv.ParseUint(f[0], 16, 64)
			if err == nil {
				s.size, err = strconv.ParseUint(f[1], 16, 64)
			}
			s.hasSize, s.kind, name = true, f[2][0], f[3]
		default:
			continue
		}
		if err != nil {
			t.Fatalf("nm line %q: %v", sc.Text(), err)
		}
		if _, seen := syms[name]; seen {
			dups[name] = true
		}
		syms[name] = s
	}
	for name := range dups {
		delete(syms, name)
	}
	return syms
}

// readelfBuildID returns the build ID readelf -n reports, or "".
func readelfBuildID(t *testing.T, path string) string {
	t.Helper()
	needTools(t, "readelf")
	for _, line := range strings.Split(run(t, "", "readelf", "-n", path), "\n") {
		if _, id, ok := strings.Cut(line, "Build ID:"); ok {
			return strings.TrimSpace(id)
		}
	}
	return ""
}

// setDebugDirs points DebugDirs at dirs for the rest of the test.
func setDebugDirs(t *testing.T, dirs ...string) {
	old := DebugDirs
	DebugDirs = dirs
	t.Cleanup(func() { DebugDirs = old })
}
