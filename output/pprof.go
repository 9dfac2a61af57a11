package output

import (
	"bufio"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/google/pprof/profile"

	"github.com/probedbg/probe/fetch"
)

// Pprof writes a profile.proto that go tool pprof reads (-top, -http):
// samples of calls and nanoseconds per call stack of traced functions,
// the nanoseconds being the stack's self time, so that pprof's flat
// column is a function's own time and cum its time with its callees.
// A probe hit that carries a stack (the stacktrace action) is one call of
// that stack. The profile is written at the first Flush after Finish;
// comments until then become the profile's comments.
type Pprof struct {
	w        *bufio.Writer
	stacks   *callStacks
	hits     map[string]int64 // probe hit stacks, joined with stackSep, innermost first
	comments []string
	first    int64
	finished bool
	written  bool
}

// NewPprof returns a pprof writer.
func NewPprof(w io.Writer) *Pprof {
	return &Pprof{w: bufio.NewWriter(w), stacks: newCallStacks(), hits: map[string]int64{}}
}

func (p *Pprof) Write(r *Record) error {
	if p.first == 0 || r.Time < p.first {
		p.first = r.Time
	}
	if r.Kind == KindProbe {
		p.stacks.last = max(p.stacks.last, r.Time)
		if len(r.Stack) > 0 {
			frames := make([]string, len(r.Stack))
			for i, f := range r.Stack {
				frames[i] = fetch.FrameFunc(f)
			}
			p.hits[strings.Join(frames, stackSep)]++
		}
		return nil
	}
	p.stacks.add(r)
	return nil
}

func (p *Pprof) Comment(s string) error {
	p.comments = append(p.comments, s)
	return nil
}

func (p *Pprof) Finish() error {
	p.stacks.finish()
	p.finished = true
	return nil
}

func (p *Pprof) Flush() error {
	if !p.finished || p.written {
		return nil
	}
	p.written = true
	prof := p.profile()
	if err := prof.CheckValid(); err != nil {
		return err
	}
	if err := prof.Write(p.w); err != nil {
		return err
	}
	return p.w.Flush()
}

// profile builds the profile: one Function and Location per symbol.
func (p *Pprof) profile() *profile.Profile {
	// What pprof shows by default: the time of calls when there are
	// calls, else the probe hits (whose time is 0).
	def := "time"
	if len(p.stacks.stats) == 0 {
		def = "calls"
	}
	prof := &profile.Profile{
		SampleType:        []*profile.ValueType{{Type: "calls", Unit: "count"}, {Type: "time", Unit: "nanoseconds"}},
		DefaultSampleType: def,
		PeriodType:        &profile.ValueType{Type: "time", Unit: "nanoseconds"},
		Period:            1,
		// TimeNanos is left out: pprof reads it as wall time, and records
		// carry CLOCK_MONOTONIC.
		DurationNanos: max(p.stacks.last-p.first, 0),
		Comments:      p.comments,
	}
	locs := map[string]*profile.Location{}
	location := func(fn string) *profile.Location {
		if l := locs[fn]; l != nil {
			return l
		}
		f := &profile.Function{ID: uint64(len(prof.Function) + 1), Name: fn, SystemName: fn}
		prof.Function = append(prof.Function, f)
		l := &profile.Location{ID: uint64(len(prof.Location) + 1), Line: []profile.Line{{Function: f}}}
		prof.Location = append(prof.Location, l)
		locs[fn] = l
		return l
	}
	for _, key := range p.stacks.sorted() {
		frames := strings.Split(key, stackSep)
		s := &profile.Sample{Value: []int64{p.stacks.stats[key].calls, p.stacks.stats[key].self}}
		for i := len(frames) - 1; i >= 0; i-- { // pprof wants the leaf first
			s.Location = append(s.Location, location(frames[i]))
		}
		prof.Sample = append(prof.Sample, s)
	}
	for _, key := range slices.Sorted(maps.Keys(p.hits)) {
		s := &profile.Sample{Value: []int64{p.hits[key], 0}}
		for _, fn := range strings.Split(key, stackSep) {
			s.Location = append(s.Location, location(fn))
		}
		prof.Sample = append(prof.Sample, s)
	}
	return prof
}
