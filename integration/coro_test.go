package integration

import (
	"maps"
	"os"
	"path/filepath"
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
