package integration

import (
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A program's own SIGTRAP state (tracee/trapstate.go, probe/trapstate.go):
// the kernel forces an int3's SIGTRAP, resetting the SIGTRAP action to
// SIG_DFL and unblocking SIGTRAP in the thread wherever it is blocked or
// ignored. testdata/mailbox/trapstate.c checks its mask and action after
// calls of the probed work(), and that a raised SIGTRAP does what it set:
// traced, it must print what it prints untraced.

func trapstateBin(t *testing.T, opt string) string {
	t.Helper()
	return builtOnce(t, "trapstate"+opt, filepath.Join("testdata", "mailbox", "trapstate.c"), opt, "-g", "-Wall", "-pthread")
}

// trapstateTracing are the ways of tracing work() the tests go through:
// entry and return probes (whose returns come back through the mailbox
// too), function_graph, and an entry probe that records in the tracee.
var trapstateTracing = []struct {
	flags, specs []string
	mailbox      bool // its hits stop the thread, served from the mailbox
}{
	{[]string{"--no-inprocess"}, []string{"p:work x=%di"}, true},
	{[]string{"--no-inprocess"}, []string{"p:work", "r:work $retval"}, true},
	{[]string{"--no-inprocess", "--tracer", "function_graph", "--filter", "work"}, nil, true},
	// In-process: no trap at all, nothing of SIGTRAP touched.
	{nil, []string{"p:work x=%di"}, false},
	{nil, []string{"p:work", "r:work $retval"}, false},
	{[]string{"--tracer", "function_graph", "--filter", "work"}, nil, false},
}

// TestTrapStateRun: four threads that block SIGTRAP (with a handler of
// the program's, or none), that ignore it, and a SIGTRAP handler that
// itself calls work(): every call is a hit served from the mailbox, and
// the program prints what it prints untraced, exit status 0 (it checks
// itself: before, a handler reset to SIG_DFL killed it at its next
// SIGTRAP, and masks lost SIGTRAP).
func TestTrapStateRun(t *testing.T) {
	for _, opt := range []string{"-O0", "-O2"} {
		t.Run(opt, func(t *testing.T) {
			t.Parallel()
			exe := trapstateBin(t, opt)
			for _, args := range [][]string{
				{"handler", "4", "500"}, {"default", "4", "500"}, {"ignored", "4", "500"}, {"in-handler", "20"},
			} {
				want := runCmd(t, nil, exe, args...)
				if want.code != 0 {
					t.Fatalf("trapstate %v untraced: %v", args, want)
				}
				for _, tracing := range trapstateTracing {
					cmd := append(append(append([]string{"run", "-o", os.DevNull}, tracing.flags...), tracing.specs...), "--", exe)
					r := probeEnv(t, []string{"PROBE_DEBUG_MAILBOX=1"}, append(cmd, args...)...)
					if r.code != 0 || r.stdout != want.stdout {
						t.Errorf("probe %v -- trapstate %v: want exit 0 and stdout\n%s\ngot %v", tracing, args, want.stdout, r)
						continue
					}
					if stops := mailboxStops(t, r); (stops > 0) != tracing.mailbox {
						t.Errorf("probe %v -- trapstate %v: %d stops served from the mailbox, want some: %v\n%v", tracing, args, stops, tracing.mailbox, r)
					}
				}
			}
		})
	}
}

// TestTrapStateAttach: threads that block or ignore SIGTRAP call work() in
// a loop while probe attaches and detaches (SIGINT at a random moment,
// three times, threads caught anywhere: inside the mailbox code with
// SIGTRAP unblocked for its trap too); afterwards each checks its mask
// and the action, now read in every mode, and raises SIGTRAP. Detach
// gives back every mask and, for a program that ignores SIGTRAP, SIG_IGN,
// which the traps reset while attached.
func TestTrapStateAttach(t *testing.T) {
	rng := rand.New(rand.NewSource(logSeed(t)))
	exe := trapstateBin(t, "-O2")
	for _, mode := range []string{"handler", "default", "ignored"} {
		t.Run(mode, func(t *testing.T) {
			p := startPiped(t, nil, exe, "loop", mode, "4")
			p.waitStdout(t, "ready\n", 10*time.Second)
			for round := 0; round < 3; round++ {
				tracing := trapstateTracing[round%len(trapstateTracing)]
				args := append(append(append([]string{"attach", "-v", "-o", os.DevNull}, tracing.flags...), fmt.Sprint(p.pid())), tracing.specs...)
				pr := startBg(t, []string{"PROBE_DEBUG_MAILBOX=1"}, probeBin, args...)
				// From -v's first line (the probes in: a loaded machine
				// may take longer than the pause to attach).
				waitStderr(t, pr, "probe: ", cmdTimeout)
				time.Sleep(time.Duration(100+rng.Intn(300)) * time.Millisecond)
				pr.signal(t, os.Interrupt)
				r := pr.wait(t, cmdTimeout)
				if r.code != 0 || (mailboxStops(t, r) > 0) != tracing.mailbox {
					t.Fatalf("probe %v: want exit 0 and stops served from the mailbox, got %v", args, r)
				}
				if p.exited() {
					t.Fatalf("trapstate died under probe %v: %v", args, p.res)
				}
			}
			p.in.Close()
			r := p.wait(t, cmdTimeout)
			want := fmt.Sprintf("ready\n%s: threads=4 handled=%d action=%s failures=0\n", mode, map[string]int{"handler": 4}[mode], mode)
			if r.code != 0 || r.stdout != want {
				t.Errorf("trapstate loop %s after the detaches: want exit 0 and\n%s\ngot %v", mode, want, r)
			}
		})
	}
}

// mailboxStops reads the PROBE_DEBUG_MAILBOX line of a probe run.
func mailboxStops(t *testing.T, r result) int {
	t.Helper()
	for _, line := range strings.SplitAfter(r.stderr, "\n") {
		if m := mailboxLineRE.FindStringSubmatch(line); m != nil {
			var n int
			fmt.Sscan(m[1], &n)
			return n
		}
	}
	t.Fatalf("no mailbox line in probe's stderr:\n%v", r)
	return 0
}
