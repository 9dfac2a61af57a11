package probe

import (
	"fmt"
	"os"
	"slices"

	"github.com/probedbg/probe/ring"
)

// In-process probes of followed processes (-f). A fork child's memory is
// a copy of its parent's, record stubs and routines included, but the
// rings are shared memory: the child's stubs would write into the
// parent's rings, and its reads of memory name the parent's pid. So the
// child gets rings of its own before it runs: a new memory file mapped
// over the rings' address in the child alone, the same layout, the
// parent's sites, and in its thread's ring the shadow stack of the
// thread that forked, whose hooked returns its copy of the stack holds.
// The root's drain drains every process's rings; the handlers of all of
// them run under the root's lock.

// forkRings gives c, the followed child of a fork by parent's thread tid,
// its own rings; where it cannot, the child's record sites go back to
// the int3 and its hooked returns home, and it is traced by stops.
func (c *Tracer) forkRings(parent *Tracer, tid int) {
	pin := parent.inproc
	l := pin.rings.Layout()
	mem, err := c.proc.MapSharedAt(c.pid, l.Base, l.Size())
	if err != nil {
		fmt.Fprintf(os.Stderr, "probe: pid %d: its probes stop it: rings of its own: %v\n", c.pid, err)
		c.recording.noRingsWhy = fmt.Sprintf("rings of its own: %v", err)
		c.forgetRecordSites(parent, tid)
		return
	}
	rings := ring.New(mem, l)
	c.proc.Prefault(rings.OwnerPages()) // only the first record's faults are at stake
	in := c.newInproc(rings, pin.clock)
	in.routines, in.trampoline, in.trap, in.size = slices.Clone(pin.routines), pin.trampoline, pin.trap, pin.size
	in.nextID, in.tallyWords = pin.nextID, pin.tallyWords
	for id, rs := range pin.sites {
		st := c.sites[rs.site.addr]
		if st == nil || st.opt == nil || st.opt.record != rs {
			continue
		}
		cp := *rs
		cp.site, st.opt.record = st, &cp
		in.sites[id] = &cp
		if cp.tallies != nil || cp.filtered {
			in.tallied = append(in.tallied, &cp)
		}
	}
	c.inproc = in
	c.lookAtMemory(true)
	c.startWaiting(in)
	if frames := pin.rings.Shadow(tid); !rings.Adopt(c.pid, frames) {
		parent.unhookFrames(c.proc, tid, frames) // (cannot be: the rings are new)
	}
	c.threadComm(c.pid)
}

// forgetRecordSites turns c's record sites back into int3s, and gives
// the child the return addresses its stack has hooked (those of
// parent's thread tid, which forked): no stub of it writes into its
// parent's rings.
func (c *Tracer) forgetRecordSites(parent *Tracer, tid int) {
	sts := c.recordSites()
	c.unoptimize(sts)
	for _, st := range sts {
		delete(c.jumps.detours, st.opt.at)
		st.opt, st.trapWhy = nil, c.recording.noRingsWhy
	}
	parent.unhookFrames(c.proc, tid, parent.inprocFrames(tid))
}
