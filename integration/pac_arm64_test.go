//go:build arm64

package integration

import (
	"encoding/binary"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Pointer authentication (arm64): code built with
// -mbranch-protection=standard signs its return address with paciasp at
// the entry and checks it with autiasp before its ret. The return hook
// replaces x30 before paciasp runs, so the trampoline is what gets
// signed; a detach puts back the original return address signed as the
// trampoline was (probe/retaddr_arm64.go). On a core without pointer
// authentication (cortex-a72) paciasp and autiasp are nops, and the same
// test runs the unsigned way.

func pacCoroBin(t *testing.T) string {
	t.Helper()
	return builtOnce(t, "coro_pac", filepath.Join("testdata", "tracers", "coro.c"), pacFlags...)
}

// TestPointerAuthReturns: coro built with pointer authentication, its
// coroutines' returns hooked, all reported; a detach while each is parked
// inside a hooked call, and every one returns where it should.
func TestPointerAuthReturns(t *testing.T) {
	exe := pacCoroBin(t)
	if !signsReturn(t, exe, "step") {
		t.Fatalf("%s: step does not start with paciasp: the test proves nothing", exe)
	}
	checkCoroReturns(t, exe)
	checkCoroDetach(t, exe)
}

// signsReturn reports whether function fn of path starts with paciasp
// (after a bti, if any).
func signsReturn(t *testing.T, path, fn string) bool {
	t.Helper()
	code := fileBytes(t, path, funcSym(t, path, fn).Value, 8)
	const paciasp = 0xd503233f
	return binary.LittleEndian.Uint32(code) == paciasp || binary.LittleEndian.Uint32(code[4:]) == paciasp
}

// TestPointerAuthInProcessReturns: returns hooked in the tracee, in code
// that signs its return addresses. ret's threads compute what they do
// untraced, every call and return recorded; its longjmps' function_graph
// trace is the one a stop at every call gives; and pacret's three calls,
// parked inside with the trampoline saved signed in their frames, return
// home after a detach (the originals put back signed as it was).
func TestPointerAuthInProcessReturns(t *testing.T) {
	t.Parallel()
	ret := builtOnce(t, "ret_pac", filepath.Join("testdata", "inprocess", "ret.c"), pacRetFlags...)
	if !signsReturn(t, ret, "outer") || !signsReturn(t, ret, "dive") {
		t.Fatalf("%s: outer or dive does not start with paciasp: the test proves nothing", ret)
	}
	const threads, calls = 4, 500
	want := runCmd(t, nil, ret, "threads", fmt.Sprint(threads), fmt.Sprint(calls))
	out := filepath.Join(t.TempDir(), "trace")
	r := probe(t, "run", "-v", "-o", out, "--tracer", "function_graph", "--filter", "outer,inner", "--", ret, "threads", fmt.Sprint(threads), fmt.Sprint(calls))
	if r.code != 0 || r.stdout != want.stdout || !strings.Contains(r.stderr, "function tracer: 2 functions in-process\n") {
		t.Fatalf("threads: want exit 0, %q, both functions in-process; got %v", want.stdout, r)
	}
	graph := readFile(t, out)
	if o, i := strings.Count(graph, "outer() {"), strings.Count(graph, "inner()"); strings.Contains(graph, "lost") || o != threads*calls || i != 2*threads*calls {
		t.Fatalf("threads: %d outer() {, %d inner(), want %d and %d, none lost:\n%s", o, i, threads*calls, 2*threads*calls, limit(graph))
	}

	want = runCmd(t, nil, ret, "longjmp", "20")
	var shapes []string
	for _, flag := range []string{"-v", "--no-inprocess"} {
		r := probe(t, "run", flag, "-o", out, "--tracer", "function_graph", "--filter", "dive,outer,inner", "--", ret, "longjmp", "20")
		if r.code != 0 || r.stdout != want.stdout {
			t.Fatalf("longjmp %s: want exit 0, %q; got %v", flag, want.stdout, r)
		}
		shapes = append(shapes, graphShape(t, readTrace(t, out)))
	}
	// (At -O2 gcc makes dive's recursion a loop: one call a dive.)
	if d := strings.Count(shapes[0], "dive() {"); shapes[0] != shapes[1] || d < 20 || strings.Count(shapes[0], "dive: return lost") != d || strings.Count(shapes[0], "outer() {") != 20 {
		t.Fatalf("longjmp in-process:\n%s\nstopping:\n%s", limit(shapes[0]), limit(shapes[1]))
	}

	pac := builtOnce(t, "pacret", filepath.Join("testdata", "inprocess", "pacret.c"), pacRetFlags...)
	p := startPiped(t, nil, pac, "1000")
	p.waitStdout(t, "ready\n", 10*time.Second)
	pr := startProbe(t, "attach", "-v", "-o", out, "--tracer", "function_graph", "--filter", "level1,level2,level3", strconv.Itoa(p.pid()))
	waitStderr(t, pr, "function tracer: 3 functions in-process", 60*time.Second)
	p.in.Write([]byte("go\n"))
	p.waitStdout(t, "parked\n", 60*time.Second)
	pr.signal(t, os.Interrupt)
	if r := pr.wait(t, cmdTimeout); r.code != 0 {
		t.Fatalf("probe attach: %v", r)
	}
	if trace := readFile(t, out); !strings.Contains(trace, "# 3 calls in progress at the detach") {
		t.Fatalf("want the three parked calls in progress at the detach:\n%s", limit(trace))
	}
	p.in.Write([]byte("x\n"))
	// level1(i) is 6i + 10: 1000 calls and level1(5).
	if r := p.wait(t, cmdTimeout); r.code != 0 || r.stdout != "ready\nparked\nsum 3007040\n" {
		t.Fatalf("pacret after the detach: want exit 0 and its untraced output; got %v", r)
	}
}

// shrinkWrapBin is TestPointerAuthShrinkWrapped's C++ tracee.
func shrinkWrapBin(t *testing.T) string {
	t.Helper()
	abs, _ := filepath.Abs(filepath.Join("testdata", "tracers", "shrinkwrap.cpp"))
	return builtOnceBy(t, "shrinkwrap", func(exe string) error {
		return build(binDir, "g++", append(slices.Clone(shrinkWrapFlags), "-o", exe, abs)...)
	})
}

// TestPointerAuthShrinkWrapped: deep, built with pointer authentication
// and BTI, saves x30 only on its throwing path, 56 bytes in (gcc
// shrink-wraps it). A hooked return's original must be back where the
// CFI says before the C++ unwinder reads it; the search for that place
// stopped at 64 bytes, short of it, and every throw through a hooked
// deep ended in std::terminate, stopping or in-process (found by a
// sweep of programs built with -mbranch-protection=standard). Now the
// program prints what it does untraced, both ways.
func TestPointerAuthShrinkWrapped(t *testing.T) {
	t.Parallel()
	exe := shrinkWrapBin(t)
	sym := funcSym(t, exe, "_Z4deepil")
	code := fileBytes(t, exe, sym.Value, int(sym.Size))
	at := -1
	for off := 0; off+4 <= len(code); off += 4 {
		if binary.LittleEndian.Uint32(code[off:]) == 0xd503233f { // paciasp
			at = off
			break
		}
	}
	if at < 56 {
		t.Fatalf("%s: deep's paciasp at %d, want 56 bytes in or more: the test proves nothing", exe, at)
	}
	want := runCmd(t, nil, exe)
	for _, flag := range []string{"-v", "--no-inprocess"} {
		out := filepath.Join(t.TempDir(), "trace")
		r := probe(t, "run", flag, "-o", out, "--tracer", "function_graph", "--filter", "deep,main", "--", exe)
		if r.code != want.code || r.stdout != want.stdout {
			t.Fatalf("probe run %s: want exit %d and %q; got %v", flag, want.code, want.stdout, r)
		}
		if n := strings.Count(readFile(t, out), "deep()"); n != 3 {
			t.Errorf("%s: %d calls of deep, want 3", flag, n)
		}
	}
}

// pgPacBin is fentry.c built as pacPgBuilds says for name.
func pgPacBin(t *testing.T, name string) string {
	t.Helper()
	exe := builtOnce(t, name, filepath.Join("testdata", "fentry", "fentry.c"), fentryFlags(pacPgBuilds[name]...)...)
	for _, fn := range []string{"fib", "work"} {
		const paciasp, pacibsp = 0xd503233f, 0xd503237f
		if w := binary.LittleEndian.Uint32(fileBytes(t, exe, funcSym(t, exe, fn).Value, 4)); w != paciasp && w != pacibsp {
			t.Fatalf("%s: %s does not start with paciasp or pacibsp (%#08x): the test proves nothing", exe, fn, w)
		}
	}
	return exe
}

// TestPointerAuthPg: plain -pg functions that sign their return address
// (paciasp, pacibsp) are hooked past their bl _mcount too: the hook
// strips the saved x30 for the shadow stack and puts the trampoline in
// the frame record signed the same way (sp at the entry the modifier),
// which the function's autiasp accepts. The graph is exact, the output
// the untraced one, and gmon.out has the arcs it has untraced (hooked
// at the entry before, _mcount read the trampoline as fib's and work's
// caller).
func TestPointerAuthPg(t *testing.T) {
	t.Parallel()
	for _, name := range slices.Sorted(maps.Keys(pacPgBuilds)) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			fentryGraphs(t, pgPacBin(t, name), true, true, " (past the call of mcount: 2)")
		})
	}
}

// TestPointerAuthPgDetachUnderLoad: TestPgDetachUnderLoad with signed
// return addresses: four threads checking every result through eight
// attaches, each interrupted or killed, with calls parked everywhere,
// the trampoline saved signed in their frame records; each detach puts
// the original back signed as the function signed it, and every result
// stays right. With key A, a profiling timer's handler interrupts the
// threads anywhere (in the stubs and the hook too); with key B, in
// frames over 512 bytes.
func TestPointerAuthPgDetachUnderLoad(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		more []string
	}{
		{"fentry-pg-pac", []string{"prof"}},
		{"fentry-pg-pacb-bigframe", nil},
		{"fentry-pg-pacb", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			detachUnderLoadN(t, 8, pgPacBin(t, tc.name), gmonEnv(t.TempDir()), tc.more...)
		})
	}
}
