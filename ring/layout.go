package ring

import "fmt"

// The rings' layout in memory: what the code generated into the tracee
// (codegen's record routine, stubs and return hooks) and this
// package's reader agree on. The rings live in memory shared with the
// tracer (tracee.MapShared), at Layout.Base in the tracee:
//
//	page 0:      NoSlotOff (hits of threads that found no ring free),
//	             NoTidOff (hits where the thread id could not be read),
//	             the table of readable memory (codegen's memory reads)
//	then the tid table (TidTableOff): the ring each thread was given
//	then Slots rings from FirstRingOff, HeaderSize + RingSize bytes apart:
//	  OwnerOff   the thread id that claimed it (lock cmpxchg from 0); the
//	             tracer frees it when the thread is gone
//	  LostOff    records dropped because the ring was full
//	  WaitedOff  TSC ticks the thread waited for room, less the start
//	             of a wait under way (then it is negative: the drain
//	             wakes the thread when it frees room)
//	  HeadOff    bytes reserved so far (the producer's, a cache line alone)
//	  TailOff    bytes drained so far (the tracer's, a cache line alone)
//	  ShadowTopOff, ShadowOff: the thread's shadow stack of hooked
//	             returns (see codegen.HookRoutine)
//	  TallyOff   TallyWords counters that tallying stubs add to
//	             (codegen's tallies): counts kept in the tracee, no record
//	  data       RingSize bytes from HeaderSize
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
// NoTidOff and not recorded.

// Offsets from the rings' base: the counters and tables of page 0, the
// tid table, and where the first ring starts.
const (
	NoSlotOff = 0
	NoTidOff  = 8
	PidOff    = 16 // the process's id, for the stubs' process_vm_readv
	// TidTableOff: TidMax 16-bit entries, one per thread id: the ring
	// the thread was given, + 1 (0: none yet). It is a hint, checked
	// against the ring's owner: a thread gone and its ring given to
	// another leaves its entry stale. Only the pages of ids in use are
	// ever touched.
	TidTableOff  = 4096
	FirstRingOff = TidTableOff + TidMax*2 // the first ring

	// The readable memory of the process, as the tracer last saw it, for
	// the stubs' reads (codegen's memory reads): a generation, odd while
	// the tracer writes the table; the TSC when it last looked (it
	// lives) and how old that may be; the count of ranges and the
	// ranges, start and end, sorted.
	MapGenOff     = 24
	MapBeatOff    = 32
	MapBeatMaxOff = 40
	MapCountOff   = 48

	// Waiting for room (the record routine's full path): WaitMaxOff,
	// 0 while full rings drop their records, else how many TSC ticks
	// old AliveOff (the tracer's last sign of life, written by a
	// goroutine of its own) may be for a thread to wait; a thread waits
	// on its ring's TailOff with futex, at most WaitTimeoutOff (a
	// struct timespec) at a time.
	WaitMaxOff     = 56
	AliveOff       = 64
	WaitTimeoutOff = 80

	MapsOff = 96
	MapsMax = (TidTableOff - MapsOff) / 16
)

// Offsets from a ring's start: its header, then its data at HeaderSize.
const (
	OwnerOff     = 0
	LostOff      = 8
	WaitedOff    = 16
	HeadOff      = 64
	TailOff      = 128
	ShadowTopOff = 192 // the shadow stack's generation << 32 | depth
	ShadowOff    = 4096
	TallyOff     = ShadowOff + ShadowFrames*ShadowFrameSize
	HeaderSize   = TallyOff + TallyWords*8
)

const (
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

// UnhookedBit marks a frame whose original return address was put back
// in its slot for an unwinder to read (the tracer sets it): the frame is
// live, its return is not hooked.
const UnhookedBit = 1 << 63

// Layout is where the rings are and how they are cut.
type Layout struct {
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
func (l Layout) Stride() uint64 { return HeaderSize + l.RingSize }

// Size is the bytes the rings take in all.
func (l Layout) Size() uint64 { return FirstRingOff + uint64(l.Slots)*l.Stride() }

// Check reports whether the layout can be coded: the ring sizes fit the
// routine's 32-bit immediates.
func (l Layout) Check() error {
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
