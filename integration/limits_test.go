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

// Inputs probe reads are bounded: a command line, a sourced file, a
// script, a recording. An endless one (/dev/zero) is refused with one
// line, never held in memory, and the session or the tracee goes on.

// TestREPLInputBounds: `source /dev/zero`, an over-long line and a sourced
// file over the bound each give an error and the session goes on; probe's
// memory stays small and the tracee runs on after the detach.
func TestREPLInputBounds(t *testing.T) {
	s := startSpin(t, o0pie, 1, 60*time.Second)
	r := startREPL(t, nil, false, "attach", "--repl", strconv.Itoa(s.pid()))
	big := filepath.Join(t.TempDir(), "big")
	if err := os.WriteFile(big, []byte(strings.Repeat("list\n", 300000)), 0o600); err != nil {
		t.Fatal(err)
	}
	r.send(t, "source /dev/zero")
	r.waitFor(t, `probe: /dev/zero: larger than 1024 KiB: not a probe script\n`)
	r.send(t, "list "+strings.Repeat("x", 100<<10))
	r.waitFor(t, `probe: a command line longer than 64 KiB: skipped\n`)
	r.send(t, "source "+big)
	r.waitFor(t, regexp.QuoteMeta(big)+`: larger than 1024 KiB: not a probe script\n`)
	r.send(t, "add p:work")
	r.waitFor(t, `added p_work_0\n`)
	r.waitEvents(t, 3)
	if kib := rssKiB(r.cmd.Process.Pid); kib < 0 || kib > 100<<10 {
		t.Errorf("probe's VmRSS %d KiB, want well under 100 MiB", kib)
	}
	r.send(t, "detach")
	if code := r.wait(t); code != 0 {
		t.Fatalf("probe: exit status %d, want 0; output:\n%s", code, limit(r.text()))
	}
	checkSurvives(t, s)
}

// TestInputBoundsCLI: a script or a recording over the bounds is bad input,
// exit 2, and nothing is started.
func TestInputBoundsCLI(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"run", "--script", "/dev/zero", "--", "/bin/true"}, "probe: /dev/zero: larger than 1024 KiB: not a probe script\n"},
	} {
		r := probe(t, tc.args...)
		if r.code != 2 || r.stderr != tc.want || r.stdout != "" {
			t.Errorf("probe %q: want exit 2 and %q, got %v", tc.args, tc.want, r)
		}
	}
	// A recording whose first message claims 4 GiB.
	rec := filepath.Join(t.TempDir(), "rec")
	if err := os.WriteFile(rec, append([]byte(fmt.Sprintf("probe-trace\n%d\n", 1)), 0xfc, 0xff, 0xff, 0xff, 0xff, 0), 0o600); err != nil {
		t.Fatal(err)
	}
	r := probe(t, "report", rec)
	if r.code != 2 || !strings.Contains(r.stderr, "damaged: a message of 4294967295 bytes") {
		t.Errorf("probe report of a damaged recording: want exit 2 and the message refused, got %v", r)
	}
}
