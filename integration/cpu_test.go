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
// (placement is then off: it never leaves the CPUs it may use). At a
// mailbox trap the thread itself says where it ran (the routine's lsl);
// otherwise probe reads the thread's /proc stat: each variant checks which
// path served its stops.
func TestCPUColumn(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("taskset"); err != nil {
		t.Fatalf("taskset (util-linux) is needed: %v", err)
	}
	last := strconv.Itoa(runtime.NumCPU() - 1)
	s := startSpin(t, o0pie, 2, 60*time.Second)
	pid := strconv.Itoa(s.pid())
	if r := runCmd(t, nil, "taskset", "-a", "-p", "-c", last, pid); r.code != 0 {
		t.Fatalf("taskset: %v", r)
	}
	for _, v := range []struct {
		args    []string
		mailbox bool // its stops are served from the mailbox
	}{
		{[]string{"--no-inprocess", "p:work"}, true},
		{[]string{"--no-inprocess", "r:work $retval"}, true},
		{[]string{"--no-inprocess", "--no-mailbox", "p:work"}, false},
		// In-process: the CPU is rdtscp's, in the record (of the
		// return, too).
		{[]string{"p:work"}, false},
		{[]string{"r:work $retval"}, false},
	} {
		ev := filepath.Join(t.TempDir(), "events")
		args := append([]string{"-c", "0", probeBin, "attach", "--duration", "1s", "-o", ev}, v.args[:len(v.args)-1]...)
		r := runCmd(t, []string{"PROBE_DEBUG_MAILBOX=1"}, "taskset", append(args, pid, v.args[len(v.args)-1])...)
		m := mailboxLineRE.FindStringSubmatch(r.stderr)
		if r.code != 0 || m == nil {
			t.Fatalf("probe attach %v: want exit status 0 and the mailbox line, got\n%v", v.args, r)
		}
		evs := parseEventsFile(t, ev)
		if len(evs) == 0 {
			t.Fatalf("%v: no events", v.args)
		}
		if stops, _ := strconv.Atoi(m[1]); (stops > 0) != v.mailbox {
			t.Errorf("%v: %d stops served from the mailbox (of %d events), want them from the mailbox: %v", v.args, stops, len(evs), v.mailbox)
		}
		for _, e := range evs {
			if strconv.Itoa(e.cpu) != last {
				t.Fatalf("%v: CPU %d, want %s (the tracee's) in %d events: %q", v.args, e.cpu, last, len(evs), e.line)
			}
		}
	}
}
