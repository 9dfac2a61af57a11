package output

import (
	"bufio"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/probedbg/probe/fetch"
)

// Folded writes folded stacks for flame graphs (Brendan Gregg's
// flamegraph.pl, speedscope, inferno): one line per call stack of traced
// functions, outermost first, with the self time in nanoseconds spent in
// that stack, so that the lines add up to the traced time:
//
//	main;work;leaf 1200
//
// Lines are written by Finish. The file holds nothing else (flamegraph.pl
// warns of any other line): comments go to notes, as "probe: ..." lines.
//
// With no traced calls, the stacks are those probe hits carry (the
// stacktrace action), each line counting the hits of its stack.
type Folded struct {
	w      *bufio.Writer
	notes  io.Writer // nil: comments are dropped
	stacks *callStacks
	hits   map[string]int64 // probe hit stacks, outermost first, joined with ";"
}

// NewFolded returns a folded-stacks writer that says its comments on
// notes (stderr; nil: nowhere).
func NewFolded(w, notes io.Writer) *Folded {
	return &Folded{w: bufio.NewWriter(w), notes: notes, stacks: newCallStacks(), hits: map[string]int64{}}
}

func (f *Folded) Write(r *Record) error {
	if r.Kind == KindProbe {
		f.stacks.last = max(f.stacks.last, r.Time) // calls open at the end close then
		if len(r.Stack) > 0 {
			frames := make([]string, len(r.Stack))
			for i, fr := range r.Stack { // the stack is innermost first
				frames[len(r.Stack)-1-i] = fetch.FrameFunc(fr)
			}
			f.hits[strings.Join(frames, ";")]++
		}
		return nil
	}
	f.stacks.add(r)
	return nil
}

func (f *Folded) Comment(s string) error {
	if f.notes == nil {
		return nil
	}
	_, err := fmt.Fprintf(f.notes, "probe: %s\n", s)
	return err
}

func (f *Folded) Flush() error { return f.w.Flush() }

func (f *Folded) Finish() error {
	f.stacks.finish()
	if len(f.stacks.stats) == 0 {
		// Counts and nanoseconds do not add up: hits only without calls.
		for _, key := range slices.Sorted(maps.Keys(f.hits)) {
			fmt.Fprintf(f.w, "%s %d\n", key, f.hits[key])
		}
	}
	for _, key := range f.stacks.sorted() {
		fmt.Fprintf(f.w, "%s %d\n", strings.ReplaceAll(key, stackSep, ";"), f.stacks.stats[key].self)
	}
	return f.w.Flush()
}
