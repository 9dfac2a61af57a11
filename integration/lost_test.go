package integration

import (
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestLostReturnsFollowed: with -f, the calls a followed child never
// returns from (spawn and main, around its _exit) are counted in the
// final note with the parent's: before, the note counted the parent's
// alone (no note at all here, where the parent loses none), while the
// children's lost calls were closed in the trace.
func TestLostReturnsFollowed(t *testing.T) {
	t.Parallel()
	exe := builtOnce(t, "forkexit", filepath.Join("testdata", "lost", "forkexit.c"), "-O2", "-g", "-Wall")
	const n = 3
	for _, extra := range [][]string{nil, {"--no-inprocess"}} {
		flags := append([]string{"-f", "--tracer", "function_graph", "--filter", "main,spawn,work"}, extra...)
		tf, _ := runTraced(t, flags, exe, fmt.Sprint(n))
		if closed := closedLost(t, tf); closed != 2*n {
			t.Errorf("%q: %d calls closed as lost, want %d (spawn and main in each child)", extra, closed, 2*n)
		}
		tf.wantNotes(t, 2*n, false)
	}
}

// TestReturnsNotRecorded: deeprec's 4.4 million calls all return, and a
// ring of 64 KiB drops most of their records; calls whose return record
// was among them are not reported as calls that never returned (before,
// 23-92 a run were, as if a longjmp had skipped them) but as returns not
// recorded, next to the count of events the rings dropped. A stop at
// every call loses none.
func TestReturnsNotRecorded(t *testing.T) {
	t.Parallel()
	exe := builtOnce(t, "deeprec", filepath.Join("testdata", "lost", "deeprec.c"), "-O2", "-g", "-Wall")
	base := runCmd(t, nil, exe)
	out := filepath.Join(t.TempDir(), "trace")
	r := probe(t, "run", "-v", "--drop", "--ring-size", "64", "-o", out, "--tracer", "function_graph", "--filter", "rec,leaf", "--", exe)
	if r.code != 0 || r.stdout != base.stdout || !strings.Contains(r.stderr, "function tracer: 2 functions in-process") {
		t.Fatalf("probe run: want exit 0, %q, in-process; got %v", base.stdout, r)
	}
	tf := readTrace(t, out)
	closed := closedLost(t, tf)
	var dropped, unrecorded bool
	for _, n := range tf.notes {
		switch {
		case strings.HasSuffix(n, lostText):
			t.Errorf("calls that all return counted as never returning: # %s", n)
		case regexp.MustCompile(`^\d+ events lost in the tracee, rings full \(tid \d+: \d+; --no-drop, --ring-size\)$`).MatchString(n):
			dropped = true
		case regexp.MustCompile(`^\d+ returns not recorded \(calls in threads whose ring was full at times: their returns were most likely among the events lost; --ring-size\)$`).MatchString(n):
			unrecorded = true
		}
	}
	if !dropped || closed > 0 && !unrecorded {
		t.Errorf("%d calls closed as lost; notes %q: want the events the ring dropped and, for those calls, returns not recorded", closed, tf.notes)
	}
	t.Logf("%d calls closed as lost; notes %q", closed, tf.notes)
}

// closedLost counts the calls a function_graph trace closes as lost.
func closedLost(t *testing.T, tf traceFile) int {
	n := 0
	for _, g := range parseGraph(t, tf.section(t, "function_graph")) {
		if g.kind == gLost {
			n++
		}
	}
	return n
}
