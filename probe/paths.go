package probe

import (
	"cmp"
	"maps"
	"slices"
)

// Paths: whether each probe's hits are taken in the tracee or with a
// stop, and why, as -v says.

// Path says how p's hits are taken: in the tracee (inProcess), or with a
// stop, and then why not in the tracee; in the tracee, why is
// "counted in the tracee" for a probe whose hits make no record (tally.go).
func (p *Probe) Path() (inProcess bool, why string) {
	p.pathMu.Lock()
	defer p.pathMu.Unlock()
	return p.inProcess, p.trapWhy
}

// path says whether st's hits record in the tracee, or else why not.
func (st *site) path() (inProcess bool, why string) {
	if st.opt != nil && st.opt.record != nil {
		if st.opt.record.tallies != nil {
			return true, "counted in the tracee"
		}
		return true, ""
	}
	if len(st.overrides) > 0 {
		return false, overrideStops
	}
	return false, cmp.Or(st.trapWhy, "not jump-optimised")
}

// notePaths records, for each probe at sites, whether it records in the
// tracee or traps, and why.
func notePaths(sites ...*site) {
	for _, st := range sites {
		rec, why := st.path()
		for _, p := range slices.Concat(st.probes, st.returns, st.retInsns, st.overrides) {
			p.pathMu.Lock()
			p.inProcess, p.trapWhy = rec, why
			p.pathMu.Unlock()
		}
	}
}

// FuncPaths says how the function tracer's entries are taken (read it
// after Ready): how many functions record in the tracee, of those the
// ones hooked other than at their first instruction, by where (ways:
// past -mfentry's call of __fentry__, past plain -pg's of mcount), and
// those hooked at the entry before a call of mcount, and
// how many stop the thread, by why. As the jumps were placed: a program
// that has ended since still has its answer.
func (t *Tracer) FuncPaths() (inProcess int, ways, stops map[string]int) {
	t.jumps.funcPaths.mu.Lock()
	defer t.jumps.funcPaths.mu.Unlock()
	return t.jumps.funcPaths.in, maps.Clone(t.jumps.funcPaths.ways), maps.Clone(t.jumps.funcPaths.stops)
}

// FuncStops names the function tracer's functions that stop the
// thread, by why, each list sorted (read it after Ready): -v says which
// they are, for a user who wonders why a function is slower to trace.
func (t *Tracer) FuncStops() map[string][]string {
	t.jumps.funcPaths.mu.Lock()
	defer t.jumps.funcPaths.mu.Unlock()
	return maps.Clone(t.jumps.funcPaths.stopping)
}

// hookedWay is where a function tracer's site is in its function, if
// not at its first instruction, or, at the first instruction of a
// function that calls mcount after it, that it is before that call
// (gmon.out loses the function's arcs).
func (st *site) hookedWay() string {
	switch {
	case st.frame:
		return "past the call of mcount"
	case st.beforeMcount:
		return "at the entry, before the call of mcount"
	case st.module != nil && st.addr != st.sym.Addr+st.module.Bias:
		return "past the call of __fentry__"
	}
	return ""
}

// noteFuncPaths keeps what FuncPaths says, once the jumps are placed.
func (t *Tracer) noteFuncPaths() {
	in, ways, stops, stopping := 0, map[string]int{}, map[string]int{}, map[string][]string{}
	for _, st := range t.sites {
		if st.fn == nil {
			continue
		}
		if rec, why := st.path(); !rec {
			stops[why]++
			stopping[why] = append(stopping[why], st.fn.name)
			continue
		}
		in++
		if way := st.hookedWay(); way != "" && !st.fn.isGo {
			ways[way]++
		}
	}
	t.jumps.funcPaths.mu.Lock()
	for _, names := range stopping {
		slices.Sort(names)
	}
	t.jumps.funcPaths.in, t.jumps.funcPaths.ways, t.jumps.funcPaths.stops, t.jumps.funcPaths.stopping = in, ways, stops, stopping
	t.jumps.funcPaths.mu.Unlock()
}
