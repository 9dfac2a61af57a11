package probe

import "github.com/probedbg/probe/singlestep"

// guardedPad says why d's `b` may not go over its instruction: a landing
// pad (bti c, paciasp...) in a BTI-guarded page, where an indirect call
// landing on the `b` would fault. "" if it may. (Debian's start files
// carry no BTI note, so no test program's text is guarded.)
func (t *Tracer) guardedPad(st *site, d *singlestep.Detour) string {
	if !d.LandingPad() {
		return ""
	}
	if guarded, err := t.proc.BTIGuarded(st.addr); err != nil || guarded {
		return t.space.Describe(st.addr) + ": a landing pad in a BTI-guarded page"
	}
	return ""
}
