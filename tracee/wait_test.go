package tracee

import (
	"os"
	"runtime"
	"slices"
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

// TestPauseShort: the polling waits' sleeps of tens of microseconds last
// about that, not the millisecond or more a time.Sleep under a
// millisecond takes when the runtime's timers wait in epoll (median 1.1
// ms on the project's VM; pause's 80 us).
func TestPauseShort(t *testing.T) {
	runtime.LockOSThread() // as the tracer's thread is
	defer runtime.UnlockOSThread()
	var took []time.Duration
	for range 21 {
		t0 := time.Now()
		pause(10 * time.Microsecond)
		took = append(took, time.Since(t0))
		time.Sleep(2 * time.Millisecond) // the runtime idle in between, as when a tracee runs
	}
	slices.Sort(took)
	if median := took[len(took)/2]; median > 500*time.Microsecond*timeScale {
		t.Errorf("pause(10us) took %v (median of %d), want well under a millisecond", median, len(took))
	}
}
