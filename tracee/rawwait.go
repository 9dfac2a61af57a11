package tracee

import (
	"runtime"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

// A wait that sleeps is made raw, as ptrace requests are, when it is safe.
// Through the runtime (entersyscall/exitsyscall) it costs ~3.4 µs more a hit
// on the 2-CPU VMs this was measured on: the runtime's sysmon keeps waking
// (about ten times as often), and each of our threads it wakes on the
// tracee's CPU can push the tracee to the other CPU, where every round trip
// is a slow cross-CPU wake-up.
//
// A raw wait holds our P, and a stop-the-world (GC, stack scans) waits
// for every P. The runtime asks a running goroutine for its P with SIGURG,
// re-sent every 100 µs until it gets it; the runtime's handler has
// SA_RESTART, which would restart our wait4 in the kernel until the tracee
// next stops (never, for an idle server). So the handler's SA_RESTART is
// cleared (only goroutines running Go code or raw system calls are sent
// SIGURG; blocking calls through the runtime are not, and the standard
// library retries EINTR anyway), and an interrupted raw wait yields and
// goes on through the runtime: a quiet tracee then costs no more wake-ups.
// With one P there is no one else to run the rest of us, so no raw waits.

const saRestart = 0x10000000 // SA_RESTART

var rawWaitsOnce sync.Once

// setUpRawWaits clears SA_RESTART from the runtime's SIGURG handler.
func setUpRawWaits() {
	rawWaitsOnce.Do(func() {
		sa, ok := sigaction(unix.SIGURG)
		if !ok || sa.flags&saRestart == 0 {
			return
		}
		sa.flags &^= saRestart
		setSigaction(unix.SIGURG, &sa)
	})
}

// rawWaitsSafe reports whether SIGURG interrupts a raw wait now. It is
// checked at each wait that sleeps (a few percent of hits): signal.Notify of
// SIGURG by a program using this package would re-install the handler.
func rawWaitsSafe() bool {
	if runtime.GOMAXPROCS(0) < 2 {
		return false
	}
	sa, ok := sigaction(unix.SIGURG)
	return ok && sa.handler > 1 && sa.flags&saRestart == 0
}

// waitSleeping is wait4(-1) for a stop that is not there yet.
func waitSleeping(ws *unix.WaitStatus) (int, error) {
	if rawWaitsSafe() {
		r, _, e := unix.RawSyscall6(unix.SYS_WAIT4, ^uintptr(0), uintptr(unsafe.Pointer(ws)), unix.WALL|unix.WNOTHREAD, 0, 0, 0)
		if e != unix.EINTR {
			if e != 0 {
				return 0, e
			}
			return int(r), nil
		}
		// The runtime wants our P, or sysmon found us "running" for
		// 10 ms: the tracee is quiet. Let it have the P, then sleep
		// where it can take it without asking.
		runtime.Gosched()
	}
	return unix.Wait4(-1, ws, unix.WALL|unix.WNOTHREAD, nil)
}

// waitRetrying is a blocking wait4 for one process or thread. SIGURG no
// longer restarts system calls (see setUpRawWaits), so EINTR is retried.
func waitRetrying(pid int, ws *unix.WaitStatus, options int) (int, error) {
	for {
		tid, err := unix.Wait4(pid, ws, options, nil)
		if err != unix.EINTR {
			return tid, err
		}
	}
}
