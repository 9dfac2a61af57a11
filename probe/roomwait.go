package probe

import "time"

// Waiting for room (Tuning.WaitForRoom): a thread whose ring is full
// waits for the drain rather than drop its record (ring.Rings.SetWaiting),
// while a goroutine of the tracer's shows it lives. A tracer killed
// stops showing it, and the threads drop their records again once its
// last sign is aliveMaxAge old: they never wait for a tracer gone.
const (
	aliveEvery  = 10 * time.Millisecond
	aliveMaxAge = time.Second
)

// startWaiting makes in's threads wait for room, if the tuning asks.
func (t *Tracer) startWaiting(in *inproc) {
	if !t.tuning.WaitForRoom {
		return
	}
	in.rings.SetWaiting(in.clock.Ticks(aliveMaxAge))
	stop, done := make(chan struct{}), make(chan struct{})
	in.aliveStop, in.aliveDone = stop, done
	rings := in.rings
	go func() {
		defer close(done)
		tick := time.NewTicker(aliveEvery)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				rings.Alive()
			}
		}
	}()
}

// stopWaiting makes in's full rings drop again and lets go the threads
// that wait; before the rings' memory goes.
func (in *inproc) stopWaiting() {
	if in.aliveStop == nil {
		return
	}
	close(in.aliveStop)
	<-in.aliveDone
	in.aliveStop = nil
	in.rings.SetWaiting(0)
}

// RecordsWaited is how long the threads have waited for room in their
// rings in all (Tuning.WaitForRoom): read it after Wait or Detach.
func (t *Tracer) RecordsWaited() time.Duration {
	var d time.Duration
	t.withHandlers(func() {
		d = t.drain.waitedPast
		for _, tr := range t.family() {
			if in := tr.inproc; in != nil {
				d += in.clock.Duration(in.rings.Waited())
			}
		}
	})
	return d
}
