package probe

import (
	"cmp"
	"errors"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"github.com/probedbg/probe/fetch"
	"github.com/probedbg/probe/tracee"
)

// Error injection, as the kernel's override_return (fail_function) does
// it for kprobes: an o: probe at a function's entry makes the calls its
// filter and FailAttr pick return Retval at once, with Errno in the
// thread's errno, and the function never runs:
//
//	o:libc:malloc $retval=0 if size > 1048576
//	o:read $retval=-1 errno=EINTR
//
// The return is what the function's `ret` would do: the return address
// popped (x86-64) or taken from the link register (arm64), the value in
// the result register. Only at a C function's entry, where the calling
// convention says where the return address and the result are and the
// callee has touched nothing yet; not on Go functions, whose results the
// caller reads from registers or stack slots by two ABIs and whose
// skipped body would leave the runtime's deferred calls and stack maps
// out of step (not implemented).
//
// The function's parameters are fields of the probe (named as --args
// names them, from DWARF or the table of prototypes), so a filter can
// pick calls by them; the probe's event, printed for each injected
// failure, shows them with the value returned.

// overrideStops is why every probe at an o: probe's function stops the
// thread.
const overrideStops = "an o: probe may make the call return at once"

// overrideState is an o: probe's compiled parameters and its choice of
// failures.
type overrideState struct {
	fetch.Override
	fn      *funcArgs // the function's parameters, its first fields; nil: none known
	raw     uint64    // a system call's: its result (syscallResult)
	nParams int
	calls   uint64 // that passed the filter (fault_attr's count)
	failed  atomic.Uint64
	rng     *rand.Rand
	fields  []fetch.Field // scratch: what the handler gets
}

func newOverrideState(o *fetch.Override, event string) *overrideState {
	// The seed and the event name: probes of one run choose apart.
	h := fnv.New64a()
	h.Write([]byte(event))
	return &overrideState{Override: *o, rng: rand.New(rand.NewPCG(o.Fail.Seed, h.Sum64()))}
}

// fail reports whether this call, which passed the filter, fails, as the
// kernel's should_fail decides: times left, then the interval, then the
// probability.
func (s *overrideState) fail() bool {
	a := &s.Fail
	if a.Times >= 0 && s.failed.Load() >= uint64(a.Times) {
		return false
	}
	s.calls++
	if a.Interval > 1 && s.calls%a.Interval != 0 {
		return false
	}
	if a.Probability < 100 && s.rng.Float64()*100 >= a.Probability {
		return false
	}
	s.failed.Add(1)
	return true
}

// Overridden returns how many calls an o: probe made fail (0 for other
// probes).
func (p *Probe) Overridden() uint64 {
	if p.override == nil {
		return 0
	}
	return p.override.failed.Load()
}

// compileOverride checks that o: probe p goes on a C function's entry r
// and compiles its fields: the function's parameters, then its own
// fetch-args, with its filter over both.
func (t *Tracer) compileOverride(p *Probe, r resolved) error {
	switch {
	case !p.Spec.Override.HasRetval:
		return badInput(fmt.Errorf("%s: an o: probe on a function needs $retval=VALUE: what the function returns instead", p.Spec.Loc))
	case r.sym.Name == "" || r.addr != r.sym.Addr+r.module.Bias:
		return badInput(fmt.Errorf("%s: an o: probe must be on a function's entry", r.where))
	case isGo(r.module):
		return badInput(fmt.Errorf("%s: o: probes on Go functions are not supported: a Go caller reads results by Go's ABIs, and a skipped Go body leaves its deferred calls and the runtime's stack maps out of step", r.where))
	}
	if p.Spec.Override.Errno != 0 {
		if _, err := t.errnoOffset(); err != nil {
			return badInput(fmt.Errorf("errno=%s: %w", fetch.ErrnoName(p.Spec.Override.Errno), err))
		}
	}
	st := newOverrideState(p.Spec.Override, p.Event)
	st.fn = compileFuncArgs(r.module, r.sym.Name, r.addr, r.module != t.space.Main())
	var params []string
	if st.fn != nil {
		params = st.fn.specs
	}
	st.nParams = len(params)
	env := t.compileEnv(p, r, r.addr)
	if st.fn != nil {
		own := env.DWARF
		env.DWARF = func(expr string) (fetch.DwarfVar, error) {
			if v := st.fn.vars[expr]; v != nil {
				return dwarfVar{v}, nil
			}
			if own == nil {
				return nil, fmt.Errorf("%s: no DWARF", expr)
			}
			return own(expr)
		}
	}
	args, err := fetch.Compile(append(params, p.Spec.Args...), env)
	if err != nil {
		return err
	}
	p.args, p.override = args, st
	return nil
}

// fieldNames are the fields an o: probe's events show after its
// fetch-args.
func (o *overrideState) fieldNames() []string {
	if o.Errno != 0 {
		return []string{"retval", "errno"}
	}
	return []string{"retval"}
}

// override runs the o: probes of site s at a thread's stop there
// (regs: its registers, pc at s): the first whose filter and FailAttr
// pick this call makes it return at once, its handler told. true: regs
// are the thread's at its caller, to be written before it resumes.
func (t *Tracer) override(tid int, regs *unix.PtraceRegs, s *site, hit *Hit) bool {
	p, vals := t.pickOverride(s.overrides, hit)
	if p == nil {
		return false
	}
	o := p.override
	if o.Errno != 0 {
		if err := t.setErrno(tid, regs, o.Errno); err != nil {
			t.note("%s: errno not set: %v", p.Name(), err)
		}
	}
	if err := returnNow(regs, t.proc, o.Retval); err != nil {
		t.note("%s: the call runs: %v", p.Name(), err)
		return false
	}
	t.tellOverride(p, vals, hit, cmp.Or(p.shownAt, s.where))
	return true
}

// pickOverride returns the first enabled o: probe of probes whose filter
// and FailAttr pick the call at hit, and the fields it fetched; nil when
// none does. Each probe asked counts a hit.
func (t *Tracer) pickOverride(probes []*Probe, hit *Hit) (*Probe, []fetch.Field) {
	for _, p := range probes {
		if p.override == nil || !p.enabled.Load() {
			continue
		}
		p.hits.Add(1)
		vals := p.args.Fetch(t.envFor(hit), t.scratch.fields[:0])
		t.scratch.fields = vals
		if p.args.Keep(vals) && p.override.fail() {
			return p, vals
		}
	}
	return nil, nil
}

// tellOverride hands o: probe p's handler the call it made fail at hit
// (vals: the fields it fetched), shown at where.
func (t *Tracer) tellOverride(p *Probe, vals []fetch.Field, hit *Hit, where string) {
	if p.handler.Pre == nil {
		return
	}
	o := p.override
	o.fields = o.shown(vals, o.fields[:0])
	hit.Probe, hit.Where, hit.Fields = p, where, o.fields
	p.handler.Pre(hit)
	hit.Fields = nil
}

// shown is what an injected call's event shows: the parameters as
// --args shows them, the probe's own fetch-args, the value returned and
// the errno.
func (o *overrideState) shown(vals, dst []fetch.Field) []fetch.Field {
	if o.fn != nil {
		dst = o.fn.show(vals[:o.nParams], dst)
	}
	dst = append(dst, vals[o.nParams:]...)
	dst = append(dst, fetch.Field{Name: "retval", Value: fetch.UintValue(fetch.TypeS64, o.Retval)})
	if o.Errno != 0 {
		dst = append(dst, fetch.Field{Name: "errno", Value: fetch.DwarfValue(fetch.ErrnoName(o.Errno))})
	}
	return dst
}

// A system call's o: probe (o:sys_NAME) is strace's --inject: at the
// syscall-entry stop of a call its filter and FailAttr pick, the kernel
// is told to run no call (number -1), and at the exit stop the thread
// gets the result: -ERRNO with errno=, which the C library's wrapper
// turns into -1 and errno, and Go's syscall package into an Errno; else
// $retval as it is. It needs no C library and works on any program, Go's
// too.

// syscallResult is the raw result an o: probe on a system call gives.
func syscallResult(o *fetch.Override) (uint64, error) {
	switch {
	case o.Errno != 0 && o.HasRetval && int64(o.Retval) != -1:
		return 0, fmt.Errorf("$retval=%d with errno=%s: a system call that fails returns -1 and sets errno", int64(o.Retval), fetch.ErrnoName(o.Errno))
	case o.Errno != 0:
		o.Retval, o.HasRetval = ^uint64(0), true // (as the C library returns it)
		return uint64(-int64(o.Errno)), nil
	case o.HasRetval:
		return o.Retval, nil
	}
	return 0, errors.New("an o: probe on a system call needs errno=ERRNO or $retval=VALUE")
}

// overrideSyscall runs the o: probes of the system call thread tid
// enters (regs: its registers): the first that picks this call skips
// it, and its result is set at the exit stop (settleSkipped).
func (t *Tracer) overrideSyscall(tid int, regs *unix.PtraceRegs, probes []*Probe, hit *Hit) {
	p, vals := t.pickOverride(probes, hit)
	if p == nil {
		return
	}
	nr := int(tracee.SyscallNr(regs))
	if err := t.proc.SkipSyscall(tid, regs); err != nil {
		t.note("%s: the system call runs: %v", p.Name(), err)
		return
	}
	if t.inject.skipped == nil {
		t.inject.skipped = map[int]skippedCall{}
	}
	t.inject.skipped[tid] = skippedCall{nr: nr, result: p.override.raw}
	t.tellOverride(p, vals, hit, p.Where)
}

// skippedCall is a system call an o: probe skipped: its number (the
// registers say -1 once skipped, on x86-64) and the result it gets.
type skippedCall struct {
	nr     int
	result uint64
}

// settleSkipped gives thread tid, at the exit stop of a system call an
// o: probe skipped, the result the probe chose, and returns the call's
// number; else -1.
func (t *Tracer) settleSkipped(tid int, regs *unix.PtraceRegs) int {
	c, ok := t.inject.skipped[tid]
	if !ok {
		return -1
	}
	delete(t.inject.skipped, tid)
	tracee.SetResult(regs, c.result)
	t.proc.SetRegs(tid, regs)
	return c.nr
}
