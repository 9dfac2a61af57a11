package codegen

import (
	"fmt"
	"slices"

	"github.com/probedbg/probe/ring"
)

// In-process recording on arm64: the x86-64 design (record_amd64.go)
// in arm64 code. A probe at a jump-optimised C entry, whose handler
// needs only registers and the words at sp, is a `b` to its stub, which
// saves what the routine uses, calls it (bl), copies the values into the
// record and commits it with a store-release, so the tracer, reading
// from its own mapping on another CPU, sees the values before the
// stamp. The routine finds the thread's ring by the thread id in its
// control block (tpidr_el0 + TidOff), reserves room with a
// load-exclusive/store-exclusive pair (a signal handler of the thread
// that runs in between makes the store fail, and the reservation is
// made again), and stamps the record with the generic timer's virtual
// count (cntvct_el0, readable at EL0 on Linux; an isb first, so that
// the read is not taken ahead of the reservation) and the CPU from the
// thread's rseq area, where the C library registered one.
//
// Neither routine nor stub changes NZCV: every test is a cbz, cbnz or
// tbnz, so the flags need no saving. Returns are hooked as on x86-64
// (inreturn_arm64.go), memory read by system call (memread_arm64.go),
// hits counted and filtered (tally_arm64.go, filter_arm64.go).

// The routine takes x9 = site id << 32 | record length and returns in
// x10 the record's address (0: not recorded, and counted), in x11 its
// commit stamp, with the header's words 1 and 2 written, and in x12 the
// thread's ring (0: none). It uses x13-x17 and x30 too; the stub saves
// x0-x18 (its reads' system calls take x0-x5 and x8) and x30, from its
// sp up, in that order.
var rsSaved = []uint32{0, 1, 2, 3, 4, 5, 6, 7, 8, x9, x10, x11, x12, x13, x14, x15, x16, x17, 18, xLR}

const rsArea = 160 // the save area: 20 registers, sp kept 16-byte aligned

// rsLR is x30's place in the save area.
var rsLR = uint64(8 * slices.Index(rsSaved, xLR))

// The code of a RecordRoutine, from its start: the hook routine, the
// return trampoline, its brk (the way out when no frame of its thread's
// returns), the tally routine's one word, then the record routine. All
// but the last are the same length whatever the layout, so they are at
// the same offsets in every copy.
type routineOffsets struct{ hook, trampoline, trampRet, trap, tally, record int }

var routineAt = func() routineOffsets {
	var o routineOffsets
	(&RecordRoutine{Layout: ring.Layout{Slots: 1, RingSize: 4096}}).gen(&a64{}, &o)
	return o
}()

// Size is the length of the routine's code: its constants are the
// layout's, so it is the same wherever a copy goes.
func (r *RecordRoutine) Size() int {
	a := &a64{}
	r.gen(a, nil)
	return 4 * len(a.w)
}

// Code returns the routine's bytes for placement at at.
func (r *RecordRoutine) Code(at uint64) ([]byte, error) {
	if err := r.Layout.Check(); err != nil {
		return nil, err
	}
	a := &a64{at: at}
	r.gen(a, nil)
	return a.bytes(), a.err
}

// HookRoutine is where the hook routine of a copy placed at at starts.
func HookRoutine(at uint64) uint64 { return at + 4*uint64(routineAt.hook) }

// HookFrameRoutine is where the hook routine of a copy placed at at
// starts for a stub with FrameEntry: the key in x13, the slot [x29, #8],
// in x0 how the word there is signed (0: not; 1, 2: key A, B), and if it
// is, in x1 the word stripped.
func HookFrameRoutine(at uint64) uint64 { return at }

// Trampoline is where the return trampoline of a copy placed at at
// starts.
func Trampoline(at uint64) uint64 { return at + 4*uint64(routineAt.trampoline) }

// TrampolineTrap is the brk of a copy placed at at.
func TrampolineTrap(at uint64) uint64 { return at + 4*uint64(routineAt.trap) }

// recordEntry is where the record routine of a copy placed at at starts.
func recordEntry(at uint64) uint64 { return at + 4*uint64(routineAt.record) }

// gen appends the routine's code, noting where its parts start in o if
// not nil.
func (r *RecordRoutine) gen(a *a64, o *routineOffsets) {
	var konsts []int // the movs of the trampoline's address
	var offs routineOffsets
	konsts = append(konsts, r.hook(a, &offs))
	offs.trampoline = len(a.w)
	call, ks := r.trampoline(a, &offs)
	konsts = append(konsts, ks...)
	offs.tally = len(a.w)
	a.mov(x9, 0) // no record: the search alone
	offs.record = len(a.w)
	a.land(call)
	r.record(a)
	tramp := r.Trampoline
	if tramp == 0 {
		tramp = a.at + 4*uint64(offs.trampoline)
	}
	for _, i := range konsts {
		a.setMov64(i, tramp)
	}
	if o != nil {
		*o = offs
	}
}

// atomicInc appends the increment of the word at x13, whole against
// other threads and the thread's own signal handlers. It uses x14, x16.
func (a *a64) atomicInc() {
	again := len(a.w)
	a.ldxr(x14, x13)
	a.addImm(x14, x14, 1)
	a.stxr(x16, x14, x13)
	a.branch(brCBNZW, x16, 0, again)
}

// record appends the record routine.
func (r *RecordRoutine) record(a *a64) {
	l := r.Layout
	slotBits := log2(uint64(l.Slots))
	ringAt := func(idx, to uint32) { // x[to]: ring w[idx] modulo Slots; x15 the first ring, x16 the stride
		a.andLow(x13, idx, slotBits)
		a.madd(to, x13, x16, x15)
	}
	tableEntry := func(idx uint32) { // x14: the tid table, x[idx]: the thread's entry's index
		a.andLow(idx, x11, log2(ring.TidMax))
		a.mov(x14, l.Base+ring.TidTableOff)
	}
	miss := func(counter uint64) { // counts a hit without a ring; x10 and x12 0
		a.mov(x13, l.Base+counter)
		a.atomicInc()
		a.movReg(x10, xZR)
		a.movReg(x12, xZR)
		a.emit(a64Ret)
	}

	// The thread id, from the control block.
	a.emit(a64MrsTP | x13)
	noTP := a.branch(brCBZ, x13, 0, -1)
	a.mov(x14, uint64(int64(l.TidOff)))
	a.ldrW32Reg(x11, x13, x14)
	noTid := a.branch(brCBZW, x11, 0, -1)
	negTid := a.branch(brTBNZ, x11, 31, -1)
	a.mov(x15, l.Base+ring.FirstRingOff)
	a.mov(x16, l.Stride())
	isOwn := func() int { // branch to be landed if ring x10 is the thread's
		a.ldr(x13, x10, ring.OwnerOff)
		a.eor(x13, x13, x11)
		return a.branch(brCBZ, x13, 0, -1)
	}
	// The ring the id picks, then the table's.
	a.movReg(x12, x11)
	ringAt(x12, x10)
	home := isOwn()
	tableEntry(x13)
	a.ldrhScaled(x12, x14, x13)
	search := a.branch(brCBZW, x12, 0, -1)
	a.emit(0x51000400 | x12<<5 | x12) // sub w12, w12, #1
	ringAt(x12, x10)
	found := isOwn()
	// The thread's own, anywhere.
	a.land(search)
	a.movReg(x12, xZR)
	a.mov(x17, uint64(l.Slots))
	look := len(a.w)
	ringAt(x12, x10)
	own := isOwn()
	a.addImm(x12, x12, 1)
	a.subImm(x17, x17, 1)
	a.branch(brCBNZ, x17, 0, look)
	// None: the first free one from the one the id picks.
	a.movReg(x12, x11)
	a.mov(x17, uint64(l.Slots))
	try := len(a.w)
	ringAt(x12, x10)
	a.ldaxr(x13, x10)
	taken := a.branch(brCBNZ, x13, 0, -1)
	a.stlxr(x13, x11, x10)
	a.branch(brCBNZW, x13, 0, try) // the reservation lost: again
	claimed := a.branch(brB, 0, 0, -1)
	a.land(taken)
	a.emit(a64Clrex)
	a.eor(x13, x13, x11)
	mine := a.branch(brCBZ, x13, 0, -1) // a signal handler of the thread's claimed it meanwhile
	a.addImm(x12, x12, 1)
	a.subImm(x17, x17, 1)
	a.branch(brCBNZ, x17, 0, try)
	miss(ring.NoSlotOff)
	a.land(noTP)
	a.land(noTid)
	a.land(negTid)
	miss(ring.NoTidOff)
	// claimed: a signal handler that ran since the search may have
	// claimed another ring for the thread and put it in the table; then
	// that one is the thread's, and this one goes back.
	a.land(claimed)
	tableEntry(x13)
	a.ldrhScaled(x17, x14, x13)
	keep := a.branch(brCBZW, x17, 0, -1)
	a.emit(0x51000400 | x17<<5 | x17) // sub w17, w17, #1
	ringAt(x17, x17)
	a.eor(x13, x17, x10)
	keep2 := a.branch(brCBZ, x13, 0, -1) // this one
	a.ldr(x13, x17, ring.OwnerOff)
	a.eor(x13, x13, x11)
	keep3 := a.branch(brCBNZ, x13, 0, -1) // not the thread's
	a.str(xZR, x10, ring.OwnerOff)        // given back
	a.movReg(x10, x17)
	handler := a.branch(brB, 0, 0, -1)
	// store: the table gives the thread ring w12 from now on.
	for _, i := range []int{own, mine, keep, keep2, keep3} {
		a.land(i)
	}
	a.andLow(x17, x12, slotBits)
	a.addImm(x17, x17, 1)
	tableEntry(x13)
	a.strhScaled(x17, x14, x13)
	for _, i := range []int{home, found, handler} {
		a.land(i)
	}
	record := a.branch(brCBNZ, x9, 0, -1)
	a.movReg(x12, x10) // the tally routine's answer
	a.emit(a64Ret)
	a.land(record)
	r.reserve(a)
}

// reserve appends the reservation of room in ring x10 and the header.
func (r *RecordRoutine) reserve(a *a64) {
	l := r.Layout
	sizeBits := uint32(log2(l.RingSize))
	a.movReg(x12, x10)
	retry := len(a.w)
	a.ldr(x14, x12, ring.TailOff) // before the exclusive load: no other access between it and its store
	a.addImm(x17, x12, ring.HeadOff)
	a.ldxr(x13, x17)      // h
	a.andLow(x15, x9, 16) // the length
	a.andLow(x16, x13, int(sizeBits))
	a.add(x10, x16, x15)
	a.subImm(x10, x10, 1)
	a.lsr(x10, x10, sizeBits)
	fits := a.branch(brCBZ, x10, 0, -1) // off + len <= RingSize
	a.mov(x10, l.RingSize)              // else the padding to the end too
	a.sub(x10, x10, x16)
	a.add(x15, x15, x10)
	a.land(fits)
	a.add(x16, x13, x15) // the new head
	a.sub(x10, x16, x14)
	a.subImm(x10, x10, 1)
	a.lsr(x10, x10, sizeBits)
	full := a.branch(brCBNZ, x10, 0, -1) // new head - tail > RingSize
	a.stxr(x10, x16, x17)
	a.branch(brCBNZW, x10, 0, retry)
	// Reserved [h, new head): the record ends there.
	a.andLow(x15, x9, 16)
	a.sub(x14, x16, x15) // the record's position
	a.sub(x15, x14, x13) // the padding
	a.subImm(x10, x15, ring.PadHeader)
	noPad := a.branch(brTBNZ, x10, 63, -1) // none, or too short for a header (the tracer skips it)
	a.andLow(x10, x13, int(sizeBits))
	a.add(x10, x12, x10)
	a.addImm(x10, x10, ring.HeaderSize)
	a.str(x15, x10, 8) // id 0, the padding's length
	a.addImm(x13, x13, 1)
	a.stlr(x13, x10) // committed
	a.land(noPad)
	a.addImm(x11, x14, 1) // the record's stamp
	a.andLow(x14, x14, int(sizeBits))
	a.add(x10, x12, x14)
	a.addImm(x10, x10, ring.HeaderSize) // the record
	a.emit(a64Isb, a64MrsCntv|x13)
	a.str(x13, x10, 16)
	if l.CPUOff != 0 {
		a.emit(a64MrsTP | x13)
		a.mov(x14, uint64(int64(l.CPUOff)))
		a.ldrW32Reg(x13, x13, x14)
		a.andLow(x13, x13, 12)
	} else {
		a.mov(x13, ring.UnknownCPU)
	}
	a.orrShifted(x13, x9, x13, 16)
	a.str(x13, x10, 8)
	a.emit(a64Ret)
	a.land(full)
	a.emit(a64Clrex)
	drops := r.waitForRoom(a, retry)
	for _, i := range drops {
		a.land(i)
	}
	a.addImm(x13, x12, ring.LostOff)
	a.atomicInc()
	a.movReg(x10, xZR)
	a.emit(a64Ret)
}

// sysFutex is futex's number on arm64.
const sysFutex = 98

// waitForRoom appends, at a full ring (x12; x14 the tail seen), the wait
// for the drain to free room: when the tracer asks for waits
// (ring.WaitMaxOff) and still lives, the thread sleeps on its ring's tail
// with futex, the time it waits added to ring.WaitedOff, and goes back to
// retry. It returns the branches to take for a drop instead.
//
// No stack is used, and the system call clobbers only registers the
// stubs and the trampoline have saved (x0-x3, x8).
func (r *RecordRoutine) waitForRoom(a *a64, retry int) []int {
	l := r.Layout
	a.mov(x13, l.Base)
	a.ldr(x15, x13, ring.WaitMaxOff)
	dropping := a.branch(brCBZ, x15, 0, -1) // the tracer drops
	a.ldr(x16, x13, ring.AliveOff)
	a.emit(a64Isb, a64MrsCntv|x17)
	a.sub(x16, x17, x16) // the tracer's last sign of life, how old
	a.sub(x16, x16, x15)
	alive := a.branch(brTBNZ, x16, 63, -1)
	gone := a.branch(brCBNZ, x16, 0, -1) // older than WaitMax: gone (killed, stopped)
	a.land(alive)
	// From now on the thread waits: the drain, which stores the tail
	// before it reads ring.WaitedOff, wakes it; the barrier makes the
	// futex's read of the tail come after this.
	a.movReg(2, x14) // sleep while the tail is the one seen
	a.sub(x15, xZR, x17)
	a.addImm(x13, x12, ring.WaitedOff)
	a.atomicAdd(x15)
	a.emit(a64DmbIsh)
	a.addImm(0, x12, ring.TailOff)
	a.mov(1, 0) // FUTEX_WAIT (shared: the tracer wakes)
	a.mov(3, l.Base+ring.WaitTimeoutOff)
	a.syscall(sysFutex)
	a.emit(a64Isb, a64MrsCntv|x17)
	a.addImm(x13, x12, ring.WaitedOff)
	a.atomicAdd(x17)
	a.branch(brB, 0, 0, retry)
	return []int{dropping, gone}
}

// Size is the length of the stub's code (its addresses do not change
// it).
func (s *RecordStub) Size() int {
	c := *s
	c.Routine, c.Next = 0, 0
	b, _ := c.Code(0)
	return len(b)
}

// The stub's instructions before its first copy into the record: the
// sp lowered, then the pairs saved.
var stubSaves = 1 + len(rsSaved)/2

// Code returns the stub's bytes for placement at at.
func (s *RecordStub) Code(at uint64) ([]byte, error) {
	switch {
	case s.StackWords < 0 || s.StackWords > RecordStackMax || s.Len() > ring.RecordMax:
		return nil, fmt.Errorf("record of %d registers and %d stack words: too long", len(s.Regs), s.StackWords)
	case s.FrameEntry && (s.FrameAbove < 16 || s.FrameAbove >= 1<<24 || s.FrameAbove%16 != 0):
		return nil, fmt.Errorf("a frame record %d bytes below the entry's sp", s.FrameAbove)
	case s.FrameKey != 0 && (!s.FrameEntry || s.FrameKey != 'A' && s.FrameKey != 'B'):
		return nil, fmt.Errorf("a return address signed with key %q", s.FrameKey)
	}
	a := &a64{at: at}
	if s.FrameEntry {
		a.frameAbove, a.frameSigned = s.FrameAbove, s.FrameKey != 0
	}
	saves(a)
	if len(s.Tallies) > 0 {
		if err := s.checkTallies(); err != nil {
			return nil, err
		}
		s.tallyBody(a)
		code := s.leave(a)
		return code, a.err
	}
	var rejects []int
	if s.Filter != nil {
		if err := s.checkFilter(); err != nil {
			return nil, err
		}
		rejects = s.filter(a, s.Filter)
	}
	a.mov(x9, uint64(s.Site)<<32|uint64(s.Len()))
	a.call(recordEntry(s.Routine))
	skip := a.branch(brCBZ, x10, 0, -1)
	for i, off := range s.Regs {
		if !RecordableReg(off) {
			return nil, fmt.Errorf("register at %d of the registers' struct: not recordable", off)
		}
		loadThreadReg(a, x13, off)
		a.str(x13, x10, uint64(ring.RecordHeader+8*i))
	}
	for w := range s.StackWords {
		loadStackWord(a, x13, w)
		a.str(x13, x10, uint64(ring.RecordHeader+8*(len(s.Regs)+w)))
	}
	if err := s.copyReads(a); err != nil {
		return nil, err
	}
	if s.Hook {
		// After the values: the hook writes x30. No record, no hook
		// (the ring is full): the return would not be recorded either.
		if s.FrameEntry {
			a.addImm(x13, xFP, s.FrameAbove) // the frame's key
			a.mov(0, map[byte]uint64{'A': 1, 'B': 2}[s.FrameKey])
			if s.FrameKey != 0 {
				loadThreadReg(a, 1, 30*8) // stripped
			}
			a.call(HookFrameRoutine(s.Routine))
		} else {
			a.call(HookRoutine(s.Routine))
		}
		a.str(x9, x10, uint64(ring.RecordHeader+8*s.values()-8))
	}
	a.stlr(x11, x10) // committed, after the values
	a.land(skip)
	if rejects != nil {
		out := a.branch(brB, 0, 0, -1)
		for _, i := range rejects {
			a.land(i)
		}
		a.call(TallyRoutine(s.Routine)) // the ring, to count the hit rejected
		none := a.branch(brCBZ, x12, 0, -1)
		a.addImm(x13, x12, uint64(ring.TallyOff+8*s.Rejected))
		a.atomicInc()
		a.land(none)
		a.land(out)
	}
	code := s.leave(a)
	return code, a.err
}

// leave appends the stub's way out: the restores and the b to Next.
func (s *RecordStub) leave(a *a64) []byte {
	s.pops = len(a.w)
	restores(a)
	a.jump(s.Next)
	return a.bytes()
}

// saves appends the lowering of sp below the save area and the saves.
func saves(a *a64) {
	a.subImm(xSP, xSP, rsArea)
	for i := 0; i < len(rsSaved); i += 2 {
		a.stp(rsSaved[i], rsSaved[i+1], xSP, uint64(8*i))
	}
}

// restores appends the restores and sp put back.
func restores(a *a64) {
	for i := 0; i < len(rsSaved); i += 2 {
		a.ldp(rsSaved[i], rsSaved[i+1], xSP, uint64(8*i))
	}
	a.addImm(xSP, xSP, rsArea)
}

// Fixup: arm64's stubs read memory by system call alone, which faults
// nothing.
func (s *RecordStub) Fixup(at, rip uint64) (uint64, bool) { return 0, false }

// SavedRegs are the registers of a stub's save area, in order from its
// lowest word: their byte offsets in unix.PtraceRegs (x0-x30, sp, pc,
// pstate).
func SavedRegs() []int {
	offs := make([]int, len(rsSaved))
	for i, r := range rsSaved {
		offs[i] = 8 * int(r)
	}
	return offs
}

// RoutineRewind is StubRewind for a thread inside the routine at sp rsp:
// the routine leaves sp where the stub put it, the save area.
func RoutineRewind(rsp uint64) StubRewind {
	return StubRewind{Saved: true, Area: rsp, SP: rsp + rsArea}
}

// Rewind is StubRewind for a thread at pc rip, sp rsp, in this stub
// placed at at; false if rip is not in it.
func (s *RecordStub) Rewind(at, rip, rsp uint64) (StubRewind, bool) {
	code, err := s.Code(at)
	if err != nil || rip < at || rip >= at+uint64(len(code)) || rip%4 != 0 {
		return StubRewind{}, false
	}
	k := int(rip-at) / 4
	last := len(code)/4 - 1 // the b back: all as it was
	switch {
	case k == 0 || k == last:
		return StubRewind{SP: rsp}, true
	case k < stubSaves:
		// Saving: no register but sp has changed yet.
		return StubRewind{SP: rsp + rsArea}, true
	}
	// From the last save to the sp put back (the restores leave the
	// words where they were), the thread's registers are in the area.
	return StubRewind{Saved: true, Area: rsp, SP: rsp + rsArea}, true
}

// RecordableReg reports whether a stub can record the register at byte
// offset off in unix.PtraceRegs: x0-x30 and sp (not pc, recorded as the
// site's address, nor pstate).
func RecordableReg(off int) bool { return off >= 0 && off%8 == 0 && off/8 <= 31 }
