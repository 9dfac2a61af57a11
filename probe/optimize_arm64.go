package probe

import (
	"github.com/probedbg/probe/codegen"
	"github.com/probedbg/probe/symbols"
)

// guardedPad says why d's `b` may not go over its instruction: a landing
// pad (bti c, paciasp...) in a BTI-guarded page, where an indirect call
// landing on the `b` would fault. "" if it may. A module's code is
// guarded whole or not at all (the loader maps it with PROT_BTI from its
// ELF note): smaps is read once per module. A brk there takes the call
// (its exception comes before the branch target check):
// TestBTIGuardedEntries.
func (t *Tracer) guardedPad(st *site, d *codegen.Detour) string {
	if !d.LandingPad() {
		return ""
	}
	guarded, ok := t.jumps.btiText[st.module]
	if !ok {
		var err error
		guarded, err = t.proc.BTIGuarded(st.addr)
		guarded = guarded || err != nil
		if t.jumps.btiText == nil {
			t.jumps.btiText = map[*symbols.Mapped]bool{}
		}
		t.jumps.btiText[st.module] = guarded
	}
	if guarded {
		return t.space.Describe(st.addr) + ": a landing pad in a BTI-guarded page"
	}
	return ""
}

// planFunc is codegen.PlanDetour's answer for st in its function.
func planFunc(st *site) funcPlan {
	m := st.module
	fn, err := m.ReadCode(st.sym.Addr, st.sym.Size)
	if err != nil {
		return funcPlan{err: err, unread: true}
	}
	tables := func(addr, n uint64) ([]byte, error) { return m.ReadCode(addr-m.Bias, n) }
	d, err := codegen.PlanDetour(fn, st.sym.Addr+m.Bias, st.addr, tables)
	return funcPlan{d: d, err: err}
}
