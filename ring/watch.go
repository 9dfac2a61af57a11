package ring

import (
	"runtime"
	"sync"
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

// watchLists keeps every robust list given to the kernel alive and in
// place for good: the kernel holds their addresses, and reads them when
// the thread exits, whenever that is; a goroutine's stack would move, or
// be freed, under it.
var (
	watchMu    sync.Mutex
	watchLists []*watchList
)

type watchList struct {
	head, empty robustListHead
	entry       robustList
}

// Watch starts the thread that owns the rings' tracer word; stop ends it,
// the word cleared first.
func (r *Rings) Watch() (stop func()) {
	word := r.word(singlestep.RingsTracer)
	l := new(watchList)
	l.head.list.next = uintptr(unsafe.Pointer(&l.entry))
	l.entry.next = uintptr(unsafe.Pointer(&l.head.list)) // the list is a ring back to its head
	l.head.futexOffset = int64(uintptr(unsafe.Pointer(word)) - uintptr(unsafe.Pointer(&l.entry)))
	l.empty.list.next = uintptr(unsafe.Pointer(&l.empty.list))
	watchMu.Lock()
	watchLists = append(watchLists, l)
	watchMu.Unlock()
	done, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
		defer close(stopped)
		atomic.StoreUint64(word, uint64(unix.Gettid()))
		setRobustList(&l.head)
		<-done
		atomic.StoreUint64(word, 0)
		setRobustList(&l.empty)
	}()
	return func() {
		close(done)
		<-stopped
	}
}

func setRobustList(h *robustListHead) {
	unix.RawSyscall(unix.SYS_SET_ROBUST_LIST, uintptr(unsafe.Pointer(h)), unsafe.Sizeof(*h), 0)
}
