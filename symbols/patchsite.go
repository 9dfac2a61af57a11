package symbols

import (
	"bytes"
	"cmp"
	"debug/elf"
	"fmt"
	"slices"
	"sort"
	"strings"

	"golang.org/x/arch/x86/x86asm"
)

// PatchKind is what the compiler put at a function's tracing site.
type PatchKind int

const (
	// McountCall is a call to mcount (gcc -pg, after the prologue) or to
	// __fentry__ (-pg -mfentry, at the entry).
	McountCall PatchKind = iota + 1
	// FentryNop is the 5-byte nop 0f 1f 44 00 00 that -pg -mfentry
	// -mnop-mcount leaves at the entry instead of call __fentry__.
	FentryNop
	// PatchableNops are the nops of -fpatchable-function-entry=N[,M]: N
	// bytes of them, M of which come before the function's symbol.
	PatchableNops
)

func (k PatchKind) String() string {
	switch k {
	case McountCall:
		return "mcount"
	case FentryNop:
		return "fentry-nop"
	case PatchableNops:
		return "patchable"
	}
	return fmt.Sprintf("PatchKind(%d)", int(k))
}

// PatchSite is a place the compiler set aside for tracing a function, the
// kind the kernel's dynamic ftrace patches.
type PatchSite struct {
	Addr uint64 // link-time address; runtime address = Addr + Mapped.Bias
	Kind PatchKind
	// Func is the function containing the site or, for nops placed before
	// a symbol, the function that follows; "" when no symbol fits.
	Func   string
	Offset int64 // Addr minus Func's address: negative before the symbol
}

// Sections in which compilers record tracing sites as arrays of addresses.
const (
	mcountLocSection = "__mcount_loc"                 // -mrecord-mcount
	patchableSection = "__patchable_function_entries" // -fpatchable-function-entry
)

// fentryNop is the nop gcc -mnop-mcount puts in place of call __fentry__
// (nopl 0x0(%rax,%rax,1)), the one the kernel's ftrace uses too.
var fentryNop = []byte{0x0f, 0x1f, 0x44, 0x00, 0x00}

var endbr64 = []byte{0xf3, 0x0f, 0x1e, 0xfa}

// maxNopsBefore bounds the distance from a site outside every function to
// the function it is taken to precede (-fpatchable-function-entry=N,M puts
// M bytes of nops right before the symbol).
const maxNopsBefore = 64

// PatchSites returns the tracing sites the compiler left in the module's
// functions, sorted by address. They come from the __mcount_loc
// (-mrecord-mcount) and __patchable_function_entries sections; when the
// file has neither but was built with -pg, from a look at the first
// instructions of each function for an fentry nop or a call of mcount or
// __fentry__ (x86-64 only). A shared library built with -pg -mnop-mcount
// and without -mrecord-mcount shows no sign of it and has no sites.
// Unreadable or malformed data yields fewer sites, not an error. The
// result is computed once.
//
//	for _, s := range mod.PatchSites() { fmt.Printf("%s %s@%+#x\n", s.Func, s.Kind, s.Offset) }
func (m *Module) PatchSites() []PatchSite { return slices.Clone(m.sites()) }

// sites is PatchSites, found once, not copied.
func (m *Module) sites() []PatchSite {
	m.sitesOnce.Do(func() { m.patchSites = m.findPatchSites() })
	return m.patchSites
}

func (m *Module) findPatchSites() []PatchSite {
	var sites []PatchSite
	if secs := m.recordSections(); len(secs) > 0 {
		sites = m.recordedSites(secs)
	} else if m.profilingBuild() {
		switch m.elf.Machine {
		case elf.EM_X86_64:
			sites = m.scanProfilingSites()
		case elf.EM_AARCH64:
			sites = m.scanA64ProfilingSites()
		}
	}
	if len(sites) == 0 {
		return nil
	}
	// __mcount_loc came first: its kind wins for an address in both.
	slices.SortStableFunc(sites, func(a, b PatchSite) int { return cmp.Compare(a.Addr, b.Addr) })
	sites = slices.CompactFunc(sites, func(a, b PatchSite) bool { return a.Addr == b.Addr })
	m.buildTables()
	for i := range sites {
		m.placeSite(&sites[i])
	}
	return sites
}

// recordSections returns the sections that record sites, __mcount_loc
// ones first.
func (m *Module) recordSections() []*elf.Section {
	var secs []*elf.Section
	for _, name := range []string{mcountLocSection, patchableSection} {
		for _, s := range m.elf.Sections {
			if s.Name == name && s.Type == elf.SHT_PROGBITS {
				secs = append(secs, s)
			}
		}
	}
	return secs
}

// recordedSites reads the address arrays of secs. In a PIE the linker may
// leave the array zero and put each address in the addend of a RELATIVE
// relocation, which is what the dynamic loader writes there.
func (m *Module) recordedSites(secs []*elf.Section) []PatchSite {
	size := uint64(8)
	if m.elf.Class == elf.ELFCLASS32 {
		size = 4
	}
	relocated := m.relocatedWords(secs)
	var sites []PatchSite
	for _, s := range secs {
		data, err := s.Data()
		if err != nil {
			continue
		}
		for off := uint64(0); off+size <= uint64(len(data)); off += size {
			addr, ok := relocated[s.Addr+off]
			if !ok {
				if size == 8 {
					addr = m.elf.ByteOrder.Uint64(data[off:])
				} else {
					addr = uint64(m.elf.ByteOrder.Uint32(data[off:]))
				}
			}
			if addr == 0 {
				continue // a site in code the linker dropped
			}
			kind := PatchableNops
			if s.Name == mcountLocSection {
				kind = m.mcountKind(addr)
			}
			sites = append(sites, PatchSite{Addr: addr, Kind: kind})
		}
	}
	return sites
}

// mcountKind tells a recorded fentry nop from a call of mcount/__fentry__.
func (m *Module) mcountKind(addr uint64) PatchKind {
	if m.elf.Machine == elf.EM_X86_64 {
		if code, err := m.ReadCode(addr, uint64(len(fentryNop))); err == nil && bytes.Equal(code, fentryNop) {
			return FentryNop
		}
	}
	return McountCall
}

// placeSite names the function a site belongs to: the one containing it,
// else the one right after it.
func (m *Module) placeSite(s *PatchSite) {
	if fn, ok := containing(m.funcs, s.Addr); ok {
		s.Func, s.Offset = fn.Name, int64(s.Addr-fn.Addr)
		return
	}
	i := sort.Search(len(m.funcs), func(i int) bool { return m.funcs[i].Addr > s.Addr })
	if i < len(m.funcs) && m.funcs[i].Addr-s.Addr <= maxNopsBefore {
		fn := m.funcs[i]
		s.Func, s.Offset = fn.Name, -int64(fn.Addr-s.Addr)
	}
}

// profilingMarks records how the -pg runtime's symbols appear in a
// module. An executable built with -pg references them (gcrt1.o calls
// __monstartup and _mcleanup, the code calls mcount or __fentry__), or
// defines them when linked statically; libc defines and exports them
// without being built with -pg.
type profilingMarks struct {
	referenced bool // undefined in a symbol table
	defined    bool // defined in .symtab
	exported   bool // defined in .dynsym
}

var profilingNames = map[string]bool{
	"mcount": true, "_mcount": true, "__fentry__": true, "_mcleanup": true, "__monstartup": true,
}

// profilingCallees are the functions that -pg code calls.
var profilingCallees = []string{"mcount", "_mcount", "__fentry__"}

func (p *profilingMarks) note(s elf.Symbol, dynamic bool) {
	if len(s.Name) < len("mcount") || s.Name[0] != '_' && s.Name[0] != 'm' {
		return // the common case, without a map look-up
	}
	name, _, _ := strings.Cut(s.Name, "@") // .symtab spells references mcount@GLIBC_2.2.5
	switch {
	case !profilingNames[name]:
	case s.Section == elf.SHN_UNDEF:
		p.referenced = true
	case dynamic:
		p.exported = true
	default:
		p.defined = true
	}
}

func (m *Module) profilingBuild() bool {
	if m.elf != nil && m.elf.Section(".symtab") == nil {
		if dynsym, err := m.dynamicSymbols(); err == nil {
			// A stripped file's -pg code calls mcount through its
			// imports: its dynamic symbols say so without the tables of
			// its debug file (libc's: ~4 ms of a --calls start).
			var p profilingMarks
			for _, s := range dynsym {
				p.note(s, true)
			}
			return p.referenced
		}
	}
	m.LoadSymbols()
	p := m.profiling
	return p.referenced || p.defined && !p.exported
}

// Limits of the look at a function's start for an mcount call: gcc puts
// it after the frame set-up (endbr64; push %rbp; mov %rsp,%rbp; up to five
// pushes of callee-saved registers; sub $N,%rsp: 10 instructions with the
// call, 36 bytes at most).
const (
	scanBytes = 48
	scanInsns = 12
)

// profilingScan finds the -pg sites of an x86-64 module without recorded ones.
type profilingScan struct {
	m       *Module
	targets map[uint64]bool // call targets known to be, or not be, mcount (or a stub of it)
	slots   map[uint64]bool // GOT slots holding the address of mcount
}

func (m *Module) scanProfilingSites() []PatchSite {
	sc := &profilingScan{m: m, targets: make(map[uint64]bool), slots: make(map[uint64]bool)}
	for _, name := range profilingCallees {
		if s, ok := m.Lookup(name); ok {
			sc.targets[s.Addr] = true
		}
	}
	dynsyms, _ := m.dynamicSymbols()
	for _, r := range m.dynRelocs() {
		t := elf.R_X86_64(r.typ)
		if (t == elf.R_X86_64_GLOB_DAT || t == elf.R_X86_64_JMP_SLOT) && r.sym > 0 && int(r.sym) <= len(dynsyms) &&
			slices.Contains(profilingCallees, dynsyms[r.sym-1].Name) {
			sc.slots[r.off] = true
		}
	}
	m.buildTables()
	var sites []PatchSite
	for _, fn := range m.funcs {
		if site, ok := sc.function(fn); ok {
			sites = append(sites, site)
		}
	}
	return sites
}

// function looks for an fentry nop at the entry (after an endbr64), or a
// call of mcount among the first instructions up to any branch.
func (sc *profilingScan) function(fn Symbol) (PatchSite, bool) {
	code, err := sc.m.ReadCode(fn.Addr, min(fn.Size, scanBytes))
	if err != nil {
		return PatchSite{}, false
	}
	off := 0
	if bytes.HasPrefix(code, endbr64) {
		off = len(endbr64)
	}
	if bytes.HasPrefix(code[off:], fentryNop) {
		return PatchSite{Addr: fn.Addr + uint64(off), Kind: FentryNop}, true
	}
	for range scanInsns {
		inst, err := x86asm.Decode(code[off:], 64)
		if err != nil || inst.Op == 0 {
			break
		}
		addr := fn.Addr + uint64(off)
		next := addr + uint64(inst.Len)
		if inst.Op == x86asm.CALL {
			if sc.callsMcount(inst.Args[0], next) {
				return PatchSite{Addr: addr, Kind: McountCall}, true
			}
			break
		}
		if changesFlow(&inst) {
			break
		}
		off += inst.Len
	}
	return PatchSite{}, false
}

func changesFlow(inst *x86asm.Inst) bool {
	switch inst.Op {
	case x86asm.JMP, x86asm.RET, x86asm.LRET, x86asm.UD2, x86asm.HLT, x86asm.INT, x86asm.SYSCALL:
		return true
	}
	_, rel := inst.Args[0].(x86asm.Rel) // jcc, loop, jrcxz
	return rel
}

// callsMcount reports whether a call with operand arg, ending at next,
// goes to mcount: directly, through its PLT stub, or through its GOT slot
// (call *mcount@GOTPCREL(%rip), as gcc emits under -pg, -fno-plt or PIC).
func (sc *profilingScan) callsMcount(arg x86asm.Arg, next uint64) bool {
	switch a := arg.(type) {
	case x86asm.Rel:
		return sc.isMcount(next + uint64(int64(a)))
	case x86asm.Mem:
		return a.Base == x86asm.RIP && a.Index == 0 && sc.slots[next+uint64(a.Disp)]
	}
	return false
}

// isMcount reports whether target is mcount or a stub jumping through its
// GOT slot (.plt, .plt.sec, .plt.got alike: an optional endbr64, then
// jmp *slot(%rip)).
func (sc *profilingScan) isMcount(target uint64) bool {
	if yes, seen := sc.targets[target]; seen {
		return yes
	}
	yes := false
	if code, err := sc.m.ReadCode(target, 16); err == nil {
		off := 0
		if bytes.HasPrefix(code, endbr64) {
			off = len(endbr64)
		}
		if inst, err := x86asm.Decode(code[off:], 64); err == nil && inst.Op == x86asm.JMP {
			next := target + uint64(off+inst.Len)
			if a, ok := inst.Args[0].(x86asm.Mem); ok && a.Base == x86asm.RIP && a.Index == 0 {
				yes = sc.slots[next+uint64(a.Disp)]
			}
		}
	}
	sc.targets[target] = yes
	return yes
}

// dynReloc is one entry of a dynamic relocation section (.rela.dyn, .rela.plt).
type dynReloc struct {
	off    uint64
	typ    uint32
	sym    uint32 // index into .dynsym; 0 for none
	addend int64
}

const rela64Size = 24

// dynRelocs returns the entries of the module's loaded RELA sections
// (64-bit files only).
func (m *Module) dynRelocs() []dynReloc {
	if m.elf.Class != elf.ELFCLASS64 {
		return nil
	}
	var out []dynReloc
	for _, s := range m.elf.Sections {
		if s.Type != elf.SHT_RELA || s.Flags&elf.SHF_ALLOC == 0 {
			continue
		}
		data, err := s.Data()
		if err != nil {
			continue
		}
		bo := m.elf.ByteOrder
		for ; len(data) >= rela64Size; data = data[rela64Size:] {
			info := bo.Uint64(data[8:])
			out = append(out, dynReloc{
				off:    bo.Uint64(data),
				typ:    uint32(elf.R_TYPE64(info)),
				sym:    elf.R_SYM64(info),
				addend: int64(bo.Uint64(data[16:])),
			})
		}
	}
	return out
}

// relocatedWords returns, for each word of secs that a dynamic relocation
// sets to an address known at link time, that address.
func (m *Module) relocatedWords(secs []*elf.Section) map[uint64]uint64 {
	in := func(off uint64) bool {
		return slices.ContainsFunc(secs, func(s *elf.Section) bool { return off >= s.Addr && off-s.Addr < s.Size })
	}
	var dynsyms []elf.Symbol
	words := make(map[uint64]uint64)
	for _, r := range m.dynRelocs() {
		if !in(r.off) {
			continue
		}
		relative, absolute := m.addressReloc(r.typ)
		switch {
		case relative:
			words[r.off] = uint64(r.addend)
		case absolute && r.sym > 0:
			if dynsyms == nil {
				dynsyms, _ = m.dynamicSymbols()
			}
			if int(r.sym) <= len(dynsyms) && dynsyms[r.sym-1].Section != elf.SHN_UNDEF {
				words[r.off] = dynsyms[r.sym-1].Value + uint64(r.addend)
			}
		}
	}
	return words
}

// addressReloc classifies a relocation type: base + addend (relative), or
// symbol + addend (absolute).
func (m *Module) addressReloc(typ uint32) (relative, absolute bool) {
	switch m.elf.Machine {
	case elf.EM_X86_64:
		t := elf.R_X86_64(typ)
		return t == elf.R_X86_64_RELATIVE, t == elf.R_X86_64_64
	case elf.EM_AARCH64:
		t := elf.R_AARCH64(typ)
		return t == elf.R_AARCH64_RELATIVE, t == elf.R_AARCH64_ABS64
	}
	return false, false
}

// FentryCallEnd returns where, in function fn, the call of __fentry__ it
// starts with ends (-pg -mfentry: after an endbr64 at most), as an offset
// from fn; 0 if it does not start with one. Past it, the function is as
// at its entry, its return address at [sp]: a hook there leaves the call
// to __fentry__ the real caller to read (gprof's arcs).
func (m *Module) FentryCallEnd(fn Symbol) int {
	sites := m.sites()
	if len(sites) == 0 { // (most programs: no -pg)
		return 0
	}
	code, err := m.ReadCode(fn.Addr, min(fn.Size, 16))
	if err != nil {
		return 0
	}
	off := 0
	if bytes.HasPrefix(code, endbr64) {
		off = len(endbr64)
	}
	if !mcountSiteAt(sites, fn.Addr+uint64(off)) {
		return 0
	}
	inst, err := x86asm.Decode(code[off:], 64)
	if err != nil || inst.Op != x86asm.CALL {
		return 0
	}
	return off + inst.Len
}

// McountCallEnd returns where, in function fn, the call of mcount that
// plain -pg puts after the prologue ends, as an offset from fn, and
// where sp was at the entry, as a distance above the frame pointer; 0
// if fn has none, or another prologue than this function knows. Past it
// the function is as at its entry seen through its frame: a hook there
// leaves mcount the real caller to read (gprof's arcs).
//
// On x86-64 the prologue must be `push %rbp; mov %rsp,%rbp` (after an
// endbr64 at most) and then only pushes and immediate adjustments of
// sp: the return address is at 8(%rbp), sp was %rbp+8, the arguments'
// registers are as they came (the pushes and mcount keep them). On arm64
// see a64McountCallEnd: the return address is at [x29, #8], signed
// with key 'A' or 'B' and sp at the entry as the modifier if key is not
// 0, and the arguments' registers are lost (mcount's argument is in x0).
func (m *Module) McountCallEnd(fn Symbol) (end int, above uint64, key byte) {
	sites := m.sites()
	if len(sites) == 0 {
		return 0, 0, 0
	}
	switch m.elf.Machine {
	case elf.EM_AARCH64:
		return m.a64McountCallEnd(fn, sites)
	case elf.EM_X86_64:
		if end := m.x86McountCallEnd(fn, sites); end > 0 {
			return end, 8, 0
		}
	}
	return 0, 0, 0
}

// CallsMcount reports whether function fn has a call of mcount (plain
// -pg's, after the prologue): hooked at its entry, not past that call,
// its gprof arcs are lost (mcount reads the trampoline as its caller).
func (m *Module) CallsMcount(fn Symbol) bool {
	sites := m.sites()
	i, _ := slices.BinarySearchFunc(sites, fn.Addr, func(s PatchSite, a uint64) int { return cmp.Compare(s.Addr, a) })
	for ; i < len(sites) && sites[i].Addr < fn.Addr+max(fn.Size, 1); i++ {
		if sites[i].Kind == McountCall {
			return true
		}
	}
	return false
}

// mcountSiteAt reports whether sites (sorted) have a call of mcount at
// link address addr.
func mcountSiteAt(sites []PatchSite, addr uint64) bool {
	i, found := slices.BinarySearchFunc(sites, addr, func(s PatchSite, a uint64) int { return cmp.Compare(s.Addr, a) })
	return found && sites[i].Kind == McountCall
}

func (m *Module) x86McountCallEnd(fn Symbol, sites []PatchSite) int {
	code, err := m.ReadCode(fn.Addr, min(fn.Size, scanBytes))
	if err != nil {
		return 0
	}
	off := 0
	if bytes.HasPrefix(code, endbr64) {
		off = len(endbr64)
	}
	if !bytes.HasPrefix(code[off:], framePrologue) {
		return 0
	}
	off += len(framePrologue)
	for range scanInsns {
		inst, err := x86asm.Decode(code[off:], 64)
		if err != nil {
			return 0
		}
		if inst.Op == x86asm.CALL {
			if !mcountSiteAt(sites, fn.Addr+uint64(off)) {
				return 0
			}
			return off + inst.Len
		}
		if !keepsFrame(&inst) {
			return 0
		}
		off += inst.Len
	}
	return 0
}

// framePrologue is `push %rbp; mov %rsp,%rbp`.
var framePrologue = []byte{0x55, 0x48, 0x89, 0xe5}

// keepsFrame reports whether inst, in a prologue after the frame pointer
// is set, leaves %rbp and every register but %rsp as they were: a push,
// or sp moved by an immediate (sub, add, and for alignment).
func keepsFrame(inst *x86asm.Inst) bool {
	switch inst.Op {
	case x86asm.PUSH:
		_, reg := inst.Args[0].(x86asm.Reg)
		return reg
	case x86asm.SUB, x86asm.ADD, x86asm.AND:
		_, imm := inst.Args[1].(x86asm.Imm)
		return inst.Args[0] == x86asm.RSP && imm
	}
	return false
}
