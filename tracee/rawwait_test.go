package tracee

import (
	"runtime"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// A raw wait on a tracee that does nothing must not hold up a
// stop-the-world: SIGURG has to interrupt it (setUpRawWaits).
func TestRawWaitLetsTheWorldStop(t *testing.T) {
	type result struct {
		ev  Event
		err error
	}
	started := make(chan *Process, 1)
	waited := make(chan result, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
		p, err := Launch([]string{"sleep", "60"}, nil, nil)
		if err != nil {
			started <- nil
			waited <- result{err: err}
			return
		}
		started <- p
		if err := p.Cont(p.Pid, 0); err != nil {
			waited <- result{err: err}
			return
		}
		for {
			ev, err := p.Wait()
			if err != nil || ev.Kind == EventExit && ev.Tid == p.Pid {
				waited <- result{ev, err}
				return
			}
			p.Cont(ev.Tid, 0)
		}
	}()
	p := <-started
	if p == nil {
		t.Fatal((<-waited).err)
	}
	defer unix.Kill(p.Pid, unix.SIGKILL)
	if runtime.GOMAXPROCS(0) >= 2 && !rawWaitsSafe() {
		t.Fatal("raw waits are off: SIGURG still has SA_RESTART")
	}
	time.Sleep(50 * time.Millisecond) // into the wait: sleep(1) makes no stop

	gc := make(chan struct{})
	go func() {
		for range 3 {
			runtime.GC()
		}
		close(gc)
	}()
	select {
	case <-gc:
	case <-time.After(20 * time.Second):
		t.Fatal("runtime.GC did not finish while the ptrace thread waited for an idle tracee")
	}

	unix.Kill(p.Pid, unix.SIGKILL)
	select {
	case r := <-waited:
		if r.err != nil || !r.ev.Status.Signaled() || r.ev.Status.Signal() != unix.SIGKILL {
			t.Fatalf("wait ended with %+v, %v; want the SIGKILL exit", r.ev, r.err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Wait did not report the tracee's death")
	}
}
