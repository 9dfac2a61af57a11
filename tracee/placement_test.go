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

// firstCPU is the lowest CPU in set.
func firstCPU(set unix.CPUSet) int {
	for cpu := 0; ; cpu++ {
		if set.IsSet(cpu) {
			return cpu
		}
	}
}

// threadCPUTime is the calling thread's user+system time.
func threadCPUTime(t *testing.T) time.Duration {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_THREAD, &ru); err != nil {
		t.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func lastCPU(set unix.CPUSet) int {
	last := -1
	for cpu := 0; cpu < 1024; cpu++ {
		if set.IsSet(cpu) {
			last = cpu
		}
	}
	return last
}

// placer returns a Placer for this process, or nil when placement is off
// because the thread may run on one CPU only: then it checks that the
// Placer does nothing.
func placer(t *testing.T) *Placer {
	p := NewPlacer(os.Getpid(), true)
	var set unix.CPUSet
	unix.SchedGetaffinity(0, &set)
	if set.Count() >= 2 {
		if p.disabled {
			t.Fatalf("placement off with %d CPUs allowed", set.Count())
		}
		return p
	}
	if !p.disabled || p.CPU() != -1 {
		t.Fatalf("placement on with one CPU allowed")
	}
	p.Hit(1, 1, true, -1)
	if p.CPU() != -1 {
		t.Fatalf("a disabled Placer placed")
	}
	return nil
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
		var all, one unix.CPUSet
		if err := unix.SchedGetaffinity(0, &all); err != nil {
			t.Fatal(err)
		}
		one.Set(firstCPU(all))
		if err := unix.SchedSetaffinity(0, &one); err != nil {
			t.Fatal(err)
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
		// The stat file stays open between calls: a move must still show.
		if other := lastCPU(all); other != firstCPU(all) {
			one.Zero()
			one.Set(other)
			if err := unix.SchedSetaffinity(0, &one); err != nil {
				t.Fatal(err)
			}
			if cpu, ok := p.threadCPU(p.self); !ok || cpu != other {
				t.Errorf("after moving to CPU %d, threadCPU = %d, %v", other, cpu, ok)
			}
		}
		p.closeStat()
		// Spin for 5 ms of this thread's CPU time by its rusage, not of
		// wall time: on a loaded machine the two differ by any amount.
		exec1, ok1 := p.threadExec(p.self)
		for start := threadCPUTime(t); threadCPUTime(t)-start < 5*time.Millisecond; {
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
	onOwnThread(t, func() {
		p := placer(t)
		if p == nil {
			return
		}
		p.stall = time.Hour // no hits here: keep the watchdog out of it
		cpu := firstCPU(p.orig)
		p.place(cpu)
		var set unix.CPUSet
		unix.SchedGetaffinity(0, &set)
		if pol := policy(t); pol != unix.SCHED_IDLE || set.Count() != 1 || !set.IsSet(cpu) || p.CPU() != cpu {
			t.Errorf("placed on %d: policy %d, affinity %d CPUs (CPU %d %v), CPU() %d", cpu, pol, set.Count(), cpu, set.IsSet(cpu), p.CPU())
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
	onOwnThread(t, func() {
		p := placer(t)
		if p == nil {
			return
		}
		p.place(firstCPU(p.orig))
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

// TestPlacerFollows: a CPU given with a hit (the mailbox's) moves us at
// once for the thread we are placed for; for another thread only as a
// CPU read from /proc would, on a slept hit at most once a millisecond, so
// that threads hitting on both CPUs do not move us at every hit.
func TestPlacerFollows(t *testing.T) {
	onOwnThread(t, func() {
		p := placer(t)
		if p == nil {
			return
		}
		p.stall = time.Hour
		first, last := firstCPU(p.orig), lastCPU(p.orig)
		const served, other = 1, 2
		now := int64(10e9)
		p.windowStart, p.window = now, placeWindow
		p.place(first)
		p.followed = served
		steps := []struct {
			tid     int
			at      int64
			slept   bool
			cpu     int
			wantCPU int
		}{
			{served, 1000, false, last, last},              // the served thread moved: follow
			{other, 2000, false, first, last},              // another thread, not slept: stay
			{other, 3000, true, first, first},              // slept, the last look long ago: it is served now
			{served, 4000, false, last, first},             // no longer the served one
			{other, 5000, false, last, last},               // the served one moved: follow
			{served, 6000, true, first, last},              // slept, but within a millisecond of the last look
			{served, 3000 + followGap, true, first, first}, // a millisecond after it
		}
		for i, s := range steps {
			p.Hit(s.tid, now+s.at, s.slept, s.cpu)
			if got := p.CPU(); got != s.wantCPU {
				t.Fatalf("step %d (thread %d on CPU %d, slept %v): pinned to %d, want %d", i, s.tid, s.cpu, s.slept, got, s.wantCPU)
			}
		}
		p.Release()
	})
}
