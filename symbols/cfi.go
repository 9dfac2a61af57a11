package symbols

import (
	"debug/elf"
	"fmt"
	"strings"
	"sync"

	"github.com/go-delve/delve/pkg/dwarf/frame"
)

// DWARF register numbers of x86-64 (System V psABI, figure 3.36).
const (
	dwarfRBP = 6
	dwarfRSP = 7
)

// CallerRule says how to find a function's caller at one pc, from the
// call frame information: the canonical frame address (CFA) is a
// register plus an offset, and the return address and the caller's rbp
// are saved at offsets from it. It covers what compilers emit for
// x86-64 code; anything else (a CFA expression, as in PLT entries) is
// reported as no rule, and the caller falls back to frame pointers.
type CallerRule struct {
	CFAFromRBP bool  // the CFA is rbp+CFAOffset; otherwise rsp+CFAOffset
	CFAOffset  int64 // added to the register
	RetOffset  int64 // the return address is at CFA+RetOffset
	RBPSaved   bool  // the caller's rbp is at CFA+RBPOffset; otherwise rbp is unchanged
	RBPOffset  int64
	Outermost  bool // the return address is undefined: pc is in the first frame (_start, a thread's start)
}

// cfiCache is a module's parsed .eh_frame and .debug_frame, at link
// addresses, and the rules already worked out per pc: a stack trace asks
// for the same return addresses again and again.
type cfiCache struct {
	once  sync.Once
	fdes  frame.FrameDescriptionEntries
	mu    sync.Mutex
	rules map[uint64]cfiRule
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
	c.once.Do(func() { c.fdes = m.parseCFI() })
	c.mu.Lock()
	defer c.mu.Unlock()
	if r, ok := c.rules[link]; ok {
		return r.CallerRule, r.ok
	}
	r := ruleAt(c.fdes, link)
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
			if fe, err := frame.Parse(data, m.elf.ByteOrder, 0, 8, s.Addr); err == nil {
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
	return fdes
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
	case dwarfRSP:
	case dwarfRBP:
		r.CFAFromRBP = true
	default:
		return cfiRule{}
	}
	r.CFAOffset = fc.CFA.Offset
	ret, ok := fc.Regs[fc.RetAddrReg]
	if ok && ret.Rule == frame.RuleUndefined {
		r.Outermost, r.ok = true, true
		return r
	}
	if !ok || ret.Rule != frame.RuleOffset {
		return cfiRule{}
	}
	r.RetOffset = ret.Offset
	if bp, ok := fc.Regs[dwarfRBP]; ok {
		switch bp.Rule {
		case frame.RuleOffset:
			r.RBPSaved, r.RBPOffset = true, bp.Offset
		case frame.RuleSameVal, frame.RuleUndefined:
		default:
			return cfiRule{}
		}
	}
	r.ok = true
	return r
}

// CallEntry reports whether the function sym of this module is entered by
// a call, so that the word at [rsp] on its first instruction is its return
// address; if not, why says why. The toolchain's names say it for _start
// (its [sp] is argc) and gcc's cold parts (f.cold, reached by a jump from
// f); for the rest the CFI at its address decides: a called function's
// CFA there is rsp+8 with the return address at CFA-8, where a part of a
// function jumped to with its parent's frame in place has its parent's
// CFA, and the first frame of a thread has no return address at all.
func (m *Module) CallEntry(sym Symbol) (ok bool, why string) {
	switch name := sym.Name; {
	case name == "_start":
		return false, "not entered by a call: the entry point, whose [sp] is argc, not a return address"
	case strings.HasSuffix(name, ".cold") || strings.Contains(name, ".cold.") || strings.HasSuffix(name, "[clone .cold]"):
		// gcc only jumps to these, even where no frame is left and
		// [sp] happens to hold the parent's return address.
		return false, "not entered by a call: a cold part of another function, jumped to"
	}
	if r, found := m.callerRule(sym.Addr); found {
		switch {
		case r.Outermost:
			return false, "not entered by a call: its call frame information says it has no return address (the first frame)"
		case r.CFAFromRBP || r.CFAOffset != 8 || r.RetOffset != -8:
			return false, fmt.Sprintf("not entered by a call: at its entry the return address is not at [sp] (CFA %s+%d, as in a part of another function jumped to)",
				map[bool]string{true: "rbp", false: "rsp"}[r.CFAFromRBP], r.CFAOffset)
		}
	}
	return true, ""
}
