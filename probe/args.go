package probe

import (
	"errors"
	"fmt"
	"strings"

	"github.com/probedbg/probe/fetch"
	"github.com/probedbg/probe/symbols"
	"github.com/probedbg/probe/tracee"
)

// The glue between the fetch-arg compiler and the tracer: DWARF names
// compiled by the symbols package, and for return probes the values of
// DWARF names read at entry (as perf probe does), kept in the shadow frame.

// compileArgs compiles a probe's fetch-args and filter at r. capturePC is
// where a return probe's DWARF names are read (after the prologue, where
// gcc's frame-based locations are valid); 0 otherwise.
func (t *Tracer) compileArgs(p *Probe, r resolved, capturePC uint64) error {
	tokens := p.fetchTokens()
	if len(tokens) == 0 {
		return nil
	}
	pc := r.addr
	if capturePC != 0 {
		pc = capturePC
	}
	args, err := fetch.Compile(tokens, t.compileEnv(p, r, pc))
	if err != nil {
		return err
	}
	p.args = args
	return nil
}

// argsAt are p's fetch-args at site st.
func (p *Probe) argsAt(st *site) *fetch.Args {
	if a := st.sdtArgs[p]; a != nil {
		return a
	}
	return p.args
}

// fetchTokens are p's fetch-args as compiled: an sdt: probe's with its
// $argN made its note's.
func (p *Probe) fetchTokens() []string {
	if p.Spec.Loc.SDT {
		return p.sdtArgs
	}
	return p.Spec.Args
}

// compileEnv is what p's fetch-args at r compile against: symbols, and
// DWARF names read at pc.
func (t *Tracer) compileEnv(p *Probe, r resolved, pc uint64) fetch.CompileEnv {
	env := fetch.CompileEnv{
		Return: p.Kind == fetch.KindReturn,
		ResolveSymbol: func(name string) (uint64, error) {
			m, sym, err := t.space.Lookup(name)
			if err != nil {
				return 0, err
			}
			return sym.Addr + m.Bias, nil
		},
	}
	if d, err := r.module.Debug(); err == nil {
		env.DWARF = func(expr string) (fetch.DwarfVar, error) {
			if p.Kind == fetch.KindReturn && isGo(r.module) {
				return nil, errors.New("DWARF names in Go return probes are not supported yet")
			}
			v, err := d.Var(pc, expr)
			if err != nil {
				return nil, err
			}
			if p.Kind != fetch.KindReturn {
				if size, signed, ok := v.IntType(); ok {
					return dwarfIntVar{dwarfVar{v}, size, signed}, nil
				}
				return dwarfVar{v}, nil
			}
			p.captures = append(p.captures, v)
			return &capturedVar{t: t, p: p, slot: len(p.captures) - 1}, nil
		}
		env.Params = func() ([]string, error) { return d.Params(pc) }
	}
	return env
}

// dwarfVar reads a DWARF variable at the hit.
type dwarfVar struct{ v *symbols.Var }

func (d dwarfVar) Read(h *fetch.HitEnv) (uint64, string, error) {
	var fp []byte
	if h.FPRegs != nil && d.v.UsesFloat() {
		fp = h.FPRegs()
	}
	return d.v.ReadFP(h.Regs, fp, h.Mem)
}

// UsesFloat says the variable may be in an SSE register, which a record
// does not hold.
func (d dwarfVar) UsesFloat() bool { return d.v.UsesFloat() }

// readFPRegs reads the floating-point registers of t.scratch.fpTid, the thread
// of the hit being fetched; nil if it cannot.
func (t *Tracer) readFPRegs() []byte {
	if t.proc.GetFPRegs(t.scratch.fpTid, &t.scratch.fpRegs) != nil {
		return nil
	}
	return t.scratch.fpRegs[:]
}

// dwarfIntVar is a DWARF variable that is an integer (DwarfIntType): a
// filter compares it as one, and refuses a string for it.
type dwarfIntVar struct {
	dwarfVar
	size   int
	signed bool
}

func (d dwarfIntVar) IntType() (int, bool) { return d.size, d.signed }

// capturedVar is a return probe's DWARF name: its value was read at the
// function's entry into the shadow frame now returning.
type capturedVar struct {
	t    *Tracer
	p    *Probe
	slot int
}

type capturedValue struct {
	raw  uint64
	text string
	err  error
}

var errNotCaptured = errors.New("value not captured at entry")

func (c *capturedVar) Read(*fetch.HitEnv) (uint64, string, error) {
	vals := c.t.ret.returning[c.p]
	if c.slot >= len(vals) {
		return 0, "", errNotCaptured
	}
	v := vals[c.slot]
	return v.raw, v.text, v.err
}

// capture reads, at a return probe's capture site, the DWARF names of the
// probes whose frame this thread has just pushed.
func (t *Tracer) capture(tid int, s *site, hit *Hit) {
	cs := t.ret.shadow[tid]
	if cs == nil || cs.top() == nil {
		return
	}
	f := cs.top()
	for _, p := range s.captures {
		if f.site != p.sites[0] {
			continue // entered by a path that skipped the entry probe
		}
		vals := make([]capturedValue, len(p.captures))
		env := t.envFor(hit)
		for i, v := range p.captures {
			vals[i].raw, vals[i].text, vals[i].err = dwarfVar{v}.Read(env)
		}
		if f.vals == nil {
			f.vals = make(map[*Probe][]capturedValue)
		}
		f.vals[p] = vals
	}
}

// fetchScratch is reused by every stopped hit's fetch.
type fetchScratch struct {
	env    fetch.HitEnv
	fpTid  int // the thread whose FP registers readFPRegs reads
	fpRegs [tracee.FPRegsSize]byte
	fields []fetch.Field
}

// envFor is the fetch environment of a hit: a record's, replayed, or a
// stopped thread's. (Their Mem and Symbolize were set once: a method
// value made here would allocate at every hit.)
func (t *Tracer) envFor(hit *Hit) *fetch.HitEnv {
	if in := t.inproc; in != nil && hit.Mem == fetch.Memory(&in.stack) {
		in.env.Regs, in.env.Comm = hit.regs, hit.Comm
		return &in.env
	}
	t.scratch.env.Regs, t.scratch.env.Comm, t.scratch.fpTid = hit.regs, hit.Comm, hit.Tid
	return &t.scratch.env
}

// fetch evaluates p's fetch-args into hit.Fields and applies its filter.
func (t *Tracer) fetch(p *Probe, hit *Hit) bool { return t.fetchArgs(p.args, hit) }

// fetchArgs evaluates args (nil: none) into hit.Fields and applies their
// filter.
func (t *Tracer) fetchArgs(args *fetch.Args, hit *Hit) bool {
	if args == nil {
		hit.Fields = nil
		return true
	}
	t.scratch.fields = args.Fetch(t.envFor(hit), t.scratch.fields[:0])
	hit.Fields = t.scratch.fields
	return args.Keep(t.scratch.fields)
}

func (t *Tracer) symbolize(addr uint64) string {
	s := t.space.Describe(addr)
	if strings.HasPrefix(s, "0x") {
		return ""
	}
	return s
}

// captureSite is where a return probe on the function at r reads its
// DWARF names: after the prologue when the module has DWARF.
func (t *Tracer) captureSite(r resolved) (resolved, error) {
	d, err := r.module.Debug()
	if err != nil {
		return resolved{}, err
	}
	pc, err := d.AfterPrologue(r.addr)
	if err != nil {
		return resolved{}, err
	}
	if pc == r.addr {
		return r, nil
	}
	at, err := t.inFunction(r.module, r.sym, pc-r.module.Bias)
	if err != nil {
		return resolved{}, fmt.Errorf("after the prologue of %s: %w", r.sym.Name, err)
	}
	return at, nil
}
