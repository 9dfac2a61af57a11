package probe

import (
	"slices"
	"sync/atomic"
)

// Stats is what a tracer counted: what was lost, and how its mechanisms
// went, for the end notes, -v, PROBE_DEBUG_* and tests. Read it after
// Wait or Detach (JumpsRefused: after Start).
type Stats struct {
	// LostHits counts hits seen while detaching, which were not
	// reported.
	LostHits uint64
	// LostReturns counts return-probe frames abandoned by longjmp or an
	// exception, whose return was never seen.
	LostReturns uint64
	// UnrecordedReturns is how many calls hooked in the tracee were lost
	// in a thread whose ring had dropped records (full): their returns
	// most likely came, unrecorded. Not in LostReturns.
	UnrecordedReturns uint64
	// CallsInProgress is how many calls whose return was awaited
	// (return probes, the function tracers) were still in progress at
	// the detach, in this process and those it followed: their returns
	// are not in the trace.
	CallsInProgress uint64

	// JumpOptimized counts the probe sites given a jump instead of an
	// int3, ReturnHookJumps those of them whose detour hooks the return.
	JumpOptimized, ReturnHookJumps int
	// JumpsRefused says which sites kept their int3 because something
	// outside their function lands inside the bytes a jmp would cover,
	// one sorted line each.
	JumpsRefused []string
	// DetourExits counts the threads detach moved out of a detour to the
	// original code, SwappedExits those of them past a return hook's
	// swap of the return address.
	DetourExits, SwappedExits int
	// MailboxStops counts the stops served from the mailbox, without a
	// ptrace request for registers.
	MailboxStops int
	// CopyFaults counts the stubs' copies of memory that faulted and
	// went to the system call.
	CopyFaults int
	// MemAccesses counts the reads and writes of the process's memory
	// through /proc/PID/mem (patching writes sites in batches).
	MemAccesses int64
}

// Stats returns what the tracer counted.
func (t *Tracer) Stats() Stats {
	t.jumps.refused.mu.Lock()
	refused := slices.Sorted(slices.Values(t.jumps.refused.sites))
	t.jumps.refused.mu.Unlock()
	return Stats{
		LostHits:          atomic.LoadUint64(&t.lostHits),
		LostReturns:       atomic.LoadUint64(&t.ret.lost),
		UnrecordedReturns: atomic.LoadUint64(&t.ret.unrecorded),
		CallsInProgress:   atomic.LoadUint64(&t.ret.inProgress),
		JumpOptimized:     int(t.jumps.placed.Load()),
		ReturnHookJumps:   int(t.jumps.hookJumps.Load()),
		JumpsRefused:      refused,
		DetourExits:       int(t.jumps.detourExits.Load()),
		SwappedExits:      int(t.jumps.swappedExits.Load()),
		MailboxStops:      int(t.mail.stops.Load()),
		CopyFaults:        int(t.recording.copyFaults.Load()),
		MemAccesses:       t.proc.MemAccesses(),
	}
}
