package probe

import (
	"time"

	"golang.org/x/sys/unix"

	"github.com/probedbg/probe/ring"
)

// A stub copies memory itself where the table of readable memory in the
// rings' header says it may (codegen's copyDirect): the drain writes
// the table from /proc/PID/maps every mapsEvery, and notes at each turn
// that it still looks (Beat), which the stubs trust for beatMaxAge. A
// copy from memory unmapped since the last look faults; the fault stops
// the thread, and fixCopyFault sends it to the read's system call, which
// faults nothing. Should probe be killed, its last look grows old and
// the stubs copy by system call only: a fault then would be the
// program's.

const (
	mapsEvery  = 20 * time.Millisecond
	beatMaxAge = 200 * time.Millisecond
)

// lookAtMemory notes that the tracer still looks, and writes the table
// of readable memory again if it is older than mapsEvery (now: at once).
func (t *Tracer) lookAtMemory(now bool) {
	in := t.inproc
	if now || time.Since(in.mapsSeen) >= mapsEvery {
		in.mapsSeen = time.Now()
		ranges, err := ring.ReadableRanges(t.pid)
		if err != nil {
			ranges = nil // every read by system call
		}
		in.rings.SetReadable(ranges)
	}
	in.rings.Beat(in.clock.Ticks(beatMaxAge))
}

// fixCopyFault reports whether sig, which stopped tid, is a stub's own
// copy of memory faulting, in a range gone since the tracer's last look:
// then tid is set to go on at that read's system call instead, the
// fault unseen by the program (the caller resumes it without the
// signal, or holds it so).
func (t *Tracer) fixCopyFault(tid, sig int) bool {
	in := t.inproc
	if in == nil || sig != int(unix.SIGSEGV) && sig != int(unix.SIGBUS) || t.proc.GetRegs(tid, &t.stop.regs) != nil {
		return false
	}
	rip := t.stop.regs.PC()
	for _, rs := range in.sites {
		if rip < rs.stub || rip >= rs.end {
			continue
		}
		to, ok := rs.code.Fixup(rs.stub, rip)
		if !ok {
			return false
		}
		t.stop.regs.SetPC(to)
		if t.proc.SetRegs(tid, &t.stop.regs) != nil {
			return false
		}
		t.recording.copyFaults.Add(1)
		return true
	}
	return false
}
