package integration

import (
	"os"
	"runtime"
	"strconv"
	"testing"
	"time"
)

// TestGoDetachUnmaps: a Go program gets back every mapping probe made in
// it (its rings, its out-of-line pages) at each detach, as a C program
// does (TestDetachTailIntoStop). Before, a stale signal frame of Go's
// (its gsignal stacks are pieces of the heap's mappings, as the threads'
// stacks are, which the detach scanned to the mapping's top)
// interrupting our pages kept them, one session's set; now a thread's
// scan ends at its g's stack's top. gowork's goroutines check every
// result; its stops in -v's reasons are a probe at main.work's entry,
// run out of line, and return probes.
func TestGoDetachUnmaps(t *testing.T) {
	t.Parallel()
	cycles := 10
	if runtime.GOARCH == "arm64" {
		cycles = 3 // an attach takes seconds under TCG
	}
	for _, tc := range []struct {
		name  string
		specs []string
	}{
		{"function_graph", []string{"--tracer", "function_graph", "--filter", "main.loop,main.work"}},
		{"return", []string{"r:main.loop"}},
		{"entry", []string{"p:main.work", "r:main.work"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := startGowork(t)
			pid := strconv.Itoa(p.pid())
			before := probeMappings(procMaps(t, p.pid()))
			for i := 0; i < cycles; i++ {
				args := append([]string{"attach", "--duration", "300ms", "-o", os.DevNull, pid}, tc.specs...)
				// (PROBE_DEBUG_RECLAIM: probe says why it keeps them.)
				r := probeEnv(t, []string{"PROBE_DEBUG_RECLAIM=1"}, args...)
				if r.code != 0 {
					t.Fatalf("cycle %d: %v: %v", i, args, r)
				}
				if after := probeMappings(procMaps(t, p.pid())); after != before {
					t.Fatalf("cycle %d: after %v probe's mappings differ:\nbefore:\n%s\nafter:\n%s\nprobe said:\n%s", i, args, before, after, r.stderr)
				}
				time.Sleep(100 * time.Millisecond)
				if p.exited() {
					t.Fatalf("cycle %d: after %v the program ended: %v", i, args, p.res)
				}
			}
			stopGowork(t, p)
		})
	}
}
