package probe

import "github.com/probedbg/probe/codegen"

// guardedPad: Linux guards no user page with indirect branch tracking
// (IBT) on x86-64: a jmp may go over an endbr64.
func (t *Tracer) guardedPad(st *site, d *codegen.Detour) string { return "" }
