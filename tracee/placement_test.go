package tracee

import (
	"os"
	"runtime"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// onOwnThread runs f on a fresh OS thread that is thrown away afterwards,
// so that policy and affinity changes do not leak into other tests.
func onOwnThread(t *testing.T, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		runtime.LockOSThread() // never unlocked: the thread exits with the goroutine
		defer close(done)
		f()
	}()
	<-done
}

func currentCPU() int {
	var cpu uint32
	unix.RawSyscall(unix.SYS_GETCPU, uintptr(unsafe.Pointer(&cpu)), 0, 0)
	return int(cpu)
}

func policy(t *testing.T) uint32 {
	a, err := unix.SchedGetAttr(0, 0)
	if err != nil {
		t.Fatal(err)
	}
	return a.Policy
}

// TestPlacerReadsProc: the CPU and schedstat fields come from the right
// columns, even for a thread whose name holds ") (" and spaces.
func TestPlacerReadsProc(t *testing.T) {
	onOwnThread(t, func() {
		var one unix.CPUSet
		one.Set(0)
		if err := unix.SchedSetaffinity(0, &one); err != nil {
			t.Skipf("cannot pin: %v", err) // a cpuset without CPU 0
		}
		name := []byte("a) (b c\x00")
		if err := unix.Prctl(unix.PR_SET_NAME, uintptr(unsafe.Pointer(&name[0])), 0, 0, 0); err != nil {
			t.Fatal(err)
		}
		p := &Placer{pid: os.Getpid(), self: unix.Gettid()}
		cpu, ok := p.threadCPU(p.self)
		if !ok || cpu != currentCPU() {
			t.Errorf("threadCPU = %d, %v; running on %d", cpu, ok, currentCPU())
		}
		exec1, ok1 := p.threadExec(p.self)
		for end := time.Now().Add(5 * time.Millisecond); time.Now().Before(end); {
		}
		exec2, ok2 := p.threadExec(p.self)
		if !ok1 || !ok2 || exec2-exec1 < int64(time.Millisecond) {
			t.Errorf("threadExec went from %d to %d across 5 ms of spinning", exec1, exec2)
		}
		if _, ok := selfRunDelay(p.self); !ok {
			t.Error("selfRunDelay failed")
		}
	})
}

// TestPlacerPlacesAndRestores: placing makes the thread SCHED_IDLE on one
// CPU; Release puts policy and affinity back.
func TestPlacerPlacesAndRestores(t *testing.T) {
	if runtime.NumCPU() < 2 {
		t.Skip("one CPU: placement is off")
	}
	onOwnThread(t, func() {
		p := NewPlacer(os.Getpid(), true)
		if p.disabled {
			t.Skip("placement disabled here (affinity allows one CPU)")
		}
		p.stall = time.Hour // no hits here: keep the watchdog out of it
		p.place(1)
		var set unix.CPUSet
		unix.SchedGetaffinity(0, &set)
		if pol := policy(t); pol != unix.SCHED_IDLE || set.Count() != 1 || !set.IsSet(1) || p.CPU() != 1 {
			t.Errorf("placed: policy %d, affinity %d CPUs (CPU 1 %v), CPU() %d", pol, set.Count(), set.IsSet(1), p.CPU())
		}
		p.Release()
		unix.SchedGetaffinity(0, &set)
		if pol := policy(t); pol != schedOther || set != p.orig || p.CPU() != -1 {
			t.Errorf("released: policy %d, affinity %d CPUs, CPU() %d", pol, set.Count(), p.CPU())
		}
	})
}

// TestPlacerWatchdog: placed and no hit for placeStall, the thread is put
// back as a normal one from outside, and the next decision waits before
// placing again.
func TestPlacerWatchdog(t *testing.T) {
	if runtime.NumCPU() < 2 {
		t.Skip("one CPU: placement is off")
	}
	onOwnThread(t, func() {
		p := NewPlacer(os.Getpid(), true)
		if p.disabled {
			t.Skip("placement disabled here")
		}
		p.place(0)
		deadline := time.Now().Add(2 * time.Second)
		for p.CPU() != -1 && time.Now().Before(deadline) {
			time.Sleep(5 * time.Millisecond)
		}
		if p.CPU() != -1 || policy(t) != schedOther {
			t.Fatalf("still placed %v after %v without hits", time.Duration(placeStall), 2*time.Second)
		}
		p.mu.Lock()
		stalled := p.stalled
		p.mu.Unlock()
		if !stalled {
			t.Error("the watchdog's unplacing is not noted")
		}
		now := int64(10e9)
		p.windowStart, p.hits = now-placeWindow, 1000
		p.decide(now)
		if p.CPU() != -1 || p.retryAt != now+placeBackoffMin {
			t.Errorf("after a stall: CPU() %d, retry at +%d ns", p.CPU(), p.retryAt-now)
		}
		p.Release()
	})
}
