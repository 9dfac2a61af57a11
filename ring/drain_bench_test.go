package ring

import (
	"testing"

	"golang.org/x/sys/unix"
)

// BenchmarkDrainBeforeIdle is what a stop pays to look, through the tid
// table, at the rings of 64 threads that recorded nothing since.
func BenchmarkDrainBeforeIdle(b *testing.B) {
	l := Layout{Slots: 512, RingSize: 16 << 20, TidOff: 0x2d0}
	mem, err := unix.Mmap(-1, 0, int(l.Size()), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_ANONYMOUS)
	if err != nil {
		b.Fatal(err)
	}
	defer unix.Munmap(mem)
	r := New(mem, l)
	var tids []int
	for i := range 64 {
		tid := 1000 + 3*i
		p := &producer{mem: mem, l: l, base: r.ring(tid & (l.Slots - 1))}
		p.put(p.base+OwnerOff, uint64(tid))
		tids = append(tids, tid)
	}
	for b.Loop() {
		r.DrainBefore(tids, ^uint64(0), 0, Take{Record: func(*Record) {}})
	}
}
