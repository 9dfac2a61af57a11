package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// retLoc is the return location text expected for fn returning into
// caller: "caller+0xOFF/0xSIZE <- fn", OFF being the call's next
// instruction (any offset inside caller is accepted by the regexp).
func retLocRE(caller, fn string) *regexp.Regexp {
	return regexp.MustCompile(`^` + regexp.QuoteMeta(caller) + `\+0x[0-9a-f]+/0x[0-9a-f]+ <- ` + regexp.QuoteMeta(fn) + `$`)
}

func wantReturns(t *testing.T, evs []event, name string, n int, loc *regexp.Regexp) {
	t.Helper()
	got := 0
	for _, e := range evs {
		if e.name != name {
			continue
		}
		got++
		if !loc.MatchString(e.loc) {
			t.Errorf("%s location %q, want %v", name, e.loc, loc)
			return
		}
	}
	if got != n {
		t.Errorf("%d %s events, want %d (by name %v)", got, name, n, countByName(evs))
	}
}

// TestReturnProbe: every call of work returns through the trampoline,
// with its caller named, entry and return interleaved per thread.
func TestReturnProbe(t *testing.T) {
	t.Parallel()
	for _, v := range cVariants {
		t.Run(v.String(), func(t *testing.T) {
			t.Parallel()
			evs := traced(t, nil, []string{"p:work", "r:work"}, bin("loop", v), "500", "2")
			wantReturns(t, evs, "r_work_0", 1000, retLocRE("run_worker", "work"))
			// Per thread: p, r, p, r, ...
			last := map[int]string{}
			for _, e := range evs {
				if last[e.tid] == e.name {
					t.Fatalf("thread %d: two %s in a row", e.tid, e.name)
				}
				last[e.tid] = e.name
			}
		})
	}
	t.Run("percent-return", func(t *testing.T) {
		t.Parallel()
		evs := traced(t, nil, []string{"p:work%return"}, bin("loop", o2pie), "300")
		wantReturns(t, evs, "r_work_0", 300, retLocRE("run_worker", "work"))
	})
}

// TestReturnLongjmp: leaf() longjmps out of itself and mid() every third
// call; those frames are dropped and counted, the others return, and the
// tracee's output is as untraced.
func TestReturnLongjmp(t *testing.T) {
	t.Parallel()
	for _, v := range []variant{o0pie, o2nopie} {
		t.Run(v.String(), func(t *testing.T) {
			t.Parallel()
			ev := filepath.Join(t.TempDir(), "events")
			want := runCmd(t, nil, bin("ret", v), "300")
			r := probe(t, "run", "-o", ev, "r:mid", "r:leaf", "--", bin("ret", v), "300")
			if r.code != 0 || r.stdout != want.stdout || !strings.Contains(want.stdout, "jumps=100\n") {
				t.Fatalf("probe run: %v\nwant stdout as untraced: %q", r, want.stdout)
			}
			evs := parseEventsFile(t, ev)
			wantReturns(t, evs, "r_mid_0", 200, retLocRE("main", "mid"))
			wantReturns(t, evs, "r_leaf_0", 200, retLocRE("mid", "leaf"))
			wantComment(t, ev, "# 200 returns lost (calls that never returned: longjmp, an exception, a stack not switched back to, a thread gone)")
		})
	}
}

// TestReturnDetachLive: detach while outer() and slow() have hijacked
// return addresses on the stack; they must return to their callers.
func TestReturnDetachLive(t *testing.T) {
	// outer runs 60 calls of slow, 1.2 s, the attach 400 ms of it, each
	// longer in the guest: there an attach's install took the whole
	// 1.2 s once under a loaded host (0 entries of slow).
	calls := 60 * int(timeScale)
	p := startBg(t, nil, bin("ret", o2nopie), "0", strconv.Itoa(calls))
	p.waitStdout(t, "ready\n", 10*time.Second)
	ev := filepath.Join(t.TempDir(), "events")
	r := probe(t, "attach", "--duration", (400 * time.Millisecond * timeScale).String(), "-o", ev, strconv.Itoa(p.pid()), "r:outer", "r:slow", "p:slow")
	if r.code != 0 {
		t.Fatalf("probe attach: %v", r)
	}
	out := p.wait(t, 20*time.Second*timeScale)
	if want := fmt.Sprintf("s=0 jumps=0\nready\nouter=%d\n", calls*(calls+1)/2); out.code != 0 || out.stdout != want { // 1+2+...+calls
		t.Fatalf("tracee after detach: %v, want %q", out, want)
	}
	evs := parseEventsFile(t, ev)
	entries, returns := countByName(evs)["p_slow_0"], countByName(evs)["r_slow_0"]
	// (slow takes 20 ms: ~20 calls in the 400 ms, but under TCG on a
	// loaded host as few as 4 were.)
	if entries < 2 || returns < entries-1 || returns > entries {
		t.Errorf("%d entries and %d returns of slow: want two or more, all but the last returned", entries, returns)
	}
	if n := countByName(evs)["r_outer_0"]; n != 0 {
		t.Errorf("%d returns of outer, which was still running", n)
	}
}

// TestReturnGo: a Go function's returns are caught at its RET
// instructions while goroutine stacks grow and move under it.
func TestReturnGo(t *testing.T) {
	t.Parallel()
	evs := traced(t, nil, []string{"r:main.deep"}, gorecBin, "2000", "4")
	callers := regexp.MustCompile(`^main\.(deep|main\.func1)\+0x[0-9a-f]+/0x[0-9a-f]+ <- main\.deep$`)
	wantReturns(t, evs, "r_main_deep_0", 4*2001, callers)
}

func wantComment(t *testing.T, path, line string) {
	t.Helper()
	data := readFile(t, path)
	for _, l := range strings.Split(data, "\n") {
		if l == line {
			return
		}
	}
	t.Errorf("events file has no line %q; its comments: %q", line, comments(data))
}

func comments(data string) []string {
	var cs []string
	for _, l := range strings.Split(data, "\n") {
		if strings.HasPrefix(l, "#") {
			cs = append(cs, l)
		}
	}
	return cs
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
