package output

import (
	"fmt"
	"slices"

	"github.com/probedbg/probe/fetch"
)

// Selection narrows a trace after the fact, as uftrace's replay filters
// do on a recording: which threads, which stretch of time, which
// functions, how deep. The zero value keeps everything.
type Selection struct {
	// Tids keeps the records of these threads only.
	Tids []int
	// From and To keep the records in [From, To] (CLOCK_MONOTONIC ns; 0:
	// open), or with FromRelative, ToRelative, that long after the first
	// record. A call is kept or dropped whole, by its entry's time.
	From, To                 int64
	FromRelative, ToRelative bool
	// Filter keeps only calls of functions matching one of these globs
	// (as if only they had been traced: depths close up over the rest).
	Filter []string
	// Notrace drops calls of matching functions and everything under them.
	Notrace []string
	// GraphFunction keeps only calls made inside matching functions, and
	// those calls themselves.
	GraphFunction []string
	// Depth, when above 0, keeps calls at most Depth deep (after the
	// selections above).
	Depth int
}

// Active reports whether s drops anything.
func (s *Selection) Active() bool {
	return len(s.Tids) > 0 || s.From != 0 || s.To != 0 || s.FromRelative || s.ToRelative || len(s.Filter) > 0 ||
		len(s.Notrace) > 0 || len(s.GraphFunction) > 0 || s.Depth > 0
}

// Select returns a Writer that passes to w what sel keeps of a trace, its
// function records' depths counted over the calls kept.
func Select(w Writer, sel Selection) Writer {
	return &selector{w: w, sel: sel, lanes: map[int64][]selFrame{}}
}

type selector struct {
	w     Writer
	sel   Selection
	lanes map[int64][]selFrame // each call stack's open calls, by depth
}

// selFrame is an open call of a lane.
type selFrame struct {
	kept    bool // its records pass
	depth   int  // its depth among the calls kept
	hidden  bool // it or a caller is a notrace function: nothing below passes
	inGraph bool // it or a caller is a graph function
}

func (s *selector) Write(r *Record) error {
	if s.sel.FromRelative || s.sel.ToRelative {
		// The first record starts the clock.
		if s.sel.FromRelative {
			s.sel.From += r.Time
		}
		if s.sel.ToRelative {
			s.sel.To += r.Time
		}
		s.sel.FromRelative, s.sel.ToRelative = false, false
	}
	switch r.Kind {
	case KindEntry:
		stack := s.open(r.Lane, r.Depth)
		var outer selFrame
		kept := 0
		for _, f := range stack {
			if f.kept {
				kept++
			}
		}
		if len(stack) > 0 {
			outer = stack[len(stack)-1]
		}
		f := selFrame{
			hidden:  outer.hidden || globMatch(s.sel.Notrace, r.Func),
			inGraph: outer.inGraph || globMatch(s.sel.GraphFunction, r.Func),
			depth:   kept,
		}
		f.kept = !f.hidden && s.thread(r) && s.inTime(r.Time) &&
			(len(s.sel.GraphFunction) == 0 || f.inGraph) &&
			(len(s.sel.Filter) == 0 || globMatch(s.sel.Filter, r.Func)) &&
			(s.sel.Depth <= 0 || kept < s.sel.Depth)
		s.lanes[r.Lane] = append(stack, f)
		if !f.kept {
			return nil
		}
		return s.pass(r, f.depth)
	case KindReturn, KindLost:
		stack := s.open(r.Lane, r.Depth+1)
		if len(stack) <= r.Depth {
			return nil // its entry was before the recording, or lost
		}
		f := stack[r.Depth]
		s.lanes[r.Lane] = stack[:r.Depth]
		if len(stack) == r.Depth+1 && r.Depth == 0 {
			delete(s.lanes, r.Lane)
		}
		if !f.kept {
			return nil
		}
		return s.pass(r, f.depth)
	}
	// A probe event: kept where its thread and time are, and not inside
	// a call the selection hides.
	if !s.thread(r) || !s.inTime(r.Time) {
		return nil
	}
	if stack := s.lanes[r.Lane]; len(stack) > 0 {
		top := stack[len(stack)-1]
		if top.hidden || len(s.sel.GraphFunction) > 0 && !top.inGraph {
			return nil
		}
	} else if len(s.sel.GraphFunction) > 0 {
		return nil
	}
	return s.w.Write(r)
}

// open returns lane's open calls, cut to depth: deeper ones never
// returned (records lost).
func (s *selector) open(lane int64, depth int) []selFrame {
	stack := s.lanes[lane]
	if len(stack) > depth {
		stack = stack[:depth]
	}
	return stack
}

func (s *selector) pass(r *Record, depth int) error {
	if depth == r.Depth {
		return s.w.Write(r)
	}
	c := *r
	c.Depth = depth
	return s.w.Write(&c)
}

func (s *selector) thread(r *Record) bool {
	return len(s.sel.Tids) == 0 || slices.Contains(s.sel.Tids, r.Tid)
}

func (s *selector) inTime(t int64) bool {
	return (s.sel.From == 0 || t >= s.sel.From) && (s.sel.To == 0 || t <= s.sel.To)
}

func (s *selector) Comment(c string) error { return s.w.Comment(c) }
func (s *selector) Flush() error           { return s.w.Flush() }
func (s *selector) Finish() error          { return s.w.Finish() }

// globMatch reports whether name matches one of globs, as ftrace's
// glob_match does (fetch.GlobMatch: '*' also runs over '/'): by its
// full name or as a report shows it, its templates elided.
func globMatch(globs []string, name string) bool {
	short := ElideTemplates(name)
	for _, g := range globs {
		if fetch.GlobMatch(g, name) || fetch.GlobMatch(g, short) {
			return true
		}
	}
	return false
}

// Check says what of s picks nothing in a recording summarised by sum:
// a glob that matches none of its functions, a thread it does not have,
// a time range that ends before it starts.
func (s *Selection) Check(sum *Summary) error {
	for _, gs := range []struct {
		flag  string
		globs []string
	}{{"--filter", s.Filter}, {"--notrace", s.Notrace}, {"--graph-function", s.GraphFunction}} {
		for _, g := range gs.globs {
			matched := false
			for fn := range sum.Functions {
				matched = matched || globMatch([]string{g}, fn)
			}
			if !matched {
				return fmt.Errorf("%s %q matches no function of the recording", gs.flag, g)
			}
		}
	}
	for _, tid := range s.Tids {
		if _, ok := sum.Threads[tid]; !ok {
			return fmt.Errorf("--tid %d: no such thread in the recording", tid)
		}
	}
	if s.FromRelative == s.ToRelative && s.From != 0 && s.To != 0 && s.From > s.To {
		return fmt.Errorf("--time-range: it ends before it starts")
	}
	return nil
}
