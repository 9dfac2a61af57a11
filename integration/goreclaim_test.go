package integration

import (
	"os"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestGoDetachUnmaps: a Go program gets back every mapping probe made in
// it (its rings, its out-of-line pages) at each detach, as a C program
// does (TestDetachTailIntoStop). Before, a stale signal frame of Go's
// (its gsignal stacks are pieces of the heap's mappings, as the threads'
// stacks are, which the detach scanned to the mapping's top)
// interrupting our pages kept them, one session's set; now a thread's
// scan ends at its g's stack's top, and a live frame that interrupted a
// stopping probe's copy in its slot (SIGURG's, often) is moved out of it
// as a held thread is. gowork's goroutines check every result; its stops
// are a probe at main.work's entry, run out of line, and return probes.
// A frame that only the scan finds (never written: it may be stale, as
// words in a goroutine stack's unwritten part, which may have been a
// gsignal stack once; on arm64, Go's code has no CFI to unwind by) that
// interrupted our code keeps one session's set, and the next attach
// takes it back: at most in half the cycles (before: every cycle).
func TestGoDetachUnmaps(t *testing.T) {
	interrupting := regexp.MustCompile(`(?m)^probe: pid \d+: its pages stay mapped: thread \d+ has a signal frame at 0x[0-9a-f]+ interrupting 0x[0-9a-f]+$`)
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
			kept := 0
			for i := 0; i < cycles; i++ {
				args := append([]string{"attach", "--duration", "300ms", "-o", os.DevNull, pid}, tc.specs...)
				// (PROBE_DEBUG_RECLAIM: probe says why it keeps them.)
				r := probeEnv(t, []string{"PROBE_DEBUG_RECLAIM=1"}, args...)
				if r.code != 0 {
					t.Fatalf("cycle %d: %v: %v", i, args, r)
				}
				switch after := probeMappings(procMaps(t, p.pid())); {
				case after == before:
				case interrupting.MatchString(r.stderr) && strings.Count(after, "\n") <= strings.Count(before, "\n")+3 && kept < cycles/2:
					// A frame the scan of a stack found (not
					// the unwinding of its calls: stale words in
					// a stack's unwritten part, or on arm64 any)
					// that interrupted our code keeps one
					// session's pages, rightly if it is live:
					// the next attach takes them back.
					kept++
				default:
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
