// Package probe places kprobe-style probes in a Linux user process through
// ptrace: the register_kprobe of user space.
//
//	t, err := probe.Attach(pid) // or probe.Launch(argv, nil)
//	if err != nil {
//		log.Fatal(err)
//	}
//	defer t.Detach()
//	p, err := t.Add("p:malloc size=%di:u64", probe.Handler{
//		Pre:  func(h *probe.Hit) { fmt.Println(h.Tid, h.Fields) /* h.Reg("di"), h.Mem ... */ },
//		Post: func(h *probe.Hit) { /* after the probed instruction */ },
//	})
//	if err != nil {
//		log.Fatal(err)
//	}
//	t.Start()
//
// Handlers run on the tracer's ptrace thread while the hitting thread is
// stopped, like kprobe handlers in trap context: keep them short and hand
// heavy work to another goroutine.
package probe

import (
	"errors"
	"maps"
	"slices"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"github.com/probedbg/probe/arch"
	"github.com/probedbg/probe/fetch"
	"github.com/probedbg/probe/singlestep"
	"github.com/probedbg/probe/symbols"
	"github.com/probedbg/probe/tracee"
)

// ErrDetached is returned by calls on a Tracer that has let its process go.
var ErrDetached = errors.New("tracer detached")

// ErrExited is returned by calls on the Tracer of a process that has
// exited while others of its family are traced on (Processes).
var ErrExited = errors.New("the process has exited")

type inputError struct{ err error }

func (e *inputError) Error() string   { return e.err.Error() }
func (e *inputError) Unwrap() []error { return []error{e.err, fetch.ErrBadInput} }
func badInput(err error) error        { return &inputError{err} }

// Handler is what runs at a hit. Pre runs before the probed instruction,
// Post after it (as kprobes' pre_handler and post_handler). Either may be nil.
type Handler struct {
	Pre  func(*Hit)
	Post func(*Hit)
	// Recorded says Pre reads of its Hit only Probe, Pid, Tid, Comm,
	// Time, CPU, Where and Fields (no Reg, PC, SP, Mem or Stack), and may run
	// on another goroutine than the tracer's, any time after the hit:
	// the probe may then record in the tracee and never stop it
	// (in-process probes, inproc.go).
	Recorded bool
	// Tally, with Recorded, says Pre only counts hits and draws log2
	// histograms: the tracee may keep the counts itself (tally.go).
	Tally *Tally
	// Raw, with Recorded, says Pre does no more than print the hit: under
	// raw capture (raw.go) the records of the probe's hits may go to the
	// RawOutput as they are, and its Decoder make the hits later.
	Raw bool
}

// Hit is one thread stopped at a probe. It is valid only during the handler.
type Hit struct {
	Probe *Probe
	Pid   int
	Tid   int
	Comm  string // the thread's name
	Time  int64  // CLOCK_MONOTONIC nanoseconds
	CPU   int    // the CPU that handled the stop
	Mem   fetch.Memory
	// Where is the location as ftrace prints it: "work+0x0/0x12" for an
	// entry probe, "main+0x3c/0x80 <- work" for a return.
	Where string
	// Return is set for return-probe hits.
	Return *Return
	// Fields are the probe's fetch-args, read at this hit (nil in a
	// post-handler).
	Fields []fetch.Field

	regs   *unix.PtraceRegs // the thread's, as Reg reads them
	tracer *Tracer          // for Stack
}

// Reg returns the register %name reads (the names fetch-args accept:
// "di", "rax", "eax", "x0", "w1", "sp", "pc", ...), and whether name is
// one of the CPU's. In a post-handler it is the register after the
// probed instruction ran.
func (h *Hit) Reg(name string) (uint64, bool) {
	r, ok := arch.Host.Regs[name]
	if !ok || h.regs == nil {
		return 0, false
	}
	v := regWords(h.regs)[r.Word] >> r.Shift
	if r.Bits < 64 {
		v &= 1<<r.Bits - 1
	}
	return v, true
}

// PC returns the program counter: at an entry probe its address (a
// trap's pc past the breakpoint is taken back), in a post-handler the
// next instruction's.
func (h *Hit) PC() uint64 {
	if h.regs == nil {
		return 0
	}
	return h.regs.PC()
}

// SP returns the stack pointer.
func (h *Hit) SP() uint64 {
	if h.regs == nil {
		return 0
	}
	return tracee.SP(h.regs)
}

// Byte offsets in unix.PtraceRegs of the stack pointer, a function's
// result and its second word.
var (
	spOff      = int(arch.Host.SP) * 8
	resultOff  = int(arch.Host.Result) * 8
	result2Off = int(arch.Host.Result2) * 8
)

// Probe is one installed probe.
type Probe struct {
	Spec   *fetch.Spec
	Group  string
	Event  string
	Addr   uint64 // runtime address of the probed instruction
	Where  string // sym+0xoff/0xsize, as ftrace prints it
	Module string

	Kind fetch.Kind

	handler  Handler
	sites    []*site     // one; for a Go return probe, each RET of the function
	funcName string      // the function a return probe reports
	shownAt  string      // where its hits say they are, when not at its site's place (a Go entry, moved past the stack check)
	args     *fetch.Args // fetch-args and filter; nil when none
	// sdtArgs are an sdt: probe's fetch-args, $argN made its note's
	// (sdt.go).
	sdtArgs  []string
	override *overrideState // an o: probe's (override.go)
	captures []*symbols.Var // a return probe's DWARF names, read at entry
	enabled  atomic.Bool
	hits     *atomic.Uint64 // shared by its copies in followed programs
	syscall  int            // the system call of a syscall probe (sys_NAME)
	onEnable func()         // told of SetEnabled: syscall probes
	lib      *pendingLib    // the library it is in, when that can be unloaded (pending.go)
	pending  atomic.Bool    // waiting for its library to be loaded
	placed   atomic.Bool    // was installed at some time
	placeErr error          // why its library's last load did not install it

	pathMu    sync.Mutex // guards what Path reports
	inProcess bool
	trapWhy   string
}

// SetEnabled turns the probe's handlers on or off; a disabled probe stays
// installed (its hits cost a round trip but run nothing), as ftrace's
// per-event enable file. Safe from any goroutine and from handlers.
func (p *Probe) SetEnabled(on bool) {
	if p.enabled.Swap(on) != on && p.onEnable != nil {
		p.onEnable()
	}
}

// Enabled reports whether the probe's handlers run.
func (p *Probe) Enabled() bool { return p.enabled.Load() }

// Hits returns how many times the probe fired.
func (p *Probe) Hits() uint64 { return p.hits.Load() }

// SharesHits reports whether p and q count their hits together: one
// probe in the programs a process runs one after another (exec), or in
// the processes adopted or followed that were given it with the rest
// (Adopt, SetFollow), not added to each apart.
func (p *Probe) SharesHits(q *Probe) bool { return p.hits == q.hits }

// FieldNames returns the names of the probe's fetch-args, in the order of
// Hit.Fields.
func (p *Probe) FieldNames() []string {
	if p.override != nil {
		return append(p.args.Names(), p.override.fieldNames()...)
	}
	return p.args.Names()
}

// Name returns GROUP/EVENT.
func (p *Probe) Name() string { return p.Group + "/" + p.Event }

// site is one probed address; several probes may share it.
type site struct {
	addr     uint64
	orig     []byte // the bytes the breakpoint replaced
	insn     *singlestep.Insn
	slot     uint64   // XOL copy, for singlestep.Step instructions
	run      runMode  // how the displaced instruction runs
	probes   []*Probe // entry probes: handlers around this instruction
	returns  []*Probe // return probes of the function entered here
	retInsns []*Probe // Go return probes of a function returning by this RET
	captures []*Probe // return probes whose DWARF names are read here
	// sdtArgs are the fetch-args of an sdt: probe at this site, where its
	// note keeps the arguments elsewhere than at the probe's first site.
	sdtArgs map[*Probe]*fetch.Args
	// overrides are o: probes: after the rest, one may make the call
	// return at once (override.go).
	overrides []*Probe
	funcName  string // the function entered here (for returns)
	where     string // sym+0xoff/0xsize of addr
	post      bool   // some probe has a post-handler

	fn     *traceFunc   // the function tracer's entry of fn
	fnRet  *traceFunc   // a RET of Go function fnRet, for the function tracer
	unwind unwindAction // an unwinder's entry: hijacked returns are given back
	linker bool         // the dynamic linker's r_brk: libraries come and go (pending.go)

	module *symbols.Mapped // the module and function addr is in, for optimize
	sym    symbols.Symbol
	// frame: addr is just past plain -pg's call of mcount, after the
	// prologue (Module.McountCallEnd): the function as at its entry, seen
	// through its frame (entryView), sp there frameAbove above the frame
	// pointer, the return address there signed with key frameKey ('A',
	// 'B'; 0: unsigned) if the function signs it (arm64).
	frame      bool
	frameAbove uint64
	frameKey   byte
	// beforeMcount: addr is the entry of a function that calls mcount
	// later, which McountCallEnd refused (a prologue it cannot prove;
	// --args on arm64): mcount reads the trampoline as its caller.
	beforeMcount bool
	opt          *jumpOpt // a jmp to a detour instead of the int3 (optimize.go)
	// trapWhy is why the site's probes do not record in the tracee
	// (inproc.go), when optimizeSites found a reason.
	trapWhy string
}

// runMode is how a site's displaced instruction runs after the handlers.
type runMode uint8

const (
	// runEmulate: the tracer applies it to the registers (and stack).
	runEmulate runMode = iota
	// runBoost: from the slot, followed by a jump back; no second stop.
	// Sites with a post-handler step instead, as kprobes stops boosting.
	runBoost
	// runStep: single-stepped in the slot, then fixed up.
	runStep
)

// forkCopy is the site as a fork child's copy of the memory has it. Its
// lists are its own (appends reallocate): a probe added or removed later
// in the parent or in the child is that process's alone.
func (s *site) forkCopy() *site {
	cp := *s
	cp.probes, cp.returns, cp.retInsns = slices.Clip(s.probes), slices.Clip(s.returns), slices.Clip(s.retInsns)
	cp.captures, cp.overrides = slices.Clip(s.captures), slices.Clip(s.overrides)
	cp.sdtArgs = maps.Clone(s.sdtArgs)
	return &cp
}

// empty reports whether no probe uses the site any more.
func (s *site) empty() bool {
	return !s.hasProbes() && s.fn == nil && s.fnRet == nil && s.unwind == 0 && !s.linker
}

// probeLists are the site's probes, a list of each kind: whatever goes
// over every probe of a site goes over these.
func (s *site) probeLists() [][]*Probe {
	return [][]*Probe{s.probes, s.returns, s.retInsns, s.captures, s.overrides}
}

// hasProbes reports whether some probe is at the site.
func (s *site) hasProbes() bool {
	for _, ps := range s.probeLists() {
		if len(ps) > 0 {
			return true
		}
	}
	return false
}

// atEntry reports whether st is where a function starts as a call leaves
// it, the return address at [sp], its arguments in their registers: its
// entry, or just past -mfentry's call of __fentry__ there.
func (st *site) atEntry() bool {
	if st.module == nil || st.sym.Name == "" {
		return false
	}
	entry := st.sym.Addr + st.module.Bias
	if st.addr == entry {
		return true
	}
	end := st.module.FentryCallEnd(st.sym)
	return end > 0 && st.addr == entry+uint64(end)
}

// resolved is a location turned into an address and what is known about it.
type resolved struct {
	addr   uint64
	module *symbols.Mapped
	sym    symbols.Symbol // zero if no symbol covers the address
	where  string
	code   []byte // bytes from addr on, from the file
}
