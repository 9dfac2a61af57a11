package integration

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
)

// A thread that switches stacks (probe/stackswitch.go): three swapcontext
// coroutines of testdata/tracers/coro.c each have a traced call in
// progress while the others run. Every call comes back through the
// trampoline to its own stack: none is taken for abandoned, and only the
// coroutines' bodies, which never return, are lost.

func coroBin(t *testing.T, v variant) string {
	t.Helper()
	return builtOnce(t, "coro_"+v.String(), filepath.Join("testdata", "tracers", "coro.c"), v.flags()...)
}

const coroRounds = 10

func TestCoroutineReturns(t *testing.T) {
	for _, v := range []variant{o0pie, o2nopie} {
		t.Run(v.String(), func(t *testing.T) {
			checkCoroReturns(t, coroBin(t, v))
		})
	}
}

// checkCoroReturns runs coro exe under return probes and function_graph:
// every return reported, none lost but the bodies', output as untraced.
func checkCoroReturns(t *testing.T, exe string) {
	t.Helper()
	want := runCmd(t, nil, exe, strconv.Itoa(coroRounds))
	if want.code != 0 {
		t.Fatalf("coro untraced: %v", want)
	}
	dir := t.TempDir()
	trace := filepath.Join(dir, "r.txt")
	r := probe(t, "run", "-o", trace, "r:step $retval", "r:work", "--", exe, strconv.Itoa(coroRounds))
	if r.code != 0 || r.stdout != want.stdout {
		t.Fatalf("return probes: want exit 0 and %q, got %v", want.stdout, r)
	}
	b, _ := os.ReadFile(trace)
	if n := countByName(eventsIn(t, trace)); n["r_step_0"] != 3*coroRounds || n["r_work_0"] != 6*coroRounds {
		t.Errorf("returns of step and work: %d and %d, want %d and %d", n["r_step_0"], n["r_work_0"], 3*coroRounds, 6*coroRounds)
	}
	if strings.Contains(string(b), "returns lost") {
		t.Errorf("returns reported lost:\n%s", limit(string(b)))
	}
	js := filepath.Join(dir, "g.json")
	r = probe(t, "run", "--tracer", "function_graph", "--format", "json", "-o", js, "--", exe, strconv.Itoa(coroRounds))
	if r.code != 0 || r.stdout != want.stdout {
		t.Fatalf("function_graph: want exit 0 and %q, got %v", want.stdout, r)
	}
	got := map[string]map[string]int{"func_entry": {}, "func_exit": {}, "func_lost": {}}
	for _, e := range readJSONLines(t, js) {
		if got[e.Event] != nil && e.Func != "round_robin" { // inlined at -O2 only
			got[e.Event][e.Func]++
		}
	}
	calls := map[string]int{"main": 1, "body": 3, "step": 3 * coroRounds, "work": 6 * coroRounds}
	returns := maps.Clone(calls)
	delete(returns, "body") // switches to main for good
	if !maps.Equal(got["func_entry"], calls) || !maps.Equal(got["func_exit"], returns) || !maps.Equal(got["func_lost"], map[string]int{"body": 3}) {
		t.Errorf("function_graph: entries %v, exits %v, lost %v; want %v, %v, and the 3 bodies lost", got["func_entry"], got["func_exit"], got["func_lost"], calls, returns)
	}
}

// TestCoroutineDetach: detach while each coroutine is parked inside a call
// whose return address is hooked, on a stack the thread is not on: every
// one is put back, and when the program later resumes them they return
// where they should.
func TestCoroutineDetach(t *testing.T) {
	checkCoroDetach(t, coroBin(t, o2nopie))
}

// checkCoroDetach detaches from coro exe while its coroutines are parked
// inside hooked calls, and checks that it finishes as untraced.
func checkCoroDetach(t *testing.T, exe string) {
	t.Helper()
	want := runCmd(t, nil, exe, strconv.Itoa(coroRounds))
	for _, args := range [][]string{{"--tracer", "function_graph"}, {"r:step"}} {
		p := startPiped(t, nil, exe, strconv.Itoa(coroRounds), "wait")
		p.waitStdout(t, "ready\n", 10*time.Second)
		a := []string{"attach", "-o", os.DevNull}
		if args[0] == "--tracer" {
			a = append(append(a, args...), strconv.Itoa(p.pid()))
		} else {
			a = append(append(a, strconv.Itoa(p.pid())), args...)
		}
		pr := startProbe(t, a...)
		waitTracedBy(t, p.pid(), pr.pid(), 10*time.Second)
		p.in.Write([]byte("go\n"))
		p.waitStdout(t, "parked\n", 10*time.Second)
		pr.signal(t, os.Interrupt)
		if r := pr.wait(t, cmdTimeout); r.code != 0 {
			t.Fatalf("probe %v: %v", a, r)
		}
		p.in.Close()
		r := p.wait(t, cmdTimeout)
		if r.code != 0 || r.stdout != "ready\nparked\n"+want.stdout {
			t.Errorf("probe %v: after the detach coro should finish as untraced (%q), got %v", a, want.stdout, r)
		}
	}
}

// TestCoroutineSwapReturns is issue 35's coroutines (testdata/tracers/
// coroswap.c): each yields by a tail call into swapcontext, which saves
// the hooked return address (the trampoline) in its context, and calls
// of the three at the same depth share nothing but their offsets in
// stacks 64 KiB apart, in the heap, low in memory and above the main
// stack. No hooked return may send a coroutine anywhere but where its own
// call returns: the sums as untraced, run after run, in-process and not;
// every return of step reported with step's own result, i*(id+1), the
// entry before it; only the three last yields (never resumed) lost.
// Built so that the program does not import swapcontext (hidden), step's
// returns are hooked in the tracee and yield_to_main's by the tracer (its
// tail call stops the thread); with notail both in the tracee, whose
// shadow stack gives back the returns of a coroutine it leaves: then
// most yields are lost, but none goes astray.
func TestCoroutineSwapReturns(t *testing.T) {
	t.Parallel()
	const want = "499500 999000 1498500\n"
	builds := []struct {
		name  string
		flags []string
	}{{"imported", nil}, {"hidden", []string{"-DHIDDEN"}}, {"notail", []string{"-DHIDDEN", "-DNOTAIL"}}}
	wheres := []string{"heap", "low", "high"}
	if runtime.GOARCH == "arm64" {
		wheres = wheres[:1] // each run takes seconds under TCG
	}
	// Every build first: the guest's fixtures are built before any runs.
	exes := make([]string, len(builds))
	for i, build := range builds {
		exes[i] = builtOnce(t, "coroswap_"+build.name, filepath.Join("testdata", "tracers", "coroswap.c"), append(o2pie.flags(), build.flags...)...)
	}
	for bi, build := range builds {
		exe := exes[bi]
		for _, where := range wheres {
			if r := runCmd(t, nil, exe, where); r.code != 0 || r.stdout != want {
				t.Fatalf("coroswap %s untraced: want %q, got %v", where, want, r)
			}
			for _, mode := range [][]string{nil, {"--no-inprocess"}} {
				if runtime.GOARCH == "arm64" && build.name != "imported" && mode == nil {
					// Not yet on arm64: with swapcontext not
					// imported, returns are hooked in the tracee,
					// which drops a parked coroutine's frame as
					// dead and cannot give its return address back
					// (it does not know where the function saved
					// x30): the coroutine's return finds no frame
					// and the program is killed (docs/guarantees.md, Not
					// promised).
					continue
				}
				name := build.name + "/" + where + "/inprocess"
				if mode != nil {
					name = build.name + "/" + where + "/no-inprocess"
				}
				// Every yield's return is seen but where the
				// tracee hooks it.
				exact := build.name != "notail" || mode != nil
				t.Run(name, func(t *testing.T) {
					checkCoroSwap(t, exe, where, mode, want, exact)
				})
			}
		}
	}
}

// checkCoroSwap runs coroswap once under return probes and once under
// function_graph, with the probe options mode: every return of step
// reported with its own result, and with exact, every yield's but the
// last three's.
func checkCoroSwap(t *testing.T, exe, where string, mode []string, want string, exact bool) {
	t.Helper()
	dir := t.TempDir()
	trace := filepath.Join(dir, "r.txt")
	args := append(append([]string{"run", "-o", trace}, mode...), "p:step id=%di:s32 i=%si:s64", "r:step $retval:s64", "r:yield_to_main", "--", exe, where)
	if r := probe(t, args...); r.code != 0 || r.stdout != want {
		t.Fatalf("probe %v: want exit 0 and %q, got %v", args, want, r)
	}
	var id, i int64 = -1, -1
	n := map[string]int{}
	for _, e := range eventsIn(t, trace) {
		n[e.name]++
		switch e.name {
		case "p_step_0":
			if _, err := fmt.Sscanf(e.rest, " id=%d i=%d", &id, &i); err != nil {
				t.Fatalf("entry of step: %q", e.line)
			}
		case "r_step_0":
			// step is a leaf: its return comes right after its entry.
			var got int64
			if _, err := fmt.Sscanf(e.rest, " arg1=%d", &got); err != nil || e.retFunc != "step" || id < 0 || got != i*(id+1) {
				t.Fatalf("return of step(%d, %d) should be %d: %q", id, i, i*(id+1), e.line)
			}
			id = -1
		}
	}
	b, _ := os.ReadFile(trace)
	if n["p_step_0"] != 3000 || n["r_step_0"] != 3000 || exact && (n["r_yield_to_main_0"] != 2997 || !strings.Contains(string(b), "\n# 3 returns lost")) {
		t.Errorf("%v: want 3000 entries and returns of step, 2997 returns of yield_to_main and 3 lost, got %v:\n%s", mode, n, limit(string(b)))
	}
	js := filepath.Join(dir, "g.json")
	args = append(append([]string{"run", "--tracer", "function_graph", "--format", "json", "-o", js}, mode...), "--", exe, where)
	if r := probe(t, args...); r.code != 0 || r.stdout != want {
		t.Fatalf("probe %v: want exit 0 and %q, got %v", args, want, r)
	}
	got := map[string]map[string]int{"func_entry": {}, "func_exit": {}, "func_lost": {}}
	for _, e := range readJSONLines(t, js) {
		if got[e.Event] != nil && (e.Func == "step" || e.Func == "yield_to_main") {
			got[e.Event][e.Func]++
		}
	}
	if !exact {
		got["func_exit"]["yield_to_main"] += got["func_lost"]["yield_to_main"] - 3
		got["func_lost"]["yield_to_main"] = 3
	}
	if w := map[string]int{"step": 3000, "yield_to_main": 3000}; !maps.Equal(got["func_entry"], w) ||
		!maps.Equal(got["func_exit"], map[string]int{"step": 3000, "yield_to_main": 2997}) || !maps.Equal(got["func_lost"], map[string]int{"yield_to_main": 3}) {
		t.Errorf("function_graph %v: entries %v, exits %v, lost %v; want every call of step and yield_to_main returned but the last 3 yields", mode, got["func_entry"], got["func_exit"], got["func_lost"])
	}
}
