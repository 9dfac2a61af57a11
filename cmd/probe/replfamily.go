package main

// The processes of a REPL session: the PIDs given, those --comm found,
// and with -f the children followed, as they are at each command. A
// command that changes what is installed goes to each of them; an add
// goes into all of them or into none.

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/probedbg/probe/fetch"
	"github.com/probedbg/probe/probe"
)

// family is the processes root traces (probe.Tracer.Processes), and
// the hits of their probes.
type family struct {
	root *probe.Tracer
	hits *hitCounts
}

// hitCounts keeps for each event (GROUP/EVENT) a probe of every count of
// hits it has had in any process: the hits of a process gone stay
// counted. One count may serve several processes (probe.SharesHits).
type hitCounts struct {
	mu sync.Mutex
	of map[string][]*probe.Probe
}

// note keeps the counts of ps not kept yet.
func (h *hitCounts) note(ps ...*probe.Probe) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, p := range ps {
		kept := h.of[p.Name()]
		if !slices.ContainsFunc(kept, p.SharesHits) {
			h.of[p.Name()] = append(kept, p)
		}
	}
}

// total is the hits of every count of event name.
func (h *hitCounts) total(name string) uint64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return totalHits(h.of[name])
}

// forget drops the counts of event name, deleted: a probe added again
// under its name starts from none.
func (h *hitCounts) forget(name string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.of, name)
}

// probeTarget is where addProbe and addTracer install: one Tracer, or
// every process of a family.
type probeTarget interface {
	AddSpec(s *fetch.Spec, h probe.Handler) (*probe.Probe, error)
	Remove(p *probe.Probe) error
	TraceFunctions(opts probe.FuncTraceOptions) (*probe.FuncTraceInfo, error)
}

// errNoProcess: every process of the session has exited.
var errNoProcess = errors.New("no traced process left")

// each calls fn with the Tracer of every process traced, those forked
// while it goes too, until fn fails: its error, naming the process when
// several are traced. A process that has exited meanwhile is passed
// over (its exit is said apart). It reports whether any process was
// there.
func (f family) each(fn func(tr *probe.Tracer) error) (bool, error) {
	seen := map[int]bool{}
	for {
		procs := f.root.Processes()
		fresh := false
		for _, tr := range procs {
			if seen[tr.Pid()] {
				continue
			}
			seen[tr.Pid()], fresh = true, true
			if err := fn(tr); err != nil && !errors.Is(err, probe.ErrExited) {
				if len(procs) > 1 || len(seen) > 1 {
					err = fmt.Errorf("pid %d: %w", tr.Pid(), err)
				}
				return true, err
			}
		}
		if !fresh {
			return len(seen) > 0, nil
		}
	}
}

// AddSpec installs s in every process, or in none: where it fails, it
// is taken out again of those it went into, and the error says so. It
// returns the first process's probe.
func (f family) AddSpec(s *fetch.Spec, h probe.Handler) (*probe.Probe, error) {
	name := s.Group + "/" + s.Event
	var first *probe.Probe
	var in []int // the pids it went into
	_, err := f.each(func(tr *probe.Tracer) error {
		if first != nil && probeNamed(tr, name) != nil {
			return nil // a child forked meanwhile has it from its parent
		}
		p, err := tr.AddSpec(s, h)
		if err != nil {
			return err
		}
		if first == nil {
			first = p
		}
		f.hits.note(p)
		in = append(in, tr.Pid())
		return nil
	})
	if err != nil {
		if len(in) > 0 {
			f.remove(name)
			err = fmt.Errorf("%w; taken out again of %s", err, pidList(in))
		}
		return nil, err
	}
	if first == nil {
		return nil, errNoProcess
	}
	return first, nil
}

// Remove takes p's event out of every process.
func (f family) Remove(p *probe.Probe) error {
	_, err := f.remove(p.Name())
	return err
}

// remove takes the probe named name (GROUP/EVENT) out of every process
// that has it; an error in one does not keep it in the others. hits are
// those it had in all, processes gone included.
func (f family) remove(name string) (hits uint64, err error) {
	var errs []error
	f.each(func(tr *probe.Tracer) error {
		p := probeNamed(tr, name)
		if p == nil {
			return nil
		}
		f.hits.note(p)
		if err := tr.Remove(p); err != nil && !errors.Is(err, probe.ErrExited) {
			errs = append(errs, fmt.Errorf("pid %d: %w", tr.Pid(), err))
		}
		return nil
	})
	hits = f.hits.total(name)
	f.hits.forget(name)
	return hits, errors.Join(errs...)
}

// setEnabled turns the probe named name on or off in every process.
func (f family) setEnabled(name string, on bool) {
	f.each(func(tr *probe.Tracer) error {
		if p := probeNamed(tr, name); p != nil {
			p.SetEnabled(on)
		}
		return nil
	})
}

// TraceFunctions starts the function tracer in every process, or in
// none. The first process's info is returned: what the trace's notes
// say.
func (f family) TraceFunctions(opts probe.FuncTraceOptions) (*probe.FuncTraceInfo, error) {
	var first *probe.FuncTraceInfo
	var in []int
	_, err := f.each(func(tr *probe.Tracer) error {
		info, err := tr.TraceFunctions(opts)
		if err != nil {
			return err
		}
		if first == nil {
			first = info
		}
		in = append(in, tr.Pid())
		return nil
	})
	if err != nil {
		if len(in) > 0 {
			f.StopTracingFunctions()
			err = fmt.Errorf("%w; stopped again in %s", err, pidList(in))
		}
		return nil, err
	}
	if first == nil {
		return nil, errNoProcess
	}
	return first, nil
}

// StopTracingFunctions stops the function tracer of every process.
func (f family) StopTracingFunctions() error {
	var errs []error
	f.each(func(tr *probe.Tracer) error {
		if err := tr.StopTracingFunctions(); err != nil && !errors.Is(err, probe.ErrExited) {
			errs = append(errs, fmt.Errorf("pid %d: %w", tr.Pid(), err))
		}
		return nil
	})
	return errors.Join(errs...)
}

// processProbes are one process's probes by GROUP/EVENT.
type processProbes struct {
	pid    int
	probes map[string]*probe.Probe
}

// probes lists every process's probes, the first process's first.
func (f family) probes() []processProbes {
	var all []processProbes
	f.each(func(tr *probe.Tracer) error {
		pp := processProbes{pid: tr.Pid(), probes: map[string]*probe.Probe{}}
		for _, p := range tr.Probes() {
			pp.probes[p.Name()] = p
			f.hits.note(p)
		}
		all = append(all, pp)
		return nil
	})
	return all
}

// names are the GROUP/EVENT names of every process's probes, sorted.
func names(all []processProbes) []string {
	var ns []string
	for _, pp := range all {
		for name := range pp.probes {
			ns = append(ns, name)
		}
	}
	slices.Sort(ns)
	return slices.Compact(ns)
}

// copies are the processes' probes named name, one for each count of
// hits (a fork child shares its parent's probe, an adopted process the
// count of the first's), with the pids that count there.
func copies(all []processProbes, name string) (ps []*probe.Probe, pids [][]int) {
	for _, pp := range all {
		p := pp.probes[name]
		if p == nil {
			continue
		}
		if i := slices.IndexFunc(ps, p.SharesHits); i >= 0 {
			pids[i] = append(pids[i], pp.pid)
			continue
		}
		ps, pids = append(ps, p), append(pids, []int{pp.pid})
	}
	return ps, pids
}

// totalHits are the hits of every copy of a probe.
func totalHits(ps []*probe.Probe) uint64 {
	var n uint64
	for _, p := range ps {
		n += p.Hits()
	}
	return n
}

func probeNamed(tr *probe.Tracer, name string) *probe.Probe {
	for _, p := range tr.Probes() {
		if p.Name() == name {
			return p
		}
	}
	return nil
}

// pidList is "pid 12" or "pids 12, 13".
func pidList(pids []int) string {
	s := make([]string, len(pids))
	for i, pid := range pids {
		s[i] = fmt.Sprint(pid)
	}
	if len(pids) == 1 {
		return "pid " + s[0]
	}
	return "pids " + strings.Join(s, ", ")
}
