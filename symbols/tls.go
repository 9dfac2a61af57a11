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
	tpoff, ok := m.relocType(uint32(elf.R_X86_64_TPOFF64), uint32(elf.R_AARCH64_TLS_TPREL64))
	if !ok {
		return 0, false
	}
	index, value := -1, uint64(0)
	// (The table read as bytes: decoded whole, libc's was ~1.4 ms of a
	// start.)
	if !m.dynRaw.each(m.elf, name, func(s rawSym) bool {
		if elf.ST_TYPE(s.info) == elf.STT_TLS && s.section != elf.SHN_UNDEF {
			index, value = s.index, s.value
			return true
		}
		return false
	}) {
		return 0, false // (no .dynsym)
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

// ExecTLSOffset returns the offset from the thread pointer of thread-local
// variable name of a statically linked executable (its own TLS block,
// module 1, reached by the local-exec model: no GOT slot to read). glibc
// places that block as the TLS ABI of the architecture says: below the
// thread pointer, ending at it, on x86-64 (variant II); after the 16-byte
// thread control block on arm64 (variant I).
func (m *Module) ExecTLSOffset(name string) (int64, bool) {
	if m.elf == nil || m.elf.Type != elf.ET_EXEC && m.elf.Type != elf.ET_DYN {
		return 0, false
	}
	var tls *elf.Prog
	for _, p := range m.elf.Progs {
		switch p.Type {
		case elf.PT_INTERP:
			return 0, false // dynamically linked: the C library has its own
		case elf.PT_TLS:
			tls = p
		}
	}
	if tls == nil {
		return 0, false
	}
	syms, err := m.elf.Symbols()
	if err != nil {
		return 0, false
	}
	roundUp := func(n, align uint64) uint64 { return (n + max(align, 1) - 1) / max(align, 1) * max(align, 1) }
	for _, s := range syms {
		if elf.ST_TYPE(s.Info) != elf.STT_TLS || s.Section == elf.SHN_UNDEF || s.Name != name {
			continue
		}
		switch m.elf.Machine {
		case elf.EM_X86_64:
			return int64(s.Value) - int64(roundUp(tls.Memsz, tls.Align)), true
		case elf.EM_AARCH64:
			return int64(roundUp(16, tls.Align) + s.Value), true
		}
	}
	return 0, false
}

// PureGo reports whether the module is a program linked by Go's own
// linker alone: no dynamic linker, no C library, no TLS segment (no cgo).
func (m *Module) PureGo() bool {
	if m.elf == nil || !m.BuiltByGo() {
		return false
	}
	for _, p := range m.elf.Progs {
		if p.Type == elf.PT_INTERP || p.Type == elf.PT_TLS {
			return false
		}
	}
	return true
}

// GoGOffset returns the offset from the thread pointer of the slot where
// a pure Go program keeps each thread's current g on x86-64: -8, where
// its settls puts the thread pointer just past m.tls[0]. False for
// anything else (a cgo program's slot is placed by the external linker).
func (m *Module) GoGOffset() (int64, bool) {
	if m.elf == nil || m.elf.Machine != elf.EM_X86_64 || !m.PureGo() {
		return 0, false
	}
	return -8, true
}
