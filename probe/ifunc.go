package probe

import "github.com/probedbg/probe/symbols"

// ifuncImplementation resolves an IFUNC symbol (glibc's memcpy, strlen)
// to the implementation its resolver picked for this CPU, read from the
// GOT slot the dynamic linker filled: the resolver itself runs once, at
// load, so a probe there would see no call. False when the module has no
// such slot or it does not hold a function of a mapped file yet.
func (t *Tracer) ifuncImplementation(m *symbols.Mapped, sym symbols.Symbol) (resolved, bool) {
	slot, ok := m.Module.IFuncSlot(sym.Addr)
	if !ok {
		return resolved{}, false
	}
	impl, ok := t.readWord(slot + m.Bias)
	if !ok {
		return resolved{}, false
	}
	im := t.space.ModuleAt(impl)
	if im == nil {
		return resolved{}, false
	}
	fn, ok := im.Module.FunctionAt(impl-im.Bias, sym.Name)
	if !ok {
		return resolved{}, false
	}
	r, err := t.inFunction(im, fn, fn.Addr)
	return r, err == nil
}
