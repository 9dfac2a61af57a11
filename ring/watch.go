package ring

import (
	"runtime"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/probedbg/probe/singlestep"
)

// The tracer's death, told to the stubs at once: a thread of ours, kept
// for the purpose, owns the word at RingsTracer as a robust futex (its
// thread id there, the word on its robust list). When the thread dies,
// with the whole of probe, by any signal, SIGKILL too, the kernel sets
// FUTEX_OWNER_DIED in the word (exit_robust_list): a stub that sees it
// copies memory by system call only, for no tracer is left to send its
// faults on. Before the rings are released, the thread empties its list
// (the kernel must not write into memory we give back) and ends.

// robustList and robustListHead are the kernel's struct robust_list and
// struct robust_list_head.
type robustList struct{ next uintptr }

type robustListHead struct {
	list          robustList
	futexOffset   int64
	listOpPending uintptr
}

// Watch starts the thread that owns the rings' tracer word; stop ends it,
// the word cleared first.
func (r *Rings) Watch() (stop func()) {
	word := r.word(singlestep.RingsTracer)
	done, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with us
		defer close(stopped)
		var head robustListHead
		var entry robustList
		head.list.next = uintptr(unsafe.Pointer(&entry))
		entry.next = uintptr(unsafe.Pointer(&head.list)) // the list is a ring back to its head
		head.futexOffset = int64(uintptr(unsafe.Pointer(word)) - uintptr(unsafe.Pointer(&entry)))
		atomic.StoreUint64(word, uint64(unix.Gettid()))
		setRobustList(&head)
		<-done
		atomic.StoreUint64(word, 0)
		var empty robustListHead
		empty.list.next = uintptr(unsafe.Pointer(&empty.list))
		setRobustList(&empty)
		runtime.KeepAlive(&head)
		runtime.KeepAlive(&entry)
	}()
	return func() {
		close(done)
		<-stopped
	}
}

func setRobustList(h *robustListHead) {
	unix.RawSyscall(unix.SYS_SET_ROBUST_LIST, uintptr(unsafe.Pointer(h)), unsafe.Sizeof(*h), 0)
}
