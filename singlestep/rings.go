package singlestep

import "fmt"

// The rings of in-process recording (record_amd64.go), as the tracer
// (package ring) and the generated code share them. They live in memory
// shared with the tracer (tracee.MapShared):
//
//	page 0:      RingsNoSlot (hits of threads that found no ring free),
//	             RingsNoTid (hits where the thread id could not be read),
//	             the table of readable memory (memread_amd64.go)
//	then the tid table (RingsTidTable): the ring each thread was given
//	then Slots rings, RingHeaderSize + RingSize bytes apart:
//	  RingOwner  the thread id that claimed it (lock cmpxchg from 0); the
//	             tracer frees it when the thread is gone
//	  RingLost   records dropped because the ring was full
//	  RingWaited TSC ticks the thread waited for room, less the start
//	             of a wait under way (then it is negative: the drain
//	             wakes the thread when it frees room)
//	  RingHead   bytes reserved so far (the producer's, a cache line alone)
//	  RingTail   bytes drained so far (the tracer's, a cache line alone)
//	  RingShadowTop, RingShadow: the thread's shadow stack of hooked
//	             returns (see HookRoutine)
//	  RingTally  TallyWords counters that tallying stubs add to
//	             (tally_amd64.go): counts kept in the tracee, no record
//	  data       RingSize bytes from RingHeaderSize
//
// Each thread writes only its own ring, so nothing on the hot path
// writes a cache line another thread writes. A record is RecordHeader
// bytes and its values, 8 bytes each:
//
//	word 0  the commit stamp: the record's position in the ring + 1,
//	        written last; the tracer reads a record only once it is there
//	word 1  site id << 32 | cpu << 16 | length in bytes (id 0: padding
//	        to the ring's end, so that no record wraps)
//	word 2  the TSC
//
// A signal handler may run in the middle of a record and make records of
// its own: room is reserved with one cmpxchg (not locked: only the thread
// itself, through its signal handlers, competes for its ring), so each
// record has its own place, and the tracer waits at a record not yet
// committed.
//
// The thread id is read from the thread's control block (%fs base +
// TidOff: glibc's struct pthread keeps it there), not with gettid: no
// system call on the hot path. A thread with no %fs base is counted in
// RingsNoTid and not recorded.
const (
	RingsNoSlot = 0
	RingsNoTid  = 8
	RingsPid    = 16 // the process's id, for the stubs' process_vm_readv
	// RingsTidTable: TidMax 16-bit entries, one per thread id: the ring
	// the thread was given, + 1 (0: none yet). It is a hint, checked
	// against the ring's owner: a thread gone and its ring given to
	// another leaves its entry stale. Only the pages of ids in use are
	// ever touched.
	RingsTidTable = 4096
	RingsHeader   = RingsTidTable + TidMax*2 // the first ring

	// The readable memory of the process, as the tracer last saw it, for
	// the stubs' reads (memread_amd64.go): a generation, odd while the
	// tracer writes the table; the TSC when it last looked (it lives)
	// and how old that may be; the count of ranges and the ranges,
	// start and end, sorted.
	RingsMapGen     = 24
	RingsMapBeat    = 32
	RingsMapBeatMax = 40
	RingsMapCount   = 48

	// Waiting for room (the record routine's full path): RingsWaitMax,
	// 0 while full rings drop their records, else how many TSC ticks
	// old RingsAlive (the tracer's last sign of life, written by a
	// goroutine of its own) may be for a thread to wait; a thread waits
	// on its ring's RingTail with futex, at most RingsWaitTimeout (a
	// struct timespec) at a time.
	RingsWaitMax     = 56
	RingsAlive       = 64
	RingsWaitTimeout = 80

	RingsMaps    = 96
	RingsMapsMax = (RingsTidTable - RingsMaps) / 16

	RingOwner      = 0
	RingLost       = 8
	RingWaited     = 16
	RingHead       = 64
	RingTail       = 128
	RingShadowTop  = 192 // the shadow stack's generation << 32 | depth
	RingShadow     = 4096
	RingTally      = RingShadow + ShadowFrames*ShadowFrameSize
	RingHeaderSize = RingTally + TallyWords*8

	// ShadowFrames bound a thread's in-process return hooks: a call
	// deeper than that is recorded, its return not hooked.
	ShadowFrames    = 1 << 15
	ShadowFrameSize = 16 // the return-address slot, the original return address

	RecordHeader = 24
	// PadHeader is the least room a padding record takes: its stamp
	// and its length. Less room at a ring's end is skipped unmarked.
	PadHeader = 16
	// RecordMax is the longest record: its length is 16 bits.
	RecordMax = 1<<16 - 8

	// TidMax bounds thread ids: the kernel's PID_MAX_LIMIT on 64 bits.
	TidMax = 1 << 22
)

// RecordLayout is where the rings are and how they are cut.
type RecordLayout struct {
	Base     uint64 // the rings' memory in the tracee
	Slots    int    // rings, a power of two
	RingSize uint64 // data bytes of each ring, a power of two
	TidOff   int32  // where the thread id is, from the %fs base (arm64: tpidr_el0)
	// CPUOff (arm64) is where the CPU number the kernel keeps for
	// restartable sequences is, from tpidr_el0 (glibc's __rseq_offset
	// + 4: struct rseq's cpu_id); 0: not known, and the records say
	// CPU UnknownCPU. On x86-64 rdtscp reads the CPU.
	CPUOff int32
}

// UnknownCPU is a record's CPU when the code could not read it.
const UnknownCPU = 0xfff

// Stride is the distance between two rings.
func (l RecordLayout) Stride() uint64 { return RingHeaderSize + l.RingSize }

// Size is the bytes the rings take in all.
func (l RecordLayout) Size() uint64 { return RingsHeader + uint64(l.Slots)*l.Stride() }

// Check reports whether the layout can be coded: the ring sizes fit the
// routine's 32-bit immediates.
func (l RecordLayout) Check() error {
	switch {
	case l.Slots <= 0 || l.Slots&(l.Slots-1) != 0 || l.Slots > 1<<15:
		return fmt.Errorf("%d rings: not a power of two up to 32768", l.Slots)
	case l.RingSize < 4096 || l.RingSize&(l.RingSize-1) != 0 || l.RingSize > 1<<30:
		return fmt.Errorf("ring size %d: a power of two from 4 KiB to 1 GiB", l.RingSize)
	case l.Stride() > 1<<31:
		return fmt.Errorf("ring size %d: too large", l.RingSize)
	}
	return nil
}

// TallyWords is how many counters each ring has.
const TallyWords = 1 << 13
