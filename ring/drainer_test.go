package ring

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestPassLimit(t *testing.T) {
	for _, c := range []struct {
		limit, n int
		took     time.Duration
		want     int
	}{
		{passMax, passMax, time.Second, passMax / 2}, // slow: halved
		{128, 10, 3 * passTime, 64},                  // never below 64
		{64, 64, time.Second, 64},
		{1024, 1024, passTime / 4, 2048},     // full and quick: doubled
		{passMax, passMax, 0, passMax},       // never above the most
		{1024, 100, passTime / 4, 1024},      // not full: kept
		{1024, 1024, passTime * 3 / 4, 1024}, // full, neither slow nor quick
	} {
		if got := passLimit(c.limit, c.n, c.took); got != c.want {
			t.Errorf("passLimit(%d, %d, %v) = %d, want %d", c.limit, c.n, c.took, got, c.want)
		}
	}
}

// fakeOutput is an Output of room records, which take writes.
type fakeOutput struct {
	mu      sync.Mutex
	room    int
	written uint64
	taken   chan struct{}
}

func (o *fakeOutput) Room() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.room
}

func (o *fakeOutput) Written() uint64 {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.written
}

func (o *fakeOutput) Taken() <-chan struct{} {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.taken == nil {
		o.taken = make(chan struct{})
	}
	return o.taken
}

// send queues a record, which takes a record's room.
func (o *fakeOutput) send() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.room--
}

// fill leaves no room.
func (o *fakeOutput) fill() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.room = 0
}

// take writes n records, making their room.
func (o *fakeOutput) take(n int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.room += n
	o.written += uint64(n)
	if o.taken != nil {
		close(o.taken)
		o.taken = nil
	}
}

// TestDrainerPass: a pass takes no more than the output's room and the
// caller's bound, none without room, and only the bound without an
// output.
func TestDrainerPass(t *testing.T) {
	for _, c := range []struct {
		out         Output
		bound, want int
	}{
		{nil, 0, 0},
		{nil, 10, 10},
		{&fakeOutput{room: 5}, 0, 5},
		{&fakeOutput{room: 5}, 3, 3},
		{&fakeOutput{room: 5}, 10, 5},
		{&fakeOutput{room: 0}, 10, -1}, // not called
		{&fakeOutput{room: -3}, 0, -1}, // (more queued than the room: none)
	} {
		var d Drainer
		d.SetOutput(c.out)
		got := -1
		n := d.Pass(c.bound, func(limit int) int { got = limit; return 1 })
		if got != c.want || (n == 1) != (c.want >= 0) {
			t.Errorf("%+v, bound %d: limit %d, returned %d; want limit %d", c.out, c.bound, got, n, c.want)
		}
	}
}

// twoThreads is the rings of threads 7 and 4242, holding records
// stamped 10, 30, 50 and 20, 40, 60.
func twoThreads(t *testing.T) *Rings {
	r, b := newRing(t, 4096)
	a := &producer{mem: b.mem, l: b.l, base: FirstRingOff}
	a.put(a.base+OwnerOff, 7)
	r.setTidTable(7, 0)
	r.setTidTable(4242, 1)
	for _, w := range []struct {
		p   *producer
		tsc uint64
	}{{a, 10}, {b, 20}, {a, 30}, {b, 40}, {a, 50}, {b, 60}} {
		at, stamp, ok := w.p.record(1, 0, w.tsc, w.tsc)
		if !ok {
			t.Fatal("full")
		}
		w.p.put(at, stamp)
	}
	return r
}

// TestDrainerBefore: before thread 4242's stop at 45, the records of
// both threads stamped before it come in their order, then the rest of
// 4242's; 7's after 45 stays. So with an output that takes one record
// at a time, written by another goroutine while the drain waits for
// its room.
func TestDrainerBefore(t *testing.T) {
	for _, room := range []int{-1, 1} {
		r := twoThreads(t)
		var d Drainer
		out := &fakeOutput{room: room}
		var seen []uint64
		sink := Sink{Take: Take{Record: func(rec *Record) { seen = append(seen, rec.TSC) }}}
		if room > 0 {
			d.SetOutput(out)
			sink.Take.Record = func(rec *Record) {
				if out.Room() <= 0 {
					t.Error("a record handed on with no room")
				}
				out.send()
				seen = append(seen, rec.TSC)
				go out.take(1)
			}
		}
		d.Do(func() { d.Before(r, sink, []int{7, 4242}, 4242, 45) })
		if want := []uint64{10, 20, 30, 40, 60}; !slices.Equal(seen, want) {
			t.Errorf("room %d: %v, want %v", room, seen, want)
		}
		if r.Drained(7) || !r.Drained(4242) {
			t.Errorf("room %d: 7 drained %v, 4242 %v", room, r.Drained(7), r.Drained(4242))
		}
	}
}

// TestDrainerBeforeChunks: as chunks, in passes of at most the sink's
// PassMax, each ended, each thread's records in their order.
func TestDrainerBeforeChunks(t *testing.T) {
	r := twoThreads(t)
	var d Drainer
	var passes [][]uint64
	pass := []uint64{}
	sink := Sink{
		Take: Take{Chunk: func(c *Chunk) {
			var rec Record
			for c.Next(&rec) {
				pass = append(pass, rec.TSC)
			}
		}},
		PassMax: 2,
		EndPass: func() { passes, pass = append(passes, pass), []uint64{} },
	}
	d.Do(func() { d.Before(r, sink, []int{7, 4242}, 4242, 45) })
	want := [][]uint64{{10, 30}, {20, 40}, {}, {60}}
	if !slices.EqualFunc(passes, want, slices.Equal) {
		t.Errorf("passes %v, want %v", passes, want)
	}
}

// TestDrainerAll: All drains until a pass hands on nothing, waiting for
// room while the output makes progress; after giveUp without any (a
// reader that stopped reading), it goes on with no bound.
func TestDrainerAll(t *testing.T) {
	t.Run("progress", func(t *testing.T) {
		t.Parallel()
		var d Drainer
		out := &fakeOutput{room: 0}
		d.SetOutput(out)
		left := 5
		var limits []int
		go out.take(2)
		d.All(func(limit int) int {
			limits = append(limits, limit)
			n := min(left, limit)
			left -= n
			for range n {
				out.send()
			}
			if left > 0 {
				go out.take(n)
			}
			return n
		})
		if left != 0 || limits[0] != 2 || slices.Contains(limits, 0) {
			t.Errorf("%d left, limits %v", left, limits)
		}
	})
	// Stuck: given up once, the drain goes on pass after pass (a raw
	// capture's are bounded, Sink.PassMax), not 2 s each.
	for _, passes := range []int{1, 3} {
		t.Run(fmt.Sprintf("stuck, %d passes", passes), func(t *testing.T) {
			t.Parallel()
			var d Drainer
			d.SetOutput(&fakeOutput{room: 0})
			start := time.Now()
			var limits []int
			d.All(func(limit int) int {
				limits = append(limits, limit)
				return min(len(limits), passes) % passes // each but the last hands on records
			})
			if took := time.Since(start); took < giveUp || took > giveUp+giveUp/2 || !slices.Equal(limits, make([]int, passes)) {
				t.Errorf("took %v, limits %v", took, limits)
			}
		})
	}
}

// fakeFamily counts its passes, and their records in shared, which the
// test changes too under the Drainer's lock.
type fakeFamily struct {
	shared   int
	passes   atomic.Int64
	records  int           // each pass hands on
	passed   chan struct{} // a pass is done, if set
	panicsAt int64         // the pass that panics (0: none)
}

func (f *fakeFamily) Pass(limit int) (int, bool) {
	n := f.passes.Add(1)
	if n == f.panicsAt {
		panic(errors.New("handler"))
	}
	f.shared++
	if f.passed != nil {
		select {
		case f.passed <- struct{}{}:
		default:
		}
	}
	return min(f.records, limit), false
}

func (f *fakeFamily) Prefault() {}

// TestDrainerGoroutine: the goroutine passes while the caller's Do runs
// in turns with it (-race checks the lock), waits for the output's room
// when it has none, and stops.
func TestDrainerGoroutine(t *testing.T) {
	var d Drainer
	out := &fakeOutput{room: 100}
	d.SetOutput(out)
	f := &fakeFamily{records: passMax, passed: make(chan struct{}, 1)}
	d.Start(f, func(r any) { t.Errorf("panic %v", r) })
	d.Start(f, nil) // (runs already)
	for range 100 {
		d.Do(func() { f.shared++ })
	}
	for f.passes.Load() < 10 {
		time.Sleep(time.Millisecond)
	}
	// No room: the goroutine waits for it, ~20 ms at a time or until
	// the output makes room.
	out.fill()
	<-f.passed
	<-f.passed // (a pass that saw no room after it)
	before := f.passes.Load()
	time.Sleep(50 * time.Millisecond)
	if n := f.passes.Load(); n > before+5 {
		t.Errorf("%d passes while the output had no room", n-before)
	}
	out.take(100)
	select {
	case <-f.passed:
	case <-time.After(10 * time.Second):
		t.Error("no pass once the output made room")
	}
	d.Stop()
	d.Stop()
	n := f.passes.Load()
	time.Sleep(5 * time.Millisecond)
	d.Do(func() {
		if f.passes.Load() != n || f.shared < 110 {
			t.Errorf("passes %d after Stop, shared %d", f.passes.Load()-n, f.shared)
		}
	})
}

// TestDrainerPanic: a panic in a pass is handed on, the lock let go and
// the goroutine stopped.
func TestDrainerPanic(t *testing.T) {
	var d Drainer
	got := make(chan any, 1)
	d.Start(&fakeFamily{panicsAt: 3}, func(r any) { got <- r })
	if r := <-got; r == nil || r.(error).Error() != "handler" {
		t.Errorf("panic %v", r)
	}
	d.Stop()
	d.Do(func() {})
}
