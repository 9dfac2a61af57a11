package tracee

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// Placer keeps the ptrace thread on the CPU of the tracee thread it serves
// most, which makes a hit cost what it costs when tracer and tracee share a
// CPU (measured: ~12 us against ~60 us across CPUs, on a 2-vCPU VM where
// every cross-CPU wake-up of an idle vCPU is expensive).
//
// Pinning is not enough: the kernel wakes a resumed tracee on an idle CPU
// in preference to the busy one its tracer runs on. A CPU whose only
// runnable task is SCHED_IDLE counts as idle for that choice
// (select_idle_sibling's sched_idle_cpu), so while placed the ptrace
// thread runs as SCHED_IDLE: PTRACE_CONT puts the tracee on our CPU and
// it preempts us at once; its next trap hands the CPU straight back.
//
// SCHED_IDLE loses to any other task on the CPU, so placement is a bet that
// the CPU is otherwise free. It is checked every window: if the time we
// sat runnable (schedstat run_delay) is well beyond what the tracee thread
// itself ran, someone else holds the CPU and we go back to a normal,
// unpinned thread for a back-off period. Placement is only tried while
// hits come fast; for rare hits it buys nothing.
//
// A watchdog goroutine covers the case the check cannot: while placed, if
// no hit has been handled for placeStall (the tracee went quiet, or we
// cannot get the CPU at all), it puts the ptrace thread back as a normal
// thread from outside.
//
// Hit, CPU and Release must be called from the ptrace thread, which the
// Placer changes.
type Placer struct {
	pid, self int
	orig      unix.CPUSet // our affinity before placement
	disabled  bool

	mu      sync.Mutex // placed and cpu, shared with the watchdog
	placed  bool
	stalled bool // the watchdog unplaced us
	cpu     int  // the CPU we are pinned to, when placed
	seen    atomic.Int64
	stall   time.Duration // no hits this long and the watchdog unplaces
	stop    chan struct{} // ends the watchdog

	hits        int
	hot         int // the thread that hit last
	hotCPU      int // the CPU it said it stopped on, or -1
	windowStart int64
	window      int64 // length of the current window
	watched     int   // the thread whose run time the window measures
	startExec   int64 // its run time at the window's start
	startDelay  int64 // our run_delay at the window's start
	lastFollow  int64
	backoff     int64
	retryAt     int64

	followed int         // the thread whose CPU we were last pinned to
	statFds  map[int]int // open stat files, by thread (see threadCPU)
	statBuf  [1024]byte
}

const (
	placeFirstWindow = 10e6  // ns: the first look at the hit rate comes soon
	placeWindow      = 100e6 // ns between checks
	placeMinRate     = 1000  // hits per second worth placing for
	placeStall       = 20e6  // ns without a hit after which the watchdog unplaces
	followEvery      = 1024  // hits between checks of the tracee's CPU
	followGap        = 1e6   // ns: at most one check per this, when slept
	placeBackoffMin  = 500e6
	placeBackoffMax  = 16e9
)

// NewPlacer prepares placement of the calling thread near pid's threads.
// With enabled false, or a single CPU, it does nothing.
func NewPlacer(pid int, enabled bool) *Placer {
	p := &Placer{pid: pid, self: unix.Gettid(), cpu: -1, backoff: placeBackoffMin, disabled: !enabled, window: placeFirstWindow, stall: placeStall}
	if err := unix.SchedGetaffinity(0, &p.orig); err != nil || p.orig.Count() < 2 {
		p.disabled = true // nowhere else to go
	}
	return p
}

// CPU returns the CPU the ptrace thread is pinned to (and the served
// thread runs on), or -1 when not placed.
func (p *Placer) CPU() int {
	if p == nil || p.disabled {
		return -1
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.placed {
		return -1
	}
	return p.cpu
}

// Hit notes a probe hit by tid at now (CLOCK_MONOTONIC ns); slept says
// whether we had to sleep for it, and cpu is the CPU it stopped on when the
// thread said so itself (a mailbox trap), else -1. Once a window it
// re-decides where we run.
func (p *Placer) Hit(tid int, now int64, slept bool, cpu int) {
	if p == nil || p.disabled {
		return
	}
	p.seen.Add(1)
	p.hits++
	p.hot, p.hotCPU = tid, cpu
	if p.windowStart == 0 {
		p.startWindow(now)
		return
	}
	if now-p.windowStart >= p.window {
		p.decide(now)
		return
	}
	// The tracee thread does not stay put: a wake-up sends it to the
	// other CPU whenever ours has any other task queued (a runtime
	// thread, one that just slept), and once apart every wake-up keeps
	// it apart. When the thread we are placed for says where it stopped,
	// follow it at once: that costs nothing to check. Otherwise having
	// to sleep for the stop is the sign we are apart (or the tracee
	// slept), so look where the thread is then, at most once a
	// millisecond: a read of its stat, and with several threads hitting
	// on both CPUs, following each would only move us back and forth.
	switch {
	case cpu >= 0 && tid == p.followed:
		p.follow(tid, cpu)
	case slept && now-p.lastFollow >= followGap || p.hits%followEvery == 0:
		p.lastFollow = now
		p.follow(tid, cpu)
	}
}

// where is the CPU tid stopped on: said, the CPU it gave itself, or if
// that is -1 the one its stat shows.
func (p *Placer) where(tid, said int) (int, bool) {
	if said >= 0 {
		return said, true
	}
	return p.threadCPU(tid)
}

// follow pins us to the CPU tid stopped on (said, or -1: see where), if
// we are placed.
func (p *Placer) follow(tid, said int) {
	cpu, ok := p.where(tid, said)
	if !ok {
		return
	}
	p.mu.Lock()
	if p.placed && cpu != p.cpu {
		p.pin(cpu)
	}
	if p.placed && p.cpu == cpu {
		p.followed = tid
	}
	p.mu.Unlock()
}

func (p *Placer) startWindow(now int64) {
	p.windowStart, p.hits, p.watched = now, 0, p.hot
	p.startExec, _ = p.threadExec(p.hot)
	p.startDelay, _ = selfRunDelay(p.self)
}

func (p *Placer) decide(now int64) {
	elapsed := now - p.windowStart
	fast := int64(p.hits)*1e9/elapsed >= placeMinRate
	p.mu.Lock()
	placed, stalled := p.placed, p.stalled
	p.stalled = false
	p.mu.Unlock()
	p.window = placeWindow
	switch {
	case placed && p.starved(elapsed):
		// Another task holds the CPU (a starved thread also sees
		// few hits: this comes before the rate check).
		p.unplace()
		p.retryAt = now + p.backoff
		p.backoff = min(p.backoff*2, placeBackoffMax)
	case stalled:
		// No hit for a while: the tracee went quiet, or we could not
		// run at all. Try again later, without growing the back-off
		// (quiet spells are common).
		p.retryAt = now + placeBackoffMin
	case placed && !fast:
		p.unplace()
	case placed:
		p.follow(p.hot, p.hotCPU)
	case fast && now >= p.retryAt:
		if cpu, ok := p.where(p.hot, p.hotCPU); ok {
			p.place(cpu)
			p.followed = p.hot
			p.window = placeFirstWindow // a bad bet shows soon
		}
	}
	p.startWindow(now)
}

// starved reports whether, in the window just ended, we sat runnable for
// well beyond the time the watched tracee thread ran: on our CPU, only
// that thread should run ahead of us.
func (p *Placer) starved(elapsed int64) bool {
	exec, ok1 := p.threadExec(p.watched)
	delay, ok2 := selfRunDelay(p.self)
	return ok1 && ok2 && delay-p.startDelay > (exec-p.startExec)*3/2+elapsed/10
}

func (p *Placer) place(cpu int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := setPolicy(p.self, unix.SCHED_IDLE); err != nil {
		p.disabled = true
		return
	}
	p.placed = true
	p.pin(cpu)
	p.stop = make(chan struct{})
	go p.watch(p.stop)
}

// pin moves the ptrace thread to cpu; p.mu is held.
func (p *Placer) pin(cpu int) {
	if !p.orig.IsSet(cpu) {
		return
	}
	var set unix.CPUSet
	set.Set(cpu)
	if unix.SchedSetaffinity(p.self, &set) == nil {
		p.cpu = cpu
	}
}

func (p *Placer) unplace() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.unplaceLocked()
}

func (p *Placer) unplaceLocked() {
	if !p.placed {
		return
	}
	setPolicy(p.self, schedOther)
	unix.SchedSetaffinity(p.self, &p.orig)
	p.placed, p.cpu = false, -1
	close(p.stop)
}

// watch unplaces the ptrace thread when it has handled no hit for
// placeStall. A SCHED_IDLE thread behind a busy task may not run for a long
// time; a normal one gets its share at once, or moves to an idle CPU.
func (p *Placer) watch(stop chan struct{}) {
	tick := time.NewTicker(p.stall)
	defer tick.Stop()
	last := p.seen.Load()
	for {
		select {
		case <-stop:
			return
		case <-tick.C:
		}
		n := p.seen.Load()
		if n != last {
			last = n
			continue
		}
		p.mu.Lock()
		select {
		case <-stop: // unplaced meanwhile
		default:
			p.unplaceLocked()
			p.stalled = true
		}
		p.mu.Unlock()
		return
	}
}

// Release puts the ptrace thread back as it was: before a detach, which
// must not wait behind other tasks.
func (p *Placer) Release() {
	if p == nil {
		return
	}
	p.closeStat()
	if p.disabled {
		return
	}
	p.unplace()
	p.disabled = true
}

const schedOther = 0 // SCHED_OTHER (SCHED_NORMAL)

func setPolicy(tid int, policy uint32) error {
	attr := unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: policy}
	return unix.SchedSetAttr(tid, &attr, 0)
}

// CPUOf returns the CPU thread tid stopped on, or -1. While placed, the
// thread we follow, if we did not have to sleep for its stop, preempted us
// on our CPU: that needs no read.
func (p *Placer) CPUOf(tid int, slept bool) int {
	if p == nil {
		return -1
	}
	if !slept && tid == p.followed {
		if cpu := p.CPU(); cpu >= 0 {
			return cpu
		}
	}
	if cpu, ok := p.threadCPU(tid); ok {
		return cpu
	}
	return -1
}

// maxStatFiles bounds the stat files threadCPU keeps open.
const maxStatFiles = 64

// threadCPU is the CPU tid last ran on (field 39 of its stat). It is read
// at hits while not placed, and often while following, so each thread's
// stat file stays open and is re-read with one pread into a fixed buffer.
func (p *Placer) threadCPU(tid int) (int, bool) {
	fd, ok := p.statFds[tid]
	if !ok {
		if len(p.statFds) >= maxStatFiles {
			p.closeStat()
		}
		var err error
		fd, err = unix.Open(fmt.Sprintf("/proc/%d/task/%d/stat", p.pid, tid), unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			return 0, false
		}
		if p.statFds == nil {
			p.statFds = make(map[int]int)
		}
		p.statFds[tid] = fd
	}
	n, err := unix.Pread(fd, p.statBuf[:], 0)
	if err != nil || n <= 0 {
		unix.Close(fd) // the thread is gone
		delete(p.statFds, tid)
		return 0, false
	}
	return statCPU(p.statBuf[:n])
}

// Forget closes the stat file of a thread that has exited.
func (p *Placer) Forget(tid int) {
	if p == nil {
		return
	}
	if fd, ok := p.statFds[tid]; ok {
		unix.Close(fd)
		delete(p.statFds, tid)
	}
}

func (p *Placer) closeStat() {
	for tid, fd := range p.statFds {
		unix.Close(fd)
		delete(p.statFds, tid)
	}
}

// statCPU parses the processor field out of a /proc stat line.
func statCPU(b []byte) (int, bool) {
	// The command name (field 2) may hold spaces: count from its ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, false
	}
	const processor = 39 - 3 // fields after the name start at field 3
	field := 0
	for j := i + 1; j < len(b); {
		for j < len(b) && b[j] == ' ' {
			j++
		}
		k := j
		for k < len(b) && b[k] != ' ' && b[k] != '\n' {
			k++
		}
		if k == j {
			break
		}
		if field == processor {
			cpu := 0
			for _, c := range b[j:k] {
				if c < '0' || c > '9' {
					return 0, false
				}
				cpu = cpu*10 + int(c-'0')
			}
			return cpu, true
		}
		field++
		j = k
	}
	return 0, false
}

// threadExec is the time tid has run, in ns.
func (p *Placer) threadExec(tid int) (int64, bool) {
	return schedstat(fmt.Sprintf("/proc/%d/task/%d/schedstat", p.pid, tid), 0)
}

// selfRunDelay is the time our thread has spent runnable but not running.
func selfRunDelay(self int) (int64, bool) {
	return schedstat(fmt.Sprintf("/proc/self/task/%d/schedstat", self), 1)
}

// schedstat reads field i of a schedstat file: run time, run delay (ns),
// time slices.
func schedstat(file string, i int) (int64, bool) {
	b, err := os.ReadFile(file)
	if err != nil {
		return 0, false
	}
	fields := bytes.Fields(b)
	if len(fields) <= i {
		return 0, false
	}
	v, err := strconv.ParseInt(string(fields[i]), 10, 64)
	return v, err == nil
}
