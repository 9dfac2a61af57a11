//go:build arm64

package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestBTIGuardedEntries: in a page the kernel guards with BTI, an
// indirect call must land on a landing pad (bti c, paciasp). A probe on
// one keeps its brk, which the architecture lets take the call (its
// exception comes before the branch target check), and -v says why; a
// jump there would fault (SIGILL). inner, with no landing pad, records in
// the tracee as elsewhere, its detour's branches direct. bti.c's text is
// guarded (smaps says bt); launched, attached and under function_graph,
// stopping and in-process, it computes what it does untraced, each call
// seen.
func TestBTIGuardedEntries(t *testing.T) {
	t.Parallel()
	if !strings.Contains(readFile(t, "/proc/cpuinfo"), " bti") {
		t.Skip("this CPU has no BTI (cortex-a72): no page is guarded")
	}
	exe := builtOnce(t, "bti", filepath.Join("testdata", "inprocess", "bti.c"), btiFlags...)
	calls := map[string]int{"leaf": 500, "twice": 200, "deep": 100, "inner": 100}
	specs := []string{"p:leaf", "p:twice", "p:deep", "p:inner", "r:inner"}
	count := func(path string) map[string]int {
		got := map[string]int{}
		for _, e := range traceEvents(readFile(t, path)) {
			got[strings.TrimPrefix(strings.TrimSuffix(e.name, "_0"), "p_")]++
		}
		return got
	}
	wantCounts := fmt.Sprint(map[string]int{"leaf": 500, "twice": 200, "deep": 100, "inner": 100, "r_inner": 100})

	// Untraced: its text guarded while it waits for its line.
	p := startWaiting(t, exe)
	text := regexp.MustCompile(`VmFlags: rd ex[a-z ]*`).FindString(readFile(t, fmt.Sprintf("/proc/%d/smaps", p.cmd.Process.Pid)))
	if !strings.Contains(text+" ", " bt ") {
		t.Fatalf("bti's text is not BTI-guarded (%q): the test proves nothing", text)
	}
	p.in.Write([]byte("x\n"))
	base := p.wait(t, cmdTimeout)
	if base.code != 0 || base.stdout == "" {
		t.Fatalf("bti untraced: %v", base)
	}

	// Launched: no thread pointer yet, so every probe stops.
	for _, engine := range [][]string{nil, {"--no-inprocess"}} {
		out := filepath.Join(t.TempDir(), "trace")
		r := runCmdStdin(t, nil, []byte("x\n"), probeBin, append(append(append([]string{"run", "-o", out}, engine...), specs...), "--", exe)...)
		if r.code != 0 || r.stdout != base.stdout {
			t.Fatalf("probe run %v: want exit 0 and the untraced %q; got %v", engine, base.stdout, r)
		}
		if got := fmt.Sprint(count(out)); got != wantCounts {
			t.Errorf("probe run %v: hits %s, want %s", engine, got, wantCounts)
		}
	}

	// Attached while it waits: inner in the tracee, the landing pads
	// stopping, each for its reason.
	attach := func(args ...string) (string, result) {
		p := startWaiting(t, exe)
		out := filepath.Join(t.TempDir(), "trace")
		pr := startBg(t, nil, probeBin, append([]string{"attach", "-v", "-o", out, fmt.Sprint(p.cmd.Process.Pid)}, args...)...)
		waitStderr(t, pr, "probe/r_inner_0: in-process\n", 60*time.Second)
		p.in.Write([]byte("x\n"))
		if r := p.wait(t, cmdTimeout); r.code != 0 || r.stdout != base.stdout {
			t.Fatalf("bti under probe attach %q: want exit 0 and %q; got %v", args, base.stdout, r)
		}
		return out, pr.wait(t, cmdTimeout)
	}
	out, r := attach(specs...)
	if r.code != 0 {
		t.Fatalf("probe attach: %v", r)
	}
	for _, fn := range []string{"leaf", "twice", "deep"} {
		if want := fmt.Sprintf("probe/p_%s_0: stops the thread (%s+0x0/", fn, fn); !strings.Contains(r.stderr, want) || !strings.Contains(r.stderr, "a landing pad in a BTI-guarded page)") {
			t.Errorf("-v does not say %s stops for its landing pad:\n%s", fn, r.stderr)
		}
	}
	if !strings.Contains(r.stderr, "probe/p_inner_0: in-process\n") {
		t.Errorf("inner does not record in the tracee:\n%s", r.stderr)
	}
	if got := fmt.Sprint(count(out)); got != wantCounts {
		t.Errorf("probe attach: hits %s, want %s", got, wantCounts)
	}

	// function_graph: attached (inner's entry and return in the tracee),
	// the same calls in the same order as launched and stopping, where
	// _start is traced too.
	column := func(path string) []string {
		var lines []string
		for _, c := range graphColumn(t, path) {
			// (Not r:inner's events, comments here.)
			if c = strings.TrimSpace(c); !strings.Contains(c, "_start") && !strings.HasPrefix(c, "/*") {
				lines = append(lines, c)
			}
		}
		return lines
	}
	graph, r := attach("--tracer", "function_graph", "r:inner")
	stopped := filepath.Join(t.TempDir(), "graph")
	if s := runCmdStdin(t, nil, []byte("x\n"), probeBin, "run", "--no-inprocess", "-o", stopped, "--tracer", "function_graph", "--", exe); r.code != 0 || s.code != 0 || s.stdout != base.stdout {
		t.Fatalf("function_graph: attached %v; launched %v", r, s)
	}
	if got, want := column(graph), column(stopped); !slices.Equal(got, want) {
		t.Errorf("function_graph attached in-process: %d lines, stopping %d; they differ:\n%s\n%s", len(got), len(want), strings.Join(got[:min(len(got), 12)], "\n"), strings.Join(want[:min(len(want), 12)], "\n"))
	}
	got := graphCalls(strings.Split(readFile(t, graph), "\n"))
	delete(got, "_start")
	if fmt.Sprint(got) != fmt.Sprint(calls) {
		t.Errorf("function_graph: calls %v, want %v", got, calls)
	}
}

// startWaiting starts bti, and returns once it waits for its line in
// read (63), its thread pointer set.
func startWaiting(t *testing.T, exe string) *piped {
	t.Helper()
	p := startPiped(t, nil, exe)
	syscall := fmt.Sprintf("/proc/%d/syscall", p.cmd.Process.Pid)
	waitFor(t, "bti's read", func() string { b, _ := os.ReadFile(syscall); return "^" + string(b) }, "^63 ")
	return p
}
