package symbols

import (
	"debug/elf"
	"encoding/binary"
	"maps"
	"slices"
	"strings"
	"sync"
)

// imports is what a module knows of the library functions its code calls
// through its GOT: each slot's name (its JUMP_SLOT or GLOB_DAT
// relocation's symbol), and the name each call site went through, once
// asked.
type imports struct {
	once   sync.Once
	slots  map[uint64]string
	byName map[string]uint64 // the slots by name
	mu     sync.Mutex
	at     map[uint64]string // by return address; "" for no import
	// plt: the PLT entries by the name they call, found once asked
	pltOnce sync.Once
	plt     map[string]Symbol
}

// CalledImport returns the name under which the call that returns to
// link address ret called a library: the import its PLT entry or, built
// with -fno-plt, its GOT slot is for, as ltrace names a call. A library
// may export one function under several names (glibc's strchr is index)
// and its IFUNCs may pick one implementation for several (memcpy's is
// memmove's): only the call site says which name the program used.
// False where the call before ret is not one through an import.
func (m *Module) CalledImport(ret uint64) (string, bool) {
	c := m.importTable()
	c.mu.Lock()
	defer c.mu.Unlock()
	name, ok := c.at[ret]
	if !ok {
		name = c.slots[m.calledSlot(ret)]
		if c.at == nil {
			c.at = map[uint64]string{}
		}
		c.at[ret] = name
	}
	return name, name != ""
}

// ImportSlot returns the link address of the GOT slot through which the
// module calls the imported function name: once the dynamic linker has
// bound it, it holds the function's address (for an IFUNC, the
// implementation its resolver picked). False if it has none.
func (m *Module) ImportSlot(name string) (uint64, bool) {
	slot, ok := m.importTable().byName[name]
	return slot, ok
}

// ImportNames returns the names of the library functions and objects
// the module imports through its GOT, sorted.
func (m *Module) ImportNames() []string {
	return slices.Sorted(maps.Keys(m.importTable().byName))
}

// importTable is the module's imports, their GOT slots read once: each
// slot with a JUMP_SLOT or GLOB_DAT relocation, by its symbol's name.
func (m *Module) importTable() *imports {
	c := &m.imports
	c.once.Do(func() {
		c.slots, c.byName = map[uint64]string{}, map[string]uint64{}
		if m.elf == nil {
			return
		}
		jumpSlot, ok := m.relocType(uint32(elf.R_X86_64_JMP_SLOT), uint32(elf.R_AARCH64_JUMP_SLOT))
		globDat, ok2 := m.relocType(uint32(elf.R_X86_64_GLOB_DAT), uint32(elf.R_AARCH64_GLOB_DAT))
		dynsyms, err := m.dynamicSymbols()
		if !ok || !ok2 || err != nil {
			return
		}
		for _, r := range m.dynRelocs() {
			if (r.typ == jumpSlot || r.typ == globDat) && r.sym > 0 && int(r.sym) <= len(dynsyms) {
				name, _, _ := strings.Cut(dynsyms[r.sym-1].Name, "@")
				c.slots[r.off] = name
				if _, dup := c.byName[name]; !dup {
					c.byName[name] = r.off
				}
			}
		}
	})
	return c
}

// rel32 is the signed 32-bit displacement at b, as an address offset.
func rel32(b []byte) uint64 { return uint64(int64(int32(binary.LittleEndian.Uint32(b)))) }

// adrpPage is the page arm64's adrp at link address pc loads.
func adrpPage(pc uint64, adrp uint32) uint64 {
	imm := int64(adrp>>29&3|adrp>>3&0x1ffffc) << 43 >> 31 // immhi:immlo, signed, << 12
	return pc&^0xfff + uint64(imm)
}

// calledSlot is the GOT slot through which the call before link address
// ret went, or 0: x86-64's call of a PLT entry (jmp *slot(%rip), after an
// endbr64 and a bnd in .plt.sec) or call *slot(%rip); arm64's bl of a PLT
// entry (adrp x16; ldr x17, [x16, #off], after a bti c).
func (m *Module) calledSlot(ret uint64) uint64 {
	if ret < 8 {
		return 0
	}
	code, err := m.ReadCode(ret-6, 6)
	if err != nil {
		return 0
	}
	switch m.elf.Machine {
	case elf.EM_X86_64:
		switch {
		case code[0] == 0xff && code[1] == 0x15: // call *slot(%rip)
			return ret + rel32(code[2:])
		case code[1] == 0xe8: // call rel32: a PLT entry?
			return m.stubSlot(ret + rel32(code[2:]))
		}
	case elf.EM_AARCH64:
		bl := binary.LittleEndian.Uint32(code[2:])
		if to, ok := a64BlTarget(ret-4, bl); ok {
			return m.stubSlot(to) // a PLT entry?
		}
		if bl&0xfffffc1f == 0xd63f0000 { // blr xN: loaded from a GOT slot (-fno-plt)?
			return m.gotLoad(ret-4, bl>>5&31)
		}
	}
	return 0
}

// gotLoad is the GOT slot that register n holds the address from at
// the blr at link address at, as -fno-plt code loads it: adrp xM, page;
// ldr xN, [xM, #off], a few instructions before (the arguments' set-up
// between); 0 if that is not what comes before, or another instruction
// in between writes xN.
func (m *Module) gotLoad(at uint64, n uint32) uint64 {
	const back = 8
	if at < 4*back {
		return 0
	}
	code, err := m.ReadCode(at-4*back, 4*back)
	if err != nil {
		return 0
	}
	w := func(i int) uint32 { return binary.LittleEndian.Uint32(code[4*i:]) }
	for i := back - 1; i > 0; i-- {
		insn := w(i)
		if insn&0xffc0001f == 0xf9400000|n { // ldr xN, [xM, #off]
			base := insn >> 5 & 31
			for j := i - 1; j >= 0; j-- {
				adrp := w(j)
				if adrp&0x9f00001f == 0x90000000|base {
					return adrpPage(at-4*back+uint64(4*j), adrp) + uint64(insn>>10&0xfff)*8
				}
				if adrp&31 == base {
					return 0 // (xM written in between, as far as a register field says)
				}
			}
			return 0
		}
		if insn&31 == n {
			return 0 // something else writes xN after its load (its Rd field, as most do)
		}
	}
	return 0
}

// stubSlot is the GOT slot the PLT entry at link address stub jumps
// through, or 0 if stub is no PLT entry: x86-64's jmp *slot(%rip) (after
// an endbr64 and a bnd in .plt.sec), arm64's adrp x16; ldr x17,
// [x16, #off] (after a bti c).
func (m *Module) stubSlot(stub uint64) uint64 {
	plt, err := m.ReadCode(stub, 12)
	if err != nil {
		return 0
	}
	switch m.elf.Machine {
	case elf.EM_X86_64:
		at := 0
		if string(plt[:4]) == "\xf3\x0f\x1e\xfa" { // endbr64
			at = 4
		}
		if plt[at] == 0xf2 { // bnd
			at++
		}
		if plt[at] == 0xff && plt[at+1] == 0x25 { // jmp *slot(%rip)
			return stub + uint64(at+6) + rel32(plt[at+2:])
		}
	case elf.EM_AARCH64:
		w := func(i int) uint32 { return binary.LittleEndian.Uint32(plt[4*i:]) }
		i := 0
		if w(0) == 0xd503245f { // bti c
			i = 1
		}
		adrp, ldr := w(i), w(i+1)
		if adrp&0x9f00001f != 0x90000010 || ldr&0xffc003ff != 0xf9400211 { // adrp x16; ldr x17, [x16, #off]
			return 0
		}
		return adrpPage(stub+uint64(4*i), adrp) + uint64(ldr>>10&0xfff)*8
	}
	return 0
}

// PLTEntry returns the PLT entry through which the module's code calls
// the imported function name (a 16-byte stub in .plt.sec, .plt or
// .plt.got), as a function symbol of that name: where ltrace puts its
// breakpoints. False if the module has none for it (-fno-plt code calls
// through the GOT slot itself).
func (m *Module) PLTEntry(name string) (Symbol, bool) {
	c := m.importTable()
	c.pltOnce.Do(func() {
		c.plt = map[string]Symbol{}
		for _, sec := range []string{".plt.sec", ".plt", ".plt.got"} {
			s := m.elf.Section(sec)
			if s == nil {
				continue
			}
			step := uint64(16)
			switch {
			case m.elf.Machine == elf.EM_AARCH64:
				step = 4 // (entries of 16 bytes, or more with a bti c: the first word of one that decodes)
			case sec == ".plt.got" && s.Entsize == 8:
				step = 8
			}
			for at := s.Addr; at+step <= s.Addr+s.Size; at += step {
				if n := c.slots[m.stubSlot(at)]; n != "" {
					if _, dup := c.plt[n]; !dup {
						size := step
						if m.elf.Machine == elf.EM_AARCH64 {
							size = 16
						}
						c.plt[n] = Symbol{Name: n, Addr: at, Size: size, Func: true}
					}
				}
			}
		}
	})
	sym, ok := c.plt[name]
	return sym, ok
}
