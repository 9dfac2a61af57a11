package output

import (
	"bufio"
	"cmp"
	"fmt"
	"io"
	"math"
	"slices"
)

// FuncStat is what a Profile knows of one function.
type FuncStat struct {
	Func   string
	Hits   uint64  // calls entered
	Calls  uint64  // calls seen returning: the average and Stddev are over these
	Time   int64   // time inside the function, ns: a recursive call's time is counted once, in its outermost call
	Self   int64   // time in the function itself, not in traced callees, ns
	Sum    int64   // the durations of the calls that returned, added up, ns
	Stddev float64 // sample standard deviation of the durations, ns
}

// Avg is Time over the calls that returned, truncated as the kernel
// does: Time/Hit when no return was lost (the kernel's avg). For a
// recursive function, whose Time is counted once in its outermost call,
// it is that time shared by all its calls, so that the columns agree;
// 0 if no call returned.
func (s FuncStat) Avg() int64 {
	if s.Calls == 0 {
		return 0
	}
	return s.Time / int64(s.Calls)
}

// Profile aggregates function tracer records into ftrace's function
// profile (trace_stat/function0), with the standard deviation in place of
// the kernel's variance and a self time:
//
//	Function                               Hit    Time            Avg             Stddev          Self
//	--------                               ---    ----            ---             ------          ----
//	work                                  1000    1234.567 us     1.234 us        0.123 us        1000.000 us
//
// The table is written by Finish.
type Profile struct {
	w        *bufio.Writer
	funcs    map[string]*funcStat
	lanes    map[int64][]openCall // per lane, the calls open, by depth
	active   map[laneFunc]int     // calls open per lane and function: recursion
	comments []string             // held back to go under the table
	finished bool
}

// openCall is a call not yet returned.
type openCall struct {
	fn       *funcStat
	children int64 // time spent in its traced callees
}

// funcStat accumulates a FuncStat; the durations' spread is kept with
// Welford's method, which neither overflows nor cancels as sums of
// squares of nanoseconds would.
type funcStat struct {
	FuncStat
	mean, m2 float64
}

type laneFunc struct {
	lane int64
	fn   *funcStat
}

// NewProfile returns a writer of the function profile.
func NewProfile(w io.Writer) *Profile {
	return &Profile{w: bufio.NewWriter(w), funcs: map[string]*funcStat{}, lanes: map[int64][]openCall{}, active: map[laneFunc]int{}}
}

func (p *Profile) Write(r *Record) error {
	if r.Kind == KindProbe {
		return nil
	}
	// The open calls' stack is indexed by depth; pad it should the tracer
	// have left out a level, so that a child's time goes to its parent.
	open := p.lanes[r.Lane]
	for len(open) < r.Depth {
		open = append(open, openCall{})
	}
	s := p.stat(r.Func)
	switch r.Kind {
	case KindEntry:
		s.Hits++
		p.active[laneFunc{r.Lane, s}]++
		open = append(open[:r.Depth], openCall{fn: s})
	case KindReturn:
		d := r.Time - r.EntryTime
		var children int64
		if r.Depth < len(open) {
			children = open[r.Depth].children
		}
		p.close(r.Lane, open[r.Depth:])
		open = open[:r.Depth]
		if n := len(open); n > 0 {
			open[n-1].children += d
		}
		s.Calls++
		s.Sum += d
		s.Self += d - children
		if p.active[laneFunc{r.Lane, s}] == 0 {
			// The outermost call of a recursion holds the others' time.
			s.Time += d
		}
		delta := float64(d) - s.mean
		s.mean += delta / float64(s.Calls)
		s.m2 += delta * (float64(d) - s.mean)
	case KindLost:
		// Its duration is unknown: its time stays in its caller's self.
		p.close(r.Lane, open[r.Depth:])
		open = open[:r.Depth]
	}
	if len(open) == 0 {
		delete(p.lanes, r.Lane) // goroutines come and go
	} else {
		p.lanes[r.Lane] = open
	}
	return nil
}

// close forgets calls that are over.
func (p *Profile) close(lane int64, calls []openCall) {
	for _, c := range calls {
		if c.fn == nil {
			continue
		}
		k := laneFunc{lane, c.fn}
		if p.active[k]--; p.active[k] <= 0 {
			delete(p.active, k)
		}
	}
}

func (p *Profile) stat(fn string) *funcStat {
	s := p.funcs[fn]
	if s == nil {
		s = &funcStat{FuncStat: FuncStat{Func: fn}}
		p.funcs[fn] = s
	}
	return s
}

// Stats returns the statistics so far, in table order: by total time,
// longest first, then by name.
func (p *Profile) Stats() []FuncStat {
	stats := make([]FuncStat, 0, len(p.funcs))
	for _, s := range p.funcs {
		st := s.FuncStat
		if st.Calls > 1 {
			st.Stddev = math.Sqrt(s.m2 / float64(st.Calls-1))
		}
		stats = append(stats, st)
	}
	slices.SortFunc(stats, func(a, b FuncStat) int {
		return cmp.Or(cmp.Compare(b.Time, a.Time), cmp.Compare(a.Func, b.Func))
	})
	return stats
}

// Comment holds a comment back until the table is written: it is about
// the trace the table sums up.
func (p *Profile) Comment(s string) error {
	if !p.finished {
		p.comments = append(p.comments, s)
		return nil
	}
	_, err := fmt.Fprintf(p.w, "# %s\n", s)
	return err
}

// Flush writes out what is buffered; the table waits for Finish.
func (p *Profile) Flush() error { return p.w.Flush() }

// Finish writes the table, then the comments held back.
func (p *Profile) Finish() error {
	if p.finished {
		return p.Flush()
	}
	p.finished = true
	stats := p.Stats()
	// The kernel cuts names at 30 characters; C++ and Go names are longer
	// and must stay whole to be told apart.
	width := 30
	for _, s := range stats {
		width = max(width, len(s.Func))
	}
	fmt.Fprintf(p.w, "# tracer: profile\n")
	fmt.Fprintf(p.w, "  %-*s  %10s    %-12s    %-12s    %-12s    %s\n", width, "Function", "Hit", "Time", "Avg", "Stddev", "Self")
	fmt.Fprintf(p.w, "  %-*s  %10s    %-12s    %-12s    %-12s    %s\n", width, "--------", "---", "----", "---", "------", "----")
	var line []byte
	for _, s := range stats {
		line = fmt.Appendf(line[:0], "  %-*s  %10d", width, s.Func, s.Hits)
		for _, d := range [...]int64{s.Time, s.Avg(), int64(math.Round(s.Stddev)), s.Self} {
			line = appendDuration(append(line, "    "...), d)
		}
		line = append(line, '\n')
		p.w.Write(line)
	}
	for _, c := range p.comments {
		fmt.Fprintf(p.w, "# %s\n", c)
	}
	p.comments = nil
	return p.Flush()
}
