package probe

import (
	"github.com/probedbg/probe/codegen"
	"github.com/probedbg/probe/singlestep"
)

// guardedPad: Linux guards no user page with indirect branch tracking
// (IBT) on x86-64: a jmp may go over an endbr64.
func (t *Tracer) guardedPad(st *site, d *codegen.Detour) string { return "" }

// planFunc is codegen.PlanDetour's answer for st in its function, where
// the function jumps kept by its module from an earlier start.
func planFunc(st *site) funcPlan {
	m := st.module
	fn, err := m.ReadCode(st.sym.Addr, st.sym.Size)
	if err != nil {
		return funcPlan{err: err, unread: true}
	}
	flow := func() (*singlestep.FunctionFlow, error) {
		f, err := m.FunctionFlow(st.sym.Addr, st.sym.Size)
		if err != nil {
			return nil, err
		}
		return f.Moved(m.Bias), nil
	}
	d, err := codegen.PlanDetourFlow(fn, st.sym.Addr+m.Bias, st.addr, flow)
	return funcPlan{d: d, err: err}
}
