package integration

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestSignalDetachUnderLoad: threads that a profiling timer's handler
// interrupts every millisecond of CPU (as gprof's SIGPROF does a -pg
// build's), under function_graph recorded in the tracee, outlive attaches
// that are interrupted and killed, every result right. A handler that
// had interrupted the in-process return trampoline came back after the
// detach into it, its call frames dropped: SIGTRAP at the trampoline's
// int3 (arm64: brk) at the first detach.
func TestSignalDetachUnderLoad(t *testing.T) {
	t.Parallel()
	exe := builtOnce(t, "fentry-plain", filepath.Join("testdata", "fentry", "fentry.c"), fentryFlags()...)
	detachUnderLoad(t, exe, nil, "prof")
}

// detachUnderLoad runs exe's four checking threads (with more, its
// extra arguments) through twelve attaches with function_graph on fib
// and work, in the tracee, each interrupted after a while or killed with
// SIGKILL, then checks that the text is the file's again and that the
// threads found every result right.
func detachUnderLoad(t *testing.T, exe string, env []string, more ...string) {
	detachUnderLoadN(t, 12, exe, env, more...)
}

// detachUnderLoadN is detachUnderLoad with rounds attaches.
func detachUnderLoadN(t *testing.T, rounds int, exe string, env []string, more ...string) {
	p := startBg(t, env, exe, append([]string{"threads", "4"}, more...)...)
	p.waitStdout(t, "ready", 10*time.Second)
	pid := strconv.Itoa(p.pid())
	for i := range rounds {
		pr := startBg(t, nil, probeBin, "attach", "-v", "-o", os.DevNull, "--tracer", "function_graph", "--filter", "fib,work", pid)
		for deadline := time.Now().Add(30 * time.Second * timeScale); !strings.Contains(pr.stderr.String(), "in-process"); time.Sleep(10 * time.Millisecond) {
			if p.exited() {
				t.Fatalf("round %d: the program died: %v\nprobe said: %s", i, p.wait(t, time.Second), pr.stderr.String())
			}
			if pr.exited() || time.Now().After(deadline) {
				t.Fatalf("round %d: %s did not say in-process: %s", i, pr.desc, pr.stderr.String())
			}
		}
		time.Sleep(time.Duration(i*3) * time.Millisecond)
		sig := syscall.SIGINT
		if i%3 == 1 && i != rounds-1 { // (the last round detaches)
			sig = syscall.SIGKILL
		}
		pr.signal(t, sig)
		r := pr.wait(t, 30*time.Second)
		if sig == syscall.SIGINT && r.code != 0 {
			t.Fatalf("round %d: probe attach: %v", i, r)
		}
		if p.exited() {
			t.Fatalf("round %d (%v): the program died: %v\nprobe said: %v", i, sig, p.wait(t, time.Second), r)
		}
	}
	if patched := textPatched(p.pid()); patched != "none" {
		t.Errorf("after the last detach the text differs from the file: %s", patched)
	}
	p.signal(t, syscall.SIGTERM)
	if r := p.wait(t, 10*time.Second); r.code != 0 || r.stdout != "ready\nok\n" {
		t.Fatalf("%s: want exit 0, ready and ok; got %v", filepath.Base(exe), r)
	}
}
