package ring

import "sync/atomic"

// Tallies calls fn with the first n counters of each ring a thread owns
// (TallyOff), each read whole and in order; words is valid
// only during the call.
func (r *Rings) Tallies(n int, fn func(tid int, words []uint64)) {
	n = min(n, TallyWords)
	r.tallyUsed = max(r.tallyUsed, n)
	if cap(r.tally) < n {
		r.tally = make([]uint64, n)
	}
	words := r.tally[:n]
	for slot := range r.layout.Slots {
		base := r.ring(slot)
		owner := atomic.LoadUint64(r.word(base + OwnerOff))
		if owner == 0 {
			continue
		}
		for i := range words {
			words[i] = atomic.LoadUint64(r.word(base + TallyOff + uint64(8*i)))
		}
		fn(int(owner), words)
	}
}

// clearTallies zeroes the counters of the ring at base that Tallies has
// read (the stubs add to no others), for its next owner: the pages of
// the rest stay unwritten, no memory.
func (r *Rings) clearTallies(base uint64) {
	clear(r.mem[base+TallyOff : base+TallyOff+8*uint64(r.tallyUsed)])
}
