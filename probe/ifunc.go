package probe

import "github.com/probedbg/probe/symbols"

// ifuncImplementation resolves an IFUNC symbol (glibc's memcpy, strlen)
// to the implementation its resolver picked for this CPU, read from the
// GOT slot the dynamic linker filled: the resolver itself runs once, at
// load, so a probe there would see no call. Else it says why not: the
// module has no such slot (it never calls the function itself), or the
// slot holds no function of a mapped file (glibc's time and
// gettimeofday pick the vDSO's, which probe does not trace).
func (t *Tracer) ifuncImplementation(m *symbols.Mapped, sym symbols.Symbol) (resolved, string) {
	const why = "an IFUNC: its resolver runs once at load, and "
	slot, ok := m.Module.IFuncSlot(sym.Addr)
	if !ok {
		return resolved{}, why + "no GOT slot of its module says what it picked"
	}
	impl, ok := t.readWord(slot + m.Bias)
	if !ok {
		return resolved{}, why + "its GOT slot cannot be read"
	}
	im := t.space.ModuleAt(impl)
	if im == nil {
		if t.proc.InVDSO(impl) {
			return resolved{}, why + "it picked the vDSO's code, which probe does not trace"
		}
		return resolved{}, why + "it picked code outside every mapped file"
	}
	fn, ok := im.Module.FunctionAt(impl-im.Bias, sym.Name)
	if !ok {
		return resolved{}, why + "what it picked is no function"
	}
	r, err := t.inFunction(im, fn, fn.Addr)
	if err != nil {
		return resolved{}, why + err.Error()
	}
	return r, ""
}
