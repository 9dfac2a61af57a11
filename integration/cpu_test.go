package integration

import (
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"testing"
	"time"
)

// TestCPUColumn: the CPU column is the CPU the tracee's thread stopped on,
// not the tracer's. spin's threads run on the last CPU, probe on the first
// (placement is then off: it never leaves the CPUs it may use).
func TestCPUColumn(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("taskset"); err != nil {
		t.Fatalf("taskset (util-linux) is needed: %v", err)
	}
	last := strconv.Itoa(runtime.NumCPU() - 1)
	s := startSpin(t, o0pie, 2, 30*time.Second)
	pid := strconv.Itoa(s.pid())
	if r := runCmd(t, nil, "taskset", "-a", "-p", "-c", last, pid); r.code != 0 {
		t.Fatalf("taskset: %v", r)
	}
	ev := filepath.Join(t.TempDir(), "events")
	r := runCmd(t, nil, "taskset", "-c", "0", probeBin, "attach", "--duration", "1s", "-o", ev, pid, "p:work")
	if r.code != 0 {
		t.Fatalf("probe attach: want exit status 0, got\n%v", r)
	}
	evs := parseEventsFile(t, ev)
	if len(evs) == 0 {
		t.Fatal("no events")
	}
	for _, e := range evs {
		if strconv.Itoa(e.cpu) != last {
			t.Fatalf("CPU %d, want %s (the tracee's) in %d events: %q", e.cpu, last, len(evs), e.line)
		}
	}
}
