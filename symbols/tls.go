package symbols

import (
	"debug/elf"
)

// TLSSlot returns the link address of the GOT slot that holds, once the
// dynamic linker has relocated the module, the offset of the module's
// thread-local variable name from the thread pointer (%fs base on x86-64,
// tpidr_el0 on arm64): the slot of its initial-exec relocation
// (R_X86_64_TPOFF64, R_AARCH64_TLS_TPREL64), against the symbol or, as
// glibc has it for errno, against none with the variable's offset in the
// module's TLS block as addend. Every thread's copy is at its thread
// pointer plus that offset. False when the module defines no such
// variable or reaches it otherwise.
func (m *Module) TLSSlot(name string) (uint64, bool) {
	if m.elf == nil || m.elf.Class != elf.ELFCLASS64 {
		return 0, false
	}
	var tpoff uint32
	switch m.elf.Machine {
	case elf.EM_X86_64:
		tpoff = uint32(elf.R_X86_64_TPOFF64)
	case elf.EM_AARCH64:
		tpoff = uint32(elf.R_AARCH64_TLS_TPREL64)
	default:
		return 0, false
	}
	dynsym, err := m.elf.DynamicSymbols()
	if err != nil {
		return 0, false
	}
	index, value := -1, uint64(0)
	for i, s := range dynsym {
		if elf.ST_TYPE(s.Info) == elf.STT_TLS && s.Section != elf.SHN_UNDEF && s.Name == name {
			index, value = i+1, s.Value // (DynamicSymbols leaves out symbol 0)
			break
		}
	}
	if index < 0 {
		return 0, false
	}
	for _, r := range m.dynRelocs() {
		if r.typ == tpoff && (int(r.sym) == index && r.addend == 0 || r.sym == 0 && uint64(r.addend) == value) {
			return r.off, true
		}
	}
	return 0, false
}
