package symbols

import (
	"bytes"
	"cmp"
	"debug/elf"
	"encoding/binary"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/go-delve/delve/pkg/dwarf/frame"
)

// CallerRule says how to find a function's caller at one pc, from the
// call frame information: the canonical frame address (CFA) is a
// register plus an offset, and the return address and the caller's
// frame pointer are saved at offsets from it (on arm64 the return address
// may still be in the link register). It covers what compilers emit;
// anything else (a CFA expression, as in PLT entries) is reported as no
// rule, and the caller falls back to frame pointers.
type CallerRule struct {
	CFAFromFP bool  // the CFA is fp+CFAOffset (rbp, x29); otherwise sp+CFAOffset
	CFAOffset int64 // added to the register
	RetInLR   bool  // arm64: the return address is in x30, not saved yet
	RetOffset int64 // else it is at CFA+RetOffset
	FPSaved   bool  // the caller's frame pointer is at CFA+FPOffset; otherwise it is unchanged
	FPOffset  int64
	Outermost bool // the return address is undefined: pc is in the first frame (_start, a thread's start)
}

// cfiCache is a module's parsed .eh_frame and .debug_frame, at link
// addresses, and the rules already worked out per pc: a stack trace asks
// for the same return addresses again and again.
type cfiCache struct {
	once  sync.Once
	fdes  frame.FrameDescriptionEntries
	mu    sync.Mutex
	rules map[uint64]cfiRule
	saved map[uint64]savedReturn // ReturnSaved's answers, by entry
	// exported are the addresses of the functions the module exports
	// (CallEntry), found once.
	exportedOnce sync.Once
	exported     map[uint64]bool
}

type savedReturn struct {
	off int64
	ok  bool
}

type cfiRule struct {
	CallerRule
	ok bool
}

// CallerRule returns the unwind rule at runtime address pc of this
// mapping, and false when the module has no usable rule for pc. Safe
// from any goroutine.
func (m *Mapped) CallerRule(pc uint64) (CallerRule, bool) {
	return m.Module.callerRule(pc - m.Bias)
}

func (m *Module) callerRule(link uint64) (CallerRule, bool) {
	c := &m.cfi
	fdes := m.frameEntries()
	c.mu.Lock()
	defer c.mu.Unlock()
	if r, ok := c.rules[link]; ok {
		return r.CallerRule, r.ok
	}
	r := ruleAt(fdes, link)
	if c.rules == nil {
		c.rules = make(map[uint64]cfiRule)
	}
	c.rules[link] = r
	return r.CallerRule, r.ok
}

// parseCFI reads .eh_frame (always in the loaded file: it is what C++
// exceptions unwind with, so -O2 code without frame pointers has it)
// and .debug_frame when the file has one (Go binaries, -g builds).
// A section that does not parse is skipped: no rule, frame pointers.
func (m *Module) parseCFI() (fdes frame.FrameDescriptionEntries) {
	if m.elf == nil {
		return nil
	}
	defer func() {
		if recover() != nil { // delve's parser on malformed input
			fdes = nil
		}
	}()
	if s := m.elf.Section(".eh_frame"); s != nil && s.Type != elf.SHT_NOBITS {
		if data, err := s.Data(); err == nil {
			if fe, err := frame.Parse(withoutBKey(data, m.elf.ByteOrder), m.elf.ByteOrder, 0, 8, s.Addr); err == nil {
				fdes = fdes.Append(fe)
			}
		}
	}
	if s := m.elf.Section(".debug_frame"); s != nil && s.Type != elf.SHT_NOBITS {
		if data, err := s.Data(); err == nil {
			if fe, err := frame.Parse(data, m.elf.ByteOrder, 0, 8, 0); err == nil {
				fdes = fdes.Append(fe)
			}
		}
	}
	seen := map[*frame.CommonInformationEntry]bool{}
	for _, fde := range fdes {
		fde.Instructions = withoutRAState(fde.Instructions)
		if c := fde.CIE; c != nil && !seen[c] {
			seen[c] = true
			c.InitialInstructions = withoutRAState(c.InitialInstructions)
		}
	}
	return fdes
}

// withoutBKey is .eh_frame data with each CIE's augmentation 'B' made
// 'S', in a copy (or data itself if none has one). 'B' says the frames
// of the CIE's functions sign their return address with key B (gcc's
// .cfi_b_key_frame, -mbranch-protection=pac-ret+b-key); delve's parser
// does not know it and gave up on the whole section, and such a
// program had no CFI at all: no return address put back at a detach
// (TestPointerAuthPgDetachUnderLoad/fentry-pg-pacb: SIGSEGV at the
// first). 'S' (a signal frame) has no data either, and delve skips it;
// which key signs is read from the code (Mapped.ReturnKey).
func withoutBKey(data []byte, order binary.ByteOrder) []byte {
	out := data
	for i := 0; i+8 <= len(data); {
		n, at := uint64(order.Uint32(data[i:])), i+4 // the length, and where what it counts starts
		idLen := 4
		switch n {
		case 0:
			return out // the terminator
		case 0xffffffff:
			if at+8 > len(data) {
				return out
			}
			n, at, idLen = order.Uint64(data[at:]), at+8, 8
		}
		end := at + int(min(n, uint64(len(data))))
		if end > len(data) || end < at+idLen+1 {
			return out
		}
		if id := data[at : at+idLen]; bytes.Count(id, []byte{0}) == idLen { // a CIE: its id 0
			aug := at + idLen + 1 // past the version
			for j := aug; j < end && data[j] != 0; j++ {
				if data[j] == 'B' {
					if &out[0] == &data[0] {
						out = slices.Clone(data)
					}
					out[j] = 'S'
				}
			}
		}
		i = end
	}
	return out
}

// negateRAState is DW_CFA_AARCH64_negate_ra_state (GNU_window_save's
// number, which only SPARC has otherwise): from there on, the return
// address is saved signed (paciasp). delve's parser does not know it and
// gives up on the frame; the unwind strips signatures anyway, so here it
// becomes a nop.
const negateRAState = 0x2d

// withoutRAState is CFA instructions ins with every negate_ra_state made
// DW_CFA_nop, in a copy. It walks the instructions by their operands; at
// one it does not know it leaves the rest as they are.
func withoutRAState(ins []byte) []byte {
	if !bytes.Contains(ins, []byte{negateRAState}) {
		return ins
	}
	out := slices.Clone(ins)
	uleb := func(i int) int { // past a LEB128 at i
		for i < len(out) && out[i]&0x80 != 0 {
			i++
		}
		return i + 1
	}
	block := func(i int) int { // past a LEB128 length and its bytes
		n, j := uint64(0), 0
		for ; i < len(out); i++ {
			n |= uint64(out[i]&0x7f) << (7 * j)
			j++
			if out[i]&0x80 == 0 {
				break
			}
		}
		return i + 1 + int(n)
	}
	for i := 0; i < len(out); {
		op := out[i]
		i++
		switch {
		case op&0xc0 == 0x40, op&0xc0 == 0xc0: // advance_loc, restore: operand in the opcode
		case op&0xc0 == 0x80: // offset
			i = uleb(i)
		case op == negateRAState:
			out[i-1] = 0 // DW_CFA_nop
		case op == 0x00, op == 0x0a, op == 0x0b: // nop, remember_state, restore_state
		case op == 0x02, op == 0x03, op == 0x04: // advance_loc1, 2, 4
			i += 1 << (op - 2)
		case op == 0x06, op == 0x07, op == 0x08, op == 0x0d, op == 0x0e, op == 0x13, op == 0x2e:
			i = uleb(i) // one LEB128 operand
		case op == 0x05, op == 0x09, op == 0x0c, op == 0x11, op == 0x12, op == 0x14, op == 0x15, op == 0x2f:
			i = uleb(uleb(i)) // two
		case op == 0x0f: // def_cfa_expression
			i = block(i)
		case op == 0x10, op == 0x16: // expression, val_expression
			i = block(uleb(i))
		default:
			return out // set_loc and the unknown: their length is not known here
		}
	}
	return out
}

func ruleAt(fdes frame.FrameDescriptionEntries, pc uint64) (r cfiRule) {
	defer func() {
		if recover() != nil {
			r = cfiRule{}
		}
	}()
	fde, err := fdes.FDEForPC(pc)
	if err != nil {
		return cfiRule{}
	}
	fc, err := fde.EstablishFrame(pc)
	if err != nil || fc.CFA.Rule != frame.RuleCFA {
		return cfiRule{}
	}
	switch fc.CFA.Reg {
	case dwarfSP:
	case dwarfFP:
		r.CFAFromFP = true
	default:
		return cfiRule{}
	}
	r.CFAOffset = fc.CFA.Offset
	ret, ok := fc.Regs[fc.RetAddrReg]
	if ok && ret.Rule == frame.RuleUndefined {
		r.Outermost, r.ok = true, true
		return r
	}
	switch {
	case linkRegister && (!ok || ret.Rule == frame.RuleSameVal) && fc.RetAddrReg == dwarfLR:
		r.RetInLR = true
	case !ok || ret.Rule != frame.RuleOffset:
		return cfiRule{}
	default:
		r.RetOffset = ret.Offset
	}
	if bp, ok := fc.Regs[dwarfFP]; ok {
		switch bp.Rule {
		case frame.RuleOffset:
			r.FPSaved, r.FPOffset = true, bp.Offset
		case frame.RuleSameVal, frame.RuleUndefined:
		default:
			return cfiRule{}
		}
	}
	r.ok = true
	return r
}

// ReturnSaved returns where the function entered at runtime address
// entry (of size bytes, 0 if not known) keeps its return address once it
// has saved it, from the CFI: at CFA+off, the CFA being sp at the entry
// on arm64. false if the function never saves it (a leaf) or has no
// rule. The whole function is searched, not its first instructions: gcc
// shrink-wraps, saving x30 only on the paths that call (a throw's, past
// the fast path's ret), and an unwinder then reads it there.
func (m *Mapped) ReturnSaved(entry, size uint64) (off int64, ok bool) {
	return m.Module.returnSaved(entry-m.Bias, size)
}

func (m *Module) returnSaved(link, size uint64) (int64, bool) {
	c := &m.cfi
	c.mu.Lock()
	r, known := c.saved[link]
	c.mu.Unlock()
	if known {
		return r.off, r.ok
	}
	if size == 0 {
		size = maxPrologue
	}
	for pc := link; pc < link+min(size, maxFunction); pc += 4 {
		rule, found := m.callerRule(pc)
		if !found || rule.Outermost || rule.CFAFromFP {
			break
		}
		if !rule.RetInLR {
			r = savedReturn{rule.RetOffset, true}
			break
		}
	}
	c.mu.Lock()
	if c.saved == nil {
		c.saved = make(map[uint64]savedReturn)
	}
	c.saved[link] = r
	c.mu.Unlock()
	return r.off, r.ok
}

// ReturnKey is the key with which the arm64 function entered at runtime
// address entry (of size bytes, 0 if not known) signs its return address
// before it saves it: 'A' if a paciasp is among its instructions, 'B' a
// pacibsp (shrink-wrapped, not always the first); 0 if neither. A signed
// address can equal the unsigned one (its code 0): the word saved alone
// cannot tell.
func (m *Mapped) ReturnKey(entry, size uint64) byte {
	link := entry - m.Bias
	if size == 0 {
		size = maxPrologue
	}
	code, err := m.ReadCode(link, min(size, maxFunction))
	if err != nil {
		return 0
	}
	for i := 0; i+4 <= len(code); i += 4 {
		switch binary.LittleEndian.Uint32(code[i:]) {
		case 0xd503233f: // paciasp
			return 'A'
		case 0xd503237f: // pacibsp
			return 'B'
		}
	}
	return 0
}

// maxPrologue bounds how far into a function of unknown size
// ReturnSaved looks for the saving of the return address; maxFunction
// how far into any.
const (
	maxPrologue = 64
	maxFunction = 64 << 10
)

// CallEntry reports whether the function sym of this module is entered by
// a call, so that on its first instruction its return address is where a
// call leaves it (x86-64: at [rsp]; arm64: in x30); if not, why says why.
// The toolchain's names say it for _start (its [sp] is argc) and gcc's
// cold parts (f.cold, reached by a jump from f); for the rest the CFI at
// its address decides: a called function's CFA there is the entry's
// (entryRule), where a part of a function jumped to with its parent's
// frame in place has its parent's CFA, and the first frame of a thread
// has no return address at all. A function the module exports is
// entered by calls (other modules call it through their PLT or GOT),
// without a look at the CFI: parsing libc's took ~4 ms of a 47 ms
// `probe run --calls 'libc:*'` of sqlite3.
func (m *Module) CallEntry(sym Symbol) (ok bool, why string) {
	switch name := sym.Name; {
	case name == "_start":
		return false, "not entered by a call: the entry point, whose [sp] is argc, not a return address"
	case strings.HasSuffix(name, ".cold") || strings.Contains(name, ".cold.") || strings.HasSuffix(name, "[clone .cold]"):
		// gcc only jumps to these, even where no frame is left and
		// [sp] happens to hold the parent's return address.
		return false, "not entered by a call: a cold part of another function, jumped to"
	case m.exportsFunction(sym.Addr):
		return true, ""
	}
	if r, found := m.callerRule(sym.Addr); found {
		switch {
		case r.Outermost:
			return false, "not entered by a call: its call frame information says it has no return address (the first frame)"
		case r != entryRule:
			return false, fmt.Sprintf("not entered by a call: at its entry the return address is not where a call leaves it (CFA %s+%d, as in a part of another function jumped to)",
				map[bool]string{true: "fp", false: "sp"}[r.CFAFromFP], r.CFAOffset)
		}
	}
	return true, ""
}

// exportsFunction reports whether the module exports a function at link
// address addr: a defined, global or weak, default-visibility function
// of .dynsym.
func (m *Module) exportsFunction(addr uint64) bool {
	c := &m.cfi
	c.exportedOnce.Do(func() {
		c.exported = map[uint64]bool{}
		exported := func(section elf.SectionIndex, info, other byte) bool {
			typ, bind := elf.ST_TYPE(info), elf.ST_BIND(info)
			return section != elf.SHN_UNDEF && (typ == elf.STT_FUNC || typ == sttGNUIFunc) &&
				(bind == elf.STB_GLOBAL || bind == elf.STB_WEAK) && elf.ST_VISIBILITY(other) == elf.STV_DEFAULT
		}
		// .dynsym's bytes where they can be read: libc's dynamic symbols
		// decoded were ~1.5 ms of a --calls start.
		if m.elf != nil && m.dynRaw.every(m.elf, func(s rawSym, _ []byte) {
			if exported(s.section, s.info, s.other) {
				c.exported[s.value] = true
			}
		}) {
			return
		}
		dynsym, _ := m.dynamicSymbols()
		for _, s := range dynsym {
			if exported(s.Section, s.Info, s.Other) {
				c.exported[s.Value] = true
			}
		}
	})
	return c.exported[addr]
}

// FunctionCovering is, for a link address no symbol covers (a static
// function of a stripped file), the function the call frame information
// says it is in: an FDE's range, named by its address ("0x4f2080").
func (m *Module) FunctionCovering(link uint64) (Symbol, bool) { return m.fdeFunction(link, "") }

// fdeFunction is the FDE covering link as a function named name (its
// address for ""), or false.
func (m *Module) fdeFunction(link uint64, name string) (Symbol, bool) {
	fde, err := m.frameEntries().FDEForPC(link)
	if err != nil || fde == nil || fde.End() <= fde.Begin() {
		return Symbol{}, false
	}
	return Symbol{Name: cmp.Or(name, fmt.Sprintf("%#x", fde.Begin())), Addr: fde.Begin(), Size: fde.End() - fde.Begin(), Func: true}, true
}

// frameEntries are the module's FDEs, parsed once.
func (m *Module) frameEntries() frame.FrameDescriptionEntries {
	c := &m.cfi
	c.once.Do(func() { c.fdes = m.parseCFI() })
	return c.fdes
}
