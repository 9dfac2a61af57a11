package output

import (
	"maps"
	"slices"
	"strings"
)

// callStacks adds up function_graph records into time per call stack:
// each call's self time (its duration less its traced callees') goes to
// the stack of traced functions it ran under, so that the stacks' times
// sum to the time spent in outermost calls. Calls lost to longjmp or an
// exception end when the loss is seen; calls still open end at the last
// time seen (finish).
type callStacks struct {
	lanes map[int64][]stackCall // per lane, the open calls by depth
	stats map[string]*stackStat // by stack, outermost first, joined with stackSep
	last  int64
}

type stackCall struct {
	fn       string // "" for a level whose entry was not seen
	start    int64
	children int64 // time in traced callees, ns
}

type stackStat struct {
	calls int64
	self  int64 // ns
}

// stackSep joins a stack's frames in a key; no symbol holds it.
const stackSep = "\x00"

func newCallStacks() *callStacks {
	return &callStacks{lanes: map[int64][]stackCall{}, stats: map[string]*stackStat{}}
}

func (cs *callStacks) add(r *Record) {
	cs.last = max(cs.last, r.Time)
	open := cs.lanes[r.Lane]
	switch r.Kind {
	case KindEntry:
		open = cs.endFrom(open, r.Depth, r.Time)
		for len(open) < r.Depth {
			open = append(open, stackCall{})
		}
		open = append(open, stackCall{fn: r.Func, start: r.Time})
	case KindReturn:
		open = cs.endFrom(open, r.Depth+1, r.Time)
		for len(open) <= r.Depth {
			open = append(open, stackCall{})
		}
		// The return knows when its call began, even if its entry was
		// dropped.
		open[r.Depth] = stackCall{fn: r.Func, start: r.EntryTime, children: open[r.Depth].children}
		open = cs.endFrom(open, r.Depth, r.Time)
	case KindLost:
		open = cs.endFrom(open, r.Depth, r.Time)
	default:
		return
	}
	if len(open) == 0 {
		delete(cs.lanes, r.Lane) // goroutines come and go
	} else {
		cs.lanes[r.Lane] = open
	}
}

// endFrom ends the calls at depth and deeper at time end.
func (cs *callStacks) endFrom(open []stackCall, depth int, end int64) []stackCall {
	for i := len(open) - 1; i >= depth; i-- {
		c := open[i]
		if c.fn == "" {
			continue
		}
		d := max(end-c.start, 0)
		var frames []string
		for _, o := range open[:i+1] {
			if o.fn != "" {
				frames = append(frames, o.fn)
			}
		}
		key := strings.Join(frames, stackSep)
		st := cs.stats[key]
		if st == nil {
			st = &stackStat{}
			cs.stats[key] = st
		}
		st.calls++
		st.self += max(d-c.children, 0)
		for j := i - 1; j >= 0; j-- {
			if open[j].fn != "" {
				open[j].children += d
				break
			}
		}
	}
	return open[:min(depth, len(open))]
}

// finish ends every open call at the last time seen.
func (cs *callStacks) finish() {
	for _, lane := range slices.Sorted(maps.Keys(cs.lanes)) {
		cs.endFrom(cs.lanes[lane], 0, cs.last)
		delete(cs.lanes, lane)
	}
}

// sorted returns the stacks in order, each outermost frame first.
func (cs *callStacks) sorted() (keys []string) {
	return slices.Sorted(maps.Keys(cs.stats))
}
