package tracee

import (
	"os"
	"runtime"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestWaitServesEveryThread: threads that stop again as soon as they are
// let go are all served. The kernel's wait4(-1) reports the newest such
// thread every time; unfair, the last statuses would all be one thread's.
func TestWaitServesEveryThread(t *testing.T) {
	bin := testProgram(t, "trapspin")
	runtime.LockOSThread() // for the test's life: this thread is the tracer
	p, err := Launch([]string{bin}, nil, []*os.File{os.Stdin, os.Stdout, os.Stderr})
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Kill(p.Pid, unix.SIGKILL)
	stuck := time.AfterFunc(60*time.Second*timeScale, func() { unix.Kill(p.Pid, unix.SIGKILL) })
	defer stuck.Stop()
	if err := p.Cont(p.Pid, 0); err != nil {
		t.Fatal(err)
	}
	var traps []int
	for len(traps) < 200 {
		ev, err := p.WaitAny()
		if err != nil || ev.Kind == EventExit {
			t.Fatalf("after %d traps: %+v, %v", len(traps), ev, err)
		}
		sig := 0
		switch {
		case ev.Kind == EventTrap:
			traps = append(traps, ev.Tid)
			// Time for every thread let go to stop again.
			time.Sleep(time.Millisecond)
		case ev.Kind == EventSignal && ev.Sig != int(unix.SIGSTOP):
			sig = ev.Sig
		}
		if err := p.Cont(ev.Tid, sig); err != nil {
			t.Fatal(err)
		}
	}
	// By the last 100 every thread has long been started.
	seen := map[int]int{}
	for _, tid := range traps[100:] {
		seen[tid]++
	}
	if len(seen) != 4 {
		t.Errorf("the last 100 stops came from %d threads (%v), want all 4", len(seen), seen)
	}
	for tid, n := range seen {
		if n < 100/4/2 {
			t.Errorf("thread %d: %d of the last 100 stops, want about 25 of them (%v)", tid, n, seen)
		}
	}
}
