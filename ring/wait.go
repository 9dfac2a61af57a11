package ring

import (
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Waiting for room: a thread whose ring is full sleeps (futex on its
// ring's tail) until the drain frees room, rather than drop its record,
// while the tracer asks for it and shows it lives (WaitMaxOff,
// AliveOff). A tracer killed stops showing it, and the threads drop
// again once its last sign is older than maxAge: a tracee never waits
// for a tracer that is gone.

// waitNap is the longest a thread sleeps at a time before it looks again
// whether the tracer lives.
const waitNap = time.Millisecond

// SetWaiting makes threads wait for room, the tracer taken for gone after
// maxAge TSC ticks without a sign of life (Alive); maxAge 0 makes them
// drop their records again, and wakes those waiting.
func (r *Rings) SetWaiting(maxAge uint64) {
	atomic.StoreUint64(r.word(WaitTimeoutOff), uint64(waitNap/time.Second))
	atomic.StoreUint64(r.word(WaitTimeoutOff+8), uint64(waitNap%time.Second))
	r.Alive()
	atomic.StoreUint64(r.word(WaitMaxOff), maxAge)
	if maxAge == 0 {
		for slot := range r.layout.Slots {
			r.wake(r.ring(slot))
		}
	}
}

// Alive notes that the tracer lives, now.
func (r *Rings) Alive() { atomic.StoreUint64(r.word(AliveOff), rdtsc()) }

// wake wakes the thread of the ring at base if it waits for room: called
// after its tail moved (the thread notes its wait before its futex reads
// the tail, the drain stores the tail before it reads the note).
func (r *Rings) wake(base uint64) {
	if int64(atomic.LoadUint64(r.word(base+WaitedOff))) >= 0 {
		return
	}
	r.wakes++
	addr := unsafe.Pointer(r.word(base + TailOff))
	unix.Syscall6(unix.SYS_FUTEX, uintptr(addr), futexWake, 1<<31-1, 0, 0, 0)
}

// Waited is how many TSC ticks the threads have waited for room in all,
// those of rings freed included; a wait under way counts until now.
func (r *Rings) Waited() uint64 {
	n := r.waitedFreed
	for slot := range r.layout.Slots {
		n += r.waitedIn(r.ring(slot))
	}
	return n
}

// waitedIn is what the thread of the ring at base has waited.
func (r *Rings) waitedIn(base uint64) uint64 {
	v := int64(atomic.LoadUint64(r.word(base + WaitedOff)))
	if v < 0 {
		v += int64(rdtsc())
	}
	return uint64(max(v, 0))
}

// futexWake is FUTEX_WAKE, not private: the tracee's and our mappings
// of the rings are one memory file's.
const futexWake = 1

// Wakes is how many times the drain has woken a thread that waited for
// room: a drain that wakes one has more to do at once.
func (r *Rings) Wakes() uint64 { return r.wakes }
