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
	// A recording whose first frame claims 4 GiB.
	rec := filepath.Join(t.TempDir(), "rec")
	if err := os.WriteFile(rec, append([]byte(fmt.Sprintf("probe-trace\n%d\ni", 2)), 0xff, 0xff, 0xff, 0xff, 0x0f, 0), 0o600); err != nil {
		t.Fatal(err)
	}
	r := probe(t, "report", rec)
	if r.code != 2 || !strings.Contains(r.stderr, "damaged: a frame of 4294967295 bytes") || strings.Count(r.stderr, "\n") != 1 {
		t.Errorf("probe report of a damaged recording: want exit 2 and the frame refused in one line, got %v", r)
	}
	// A recording of another version.
	if err := os.WriteFile(rec, []byte("probe-trace\n1\n\x0cgob stream"), 0o600); err != nil {
		t.Fatal(err)
	}
	r = probe(t, "report", rec)
	if r.code != 2 || !strings.Contains(r.stderr, "format version 1 (this probe reads 2 to 4)") || strings.Count(r.stderr, "\n") != 1 {
		t.Errorf("probe report of a version 1 recording: want exit 2 and one line naming both versions, got %v", r)
	}
}

// TestCommandBadInput: the bad input of list and run is exit status 2 and
// one line, as attach's is.
func TestCommandBadInput(t *testing.T) {
	loop := bin("loop", o0pie)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"list", "/nonexist"}, "probe: open /nonexist: no such file or directory\n"},
		{[]string{"list", "/etc/passwd"}, "probe: /etc/passwd: not an ELF file\n"},
		{[]string{"list", "99999999"}, "probe: pid 99999999: no such process\n"},
		{[]string{"run", "--duration", "1s", "p:work", "--", loop, "1"}, "probe: --duration: for attach only (run traces until the program exits; Ctrl-C ends it)\n"},
		{[]string{"run", "-o", "/tmp", "p:work", "--", loop, "1"}, "probe: /tmp: is a directory\n"},
	} {
		r := probe(t, tc.args...)
		if r.code != 2 || r.stderr != tc.want || r.stdout != "" {
			t.Errorf("probe %q: want exit 2 and %q, got %v", tc.args, tc.want, r)
		}
	}
	// Reading another user's process map takes the permission tracing it
	// does: refused as attach is.
	s := startSpin(t, o0pie, 1, 60*time.Second)
	r := asNobody(t, []string{"list", strconv.Itoa(s.pid())})
	want := fmt.Sprintf("probe: pid %d: not permitted to read its memory map (%s)\n", s.pid(), permissionHint())
	if r.code != 2 || r.stderr != want {
		t.Errorf("probe list as nobody: want exit 2 and %q, got %v", want, r)
	}
}

// TestDetachKeepsSleeping: an attach that ends at once (the shortest
// --duration, and Ctrl-C right away) never cuts a sleep of the tracee's
// short: the system call it was in is restarted as the kernel would have,
// and returns as untraced, after its whole length.
func TestDetachKeepsSleeping(t *testing.T) {
	exe := builtOnce(t, "sleeper", filepath.Join("testdata", "lifecycle", "sleeper.c"), "-O2", "-pthread")
	for _, mode := range []string{"nanosleep", "clock", "poll", "futex"} {
		for _, how := range []string{"duration", "sigint"} {
			p := startBg(t, nil, exe, mode, "1500")
			p.waitStdout(t, "ready\n", 10*time.Second)
			time.Sleep(100 * time.Millisecond) // into its sleep
			args := []string{"attach", "-o", os.DevNull, strconv.Itoa(p.pid()), "p:main"}
			if how == "duration" {
				args = append([]string{"attach", "--duration", "1ms"}, args[1:]...)
				if r := probe(t, args...); r.code != 0 {
					t.Fatalf("probe %q: %v", args, r)
				}
			} else {
				pr := startProbe(t, args...)
				waitTracedBy(t, p.pid(), pr.pid(), 10*time.Second)
				pr.signal(t, os.Interrupt)
				if r := pr.wait(t, cmdTimeout); r.code != 0 {
					t.Fatalf("probe %q: %v", args, r)
				}
			}
			r := p.wait(t, cmdTimeout)
			if want := "ready\n" + mode + ": returned 0, whole sleep yes\n"; r.code != 0 || r.stdout != want {
				t.Errorf("%s, detached by %s: want %q, got %v", mode, how, want, r)
			}
		}
	}
}

// TestRunKilledTakesTracee documents run's PTRACE_O_EXITKILL: probe run
// killed by SIGKILL (no chance to detach) takes the program it started
// with it, as docs/guarantees.md says, rather than leave it to die of
// its next breakpoint.
func TestRunKilledTakesTracee(t *testing.T) {
	pr := startProbe(t, "run", "-o", os.DevNull, "p:work", "--", bin("spin", o0pie), "1", "30000")
	pr.waitStdout(t, "ready\n", 10*time.Second)
	// The child of whichever of probe's threads forked it.
	var kids []string
	tids, _ := taskIDs(pr.pid())
	for _, tid := range tids {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", pr.pid(), tid))
		kids = append(kids, strings.Fields(string(b))...)
	}
	if len(kids) != 1 {
		t.Fatalf("probe's children: %q, want spin alone", kids)
	}
	child, _ := strconv.Atoi(kids[0])
	pr.cmd.Process.Kill()
	pr.wait(t, cmdTimeout)
	deadline := time.Now().Add(10 * time.Second)
	for {
		st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", child))
		if err != nil || strings.Contains(string(st), ") Z ") {
			return // gone, or a zombie waiting for init
		}
		if time.Now().After(deadline) {
			t.Fatalf("spin (pid %d) lives on after probe run was killed: %s", child, st)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
