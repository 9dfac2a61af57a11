package integration

import (
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"testing"
)

// The mailbox (probe/mailbox.go): at a jump-optimised C entry and on the
// return trampoline a thread leaves its registers in memory shared with
// probe, which serves the hit without reading them by ptrace.
// PROBE_DEBUG_MAILBOX makes probe say how many stops it served so, so
// that each test proves which path ran.

// mailboxBin builds testdata/mailbox/mailbox.c with opt, once per run.
func mailboxBin(t *testing.T, opt string) string {
	t.Helper()
	return builtOnce(t, "mailbox"+opt, filepath.Join("testdata", "mailbox", "mailbox.c"), opt, "-g", "-Wall", "-pthread")
}

var mailboxLineRE = regexp.MustCompile(`^probe: (\d+) stops served from the mailbox\n$`)

var mailboxSpecs = []string{"p:leaf a=%di b=%si", "r:leaf $retval"}

// runMailbox traces mailbox ARGS... with mailboxSpecs and returns the
// calls it made, the events, and the stops served from the mailbox.
// inProcess in runMailbox's flags: the probes as they are by default,
// in-process, where no stop is served from the mailbox.
const inProcess = "(in-process)"

func runMailbox(t *testing.T, exe string, flags []string, args ...string) (calls int, evs []event, stops int) {
	t.Helper()
	out := filepath.Join(t.TempDir(), "trace")
	if !slices.Contains(flags, inProcess) {
		flags = append([]string{"--no-inprocess"}, flags...) // the mailbox serves stops
	} else {
		flags = slices.DeleteFunc(slices.Clone(flags), func(s string) bool { return s == inProcess })
	}
	cmd := append(append(append([]string{"run", "-o", out}, flags...), mailboxSpecs...), "--", exe)
	r := probeEnv(t, []string{"PROBE_DEBUG_MAILBOX=1"}, append(cmd, args...)...)
	m := mailboxLineRE.FindStringSubmatch(r.stderr)
	var bad int
	if n, err := fmt.Sscanf(r.stdout, "calls=%d bad=%d\n", &calls, &bad); r.code != 0 || m == nil || err != nil || n != 2 || bad != 0 {
		t.Fatalf("probe %v: %v\nwant exit 0, \"calls=N bad=0\" and the mailbox line", flags, r)
	}
	stops, _ = strconv.Atoi(m[1])
	return calls, eventsIn(t, out), stops
}

// checkLeafPairs checks that every call of leaf was seen at entry and at
// return, per thread and properly nested (a signal handler's call inside
// another), and that each return value is 3a+b of its entry's arguments:
// the registers the mailbox handed over were the thread's.
func checkLeafPairs(t *testing.T, evs []event, calls int) {
	t.Helper()
	if n := countByName(evs); n["p_leaf_0"] != calls || n["r_leaf_0"] != calls {
		t.Fatalf("%d entries and %d returns, want %d each", n["p_leaf_0"], n["r_leaf_0"], calls)
	}
	open := map[int][]uint64{}
	for _, e := range evs {
		var a, b, ret uint64
		switch e.name {
		case "p_leaf_0":
			if _, err := fmt.Sscanf(e.rest, " a=%v b=%v", &a, &b); err != nil {
				t.Fatalf("%q: %v", e.line, err)
			}
			open[e.tid] = append(open[e.tid], 3*a+b)
		case "r_leaf_0":
			if _, err := fmt.Sscanf(e.rest, " arg1=%v", &ret); err != nil {
				t.Fatalf("%q: %v", e.line, err)
			}
			st := open[e.tid]
			if len(st) == 0 {
				t.Fatalf("a return with no entry: %q", e.line)
			}
			if want := st[len(st)-1]; ret != want {
				t.Fatalf("%q: want the return value %#x", e.line, want)
			}
			open[e.tid] = st[:len(st)-1]
		}
	}
	for tid, st := range open {
		if len(st) != 0 {
			t.Errorf("thread %d: %d calls never returned", tid, len(st))
		}
	}
}

// TestMailboxThreads: 300 threads alive at once call an entry- and
// return-probed function; their thread ids span more than the mailbox's
// 256 slots, so some share one and take the ordinary path when it is
// taken. Every call is seen once at entry and once at return with its
// own arguments and result, as with --no-mailbox, where no stop is
// served from the mailbox.
func TestMailboxThreads(t *testing.T) {
	for _, opt := range []string{"-O0", "-O2"} {
		t.Run(opt, func(t *testing.T) {
			t.Parallel()
			exe := mailboxBin(t, opt)
			for _, flags := range [][]string{nil, {"--no-mailbox"}, {inProcess}} {
				calls, evs, stops := runMailbox(t, exe, flags, "threads", "300", "20")
				if calls != 300*20 {
					t.Fatalf("%v: mailbox made %d calls, want %d", flags, calls, 300*20)
				}
				checkLeafPairs(t, evs, calls)
				t.Logf("%v: %d of %d stops served from the mailbox", flags, stops, 2*calls)
				if flags == nil && (stops == 0 || stops > 2*calls) {
					t.Errorf("%d stops served from the mailbox, want some and at most %d", stops, 2*calls)
				}
				if flags != nil && stops != 0 {
					t.Errorf("%v: %d stops served from the mailbox, want 0", flags, stops)
				}
			}
		})
	}
}

// TestMailboxSignals: SIGALRM every 200 us, whose handler calls the probed
// function too, lands while threads hold their slot: before their trap,
// and after it (a signal that arrived during the stop is taken on
// resume). The handler's calls go the ordinary way and the interrupted
// one finishes from its slot: every call is seen exactly once, properly
// nested, with its own arguments and result.
func TestMailboxSignals(t *testing.T) {
	for _, opt := range []string{"-O0", "-O2"} {
		t.Run(opt, func(t *testing.T) {
			t.Parallel()
			calls, evs, stops := runMailbox(t, mailboxBin(t, opt), nil, "signals", "3000")
			checkLeafPairs(t, evs, calls)
			t.Logf("%d calls, %d of whose %d stops were served from the mailbox", calls, stops, 2*calls)
			if calls <= 3000 || stops == 0 {
				t.Errorf("%d calls (want the handler's too, more than 3000), %d stops served from the mailbox (want some)", calls, stops)
			}
			// In-process: the handler's calls land in the middle of the
			// record and hook code, never a stop.
			calls, evs, stops = runMailbox(t, mailboxBin(t, opt), []string{inProcess}, "signals", "3000")
			checkLeafPairs(t, evs, calls)
			if calls <= 3000 || stops != 0 {
				t.Errorf("in-process: %d calls (want the handler's too, more than 3000), %d stops served from the mailbox (want 0)", calls, stops)
			}
		})
	}
}
