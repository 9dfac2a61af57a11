package ring

import (
	"sync/atomic"
	"unsafe"
)

// ShadowFrame is one call on a thread's in-process shadow stack (see
// codegen's HookRoutine): the slot of its return address and the
// original. Ret has UnhookedBit set while the original is back
// in the slot for an unwinder.
type ShadowFrame struct{ Slot, Ret uint64 }

// Shadow returns tid's shadow stack, oldest call first (nil: no ring).
// Read it only while the thread is stopped outside the record code.
func (r *Rings) Shadow(tid int) []ShadowFrame {
	base, ok := r.ringOf(tid)
	if !ok {
		return nil
	}
	n := min(uint32(atomic.LoadUint64(r.word(base+ShadowTopOff))), ShadowFrames)
	frames := make([]ShadowFrame, n)
	for i := range frames {
		at := base + ShadowOff + uint64(i)*ShadowFrameSize
		frames[i] = ShadowFrame{Slot: atomic.LoadUint64(r.word(at)), Ret: atomic.LoadUint64(r.word(at + 8))}
	}
	return frames
}

// ShadowReturns reports whether the in-process trampoline, come to from
// slot, finds a frame of tid's there: under the frames below the slot,
// which it drops, the next one is at the slot. Read it only while the
// thread is stopped outside the record code.
func (r *Rings) ShadowReturns(tid int, slot uint64) bool {
	base, ok := r.ringOf(tid)
	if !ok {
		return false
	}
	for i := min(uint32(atomic.LoadUint64(r.word(base+ShadowTopOff))), ShadowFrames); i > 0; i-- {
		at := atomic.LoadUint64(r.word(base + ShadowOff + uint64(i-1)*ShadowFrameSize))
		if at >= slot {
			return at == slot
		}
	}
	return false
}

// SetShadow makes frames tid's shadow stack, with a new generation: for a
// thread stopped outside the record code. False if tid has no ring.
func (r *Rings) SetShadow(tid int, frames []ShadowFrame) bool {
	base, ok := r.ringOf(tid)
	if !ok || len(frames) > ShadowFrames {
		return false
	}
	for i, f := range frames {
		at := base + ShadowOff + uint64(i)*ShadowFrameSize
		atomic.StoreUint64(r.word(at), f.Slot)
		atomic.StoreUint64(r.word(at+8), f.Ret)
	}
	top := r.word(base + ShadowTopOff)
	gen := atomic.LoadUint64(top)>>32 + 1
	atomic.StoreUint64(top, gen<<32|uint64(len(frames)))
	return true
}

// Owners lists the threads that have a ring.
func (r *Rings) Owners() []int {
	var tids []int
	for slot := range r.layout.Slots {
		if owner := atomic.LoadUint64(r.word(r.ring(slot) + OwnerOff)); owner != 0 {
			tids = append(tids, int(owner))
		}
	}
	return tids
}

// SetPid tells the stubs the process's id (PidOff).
func (r *Rings) SetPid(pid int) { atomic.StoreUint64(r.word(PidOff), uint64(pid)) }

// Adopt claims a ring for thread tid, which has none yet, with frames as
// its shadow stack: a fork child's thread, whose stack is a copy of the
// forking thread's, hooked returns and all. The ring is the first free
// one from the one the record routine tries first for tid, and the tid
// table gives it to tid. false: every ring is taken.
func (r *Rings) Adopt(tid int, frames []ShadowFrame) bool {
	for i := range r.layout.Slots {
		slot := (tid + i) & (r.layout.Slots - 1)
		base := r.ring(slot)
		if !atomic.CompareAndSwapUint64(r.word(base+OwnerOff), 0, uint64(tid)) {
			continue
		}
		r.slotOf[tid] = slot
		r.SetShadow(tid, frames[:min(len(frames), ShadowFrames)])
		r.setTidTable(tid, slot)
		return true
	}
	return false
}

// setTidTable gives tid ring slot in the tid table the record routine
// looks in first.
func (r *Rings) setTidTable(tid, slot int) {
	entry := (*uint16)(unsafe.Pointer(&r.mem[TidTableOff+2*(tid&(TidMax-1))]))
	*entry = uint16(slot + 1) // a thread not running (a fork child stopped at birth) reads it
}
