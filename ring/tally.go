package ring

import (
	"sync/atomic"

	"github.com/probedbg/probe/singlestep"
)

// Tallies calls fn with the first n counters of each ring a thread owns
// (singlestep.RingTally), each read whole and in order; words is valid
// only during the call.
func (r *Rings) Tallies(n int, fn func(tid int, words []uint64)) {
	n = min(n, singlestep.TallyWords)
	r.tallyUsed = max(r.tallyUsed, n)
	if cap(r.tally) < n {
		r.tally = make([]uint64, n)
	}
	words := r.tally[:n]
	for slot := range r.layout.Slots {
		base := r.ring(slot)
		owner := atomic.LoadUint64(r.word(base + singlestep.RingOwner))
		if owner == 0 {
			continue
		}
		for i := range words {
			words[i] = atomic.LoadUint64(r.word(base + singlestep.RingTally + uint64(8*i)))
		}
		fn(int(owner), words)
	}
}

// clearTallies zeroes the counters of the ring at base that Tallies has
// read (the stubs add to no others), for its next owner: the pages of
// the rest stay unwritten, no memory.
func (r *Rings) clearTallies(base uint64) {
	clear(r.mem[base+singlestep.RingTally : base+singlestep.RingTally+8*uint64(r.tallyUsed)])
}
