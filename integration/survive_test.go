package integration

import (
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// Attaches, detaches and kills of probe on a program that is busy and
// checks its own answers (issue 35): what probe leaves behind must not
// change what the program computes, however many times it comes and
// goes.

// TestDetachTailIntoStop: calls hooked in the tracee that tail-call a
// function whose return stops the thread (tailtrap's mid into spin,
// first into spin_on into then), from four threads, through attach and
// detach cycles. The tracer's hook of the stopping function kept the
// in-process trampoline as the return address; the detach put it back
// after the tracee's frames were gone, and the program died of SIGTRAP
// at the trampoline moments later (issue 35's tailstop.c: 3 of 3 at the
// first detach; redis-server under function_graph at the 2nd-5th).
func TestDetachTailIntoStop(t *testing.T) {
	t.Parallel()
	exe := builtOnce(t, "tailtrap", filepath.Join("testdata", "inprocess", "tailtrap.c"), "-O2", "-g", "-Wall")
	p := startBg(t, nil, exe, "threads", "4")
	p.waitStdout(t, "ready", 10*time.Second)
	pid := strconv.Itoa(p.pid())
	cycles := 6
	if runtime.GOARCH == "arm64" {
		cycles = 2 // an attach takes seconds under TCG
	}
	specs := [][]string{
		{"r:mid", "r:spin"},
		{"--tracer", "function_graph", "--filter", "outer,mid,spin,last,first,spin_on,then"},
		{"r:first", "r:spin_on", "r:then"},
	}
	for i := 0; i < cycles; i++ {
		args := append([]string{"attach", "--duration", "300ms", "-o", os.DevNull, pid}, specs[i%len(specs)]...)
		if r := probe(t, args...); r.code != 0 {
			t.Fatalf("cycle %d: %v: %v", i, args, r)
		}
		// The calls in flight at the detach come home now, untraced.
		time.Sleep(300 * time.Millisecond)
		if p.exited() {
			t.Fatalf("cycle %d: after %v the program ended: %v", i, args, p.res)
		}
	}
	p.signal(t, syscall.SIGTERM)
	if r := p.wait(t, 10*time.Second); r.code != 0 || r.stdout != "ready\nok\n" || r.stderr != "" {
		t.Fatalf("tailtrap threads 4: want exit 0, ready and ok; got %v", r)
	}
}
