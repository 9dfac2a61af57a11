package symbols

import (
	"debug/elf"
	"sync"
)

// ifuncSlots maps an IFUNC resolver's link address to the GOT slot an
// IRELATIVE relocation has the dynamic linker fill with its result.
type ifuncSlots struct {
	once  sync.Once
	slots map[uint64]uint64
}

// IFuncSlot returns the link address of the GOT slot that holds, once
// the module is relocated, the implementation the IFUNC resolver at
// link address resolver picked: the slot of an IRELATIVE relocation
// whose addend is resolver (glibc has one for each IFUNC it calls
// itself: memcpy, strlen...). False when the module has none.
func (m *Module) IFuncSlot(resolver uint64) (uint64, bool) {
	c := &m.ifunc
	c.once.Do(func() { c.slots = m.irelativeSlots() })
	slot, ok := c.slots[resolver]
	return slot, ok
}

func (m *Module) irelativeSlots() map[uint64]uint64 {
	slots := map[uint64]uint64{}
	if m.elf == nil || m.elf.Class != elf.ELFCLASS64 {
		return slots
	}
	irelative, ok := m.relocType(uint32(elf.R_X86_64_IRELATIVE), uint32(elf.R_AARCH64_IRELATIVE))
	if !ok {
		return slots
	}
	for _, r := range m.dynRelocs() {
		if r.typ == irelative {
			slots[uint64(r.addend)] = r.off // the addend: the resolver
		}
	}
	return slots
}

// relocType is the module's relocation type of a kind: amd64's on
// x86-64, arm64's on aarch64; false on another machine.
func (m *Module) relocType(amd64, arm64 uint32) (uint32, bool) {
	switch m.elf.Machine {
	case elf.EM_X86_64:
		return amd64, true
	case elf.EM_AARCH64:
		return arm64, true
	}
	return 0, false
}

// FunctionAt returns the function starting at link address link: its
// symbol, or when no symbol starts there (a stripped library's local
// function), the span of the call frame information entry that does,
// named name.
func (m *Module) FunctionAt(link uint64, name string) (Symbol, bool) {
	if sym, ok := m.SymbolAt(link); ok && sym.Addr == link && sym.Func {
		return sym, true
	}
	if fn, ok := m.fdeFunction(link, name); ok && fn.Addr == link {
		return fn, true
	}
	return Symbol{}, false
}
