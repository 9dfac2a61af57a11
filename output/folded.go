package output

import (
	"bufio"
	"fmt"
	"io"
	"strings"
)

// Folded writes folded stacks for flame graphs (Brendan Gregg's
// flamegraph.pl, speedscope, inferno): one line per call stack of traced
// functions, outermost first, with the self time in nanoseconds spent in
// that stack, so that the lines add up to the traced time:
//
//	main;work;leaf 1200
//
// Lines are written by Finish; comments follow them as "# ..." lines,
// which flamegraph.pl skips.
type Folded struct {
	w      *bufio.Writer
	stacks *callStacks
}

// NewFolded returns a folded-stacks writer.
func NewFolded(w io.Writer) *Folded {
	return &Folded{w: bufio.NewWriter(w), stacks: newCallStacks()}
}

func (f *Folded) Write(r *Record) error {
	f.stacks.add(r)
	return nil
}

func (f *Folded) Comment(s string) error {
	_, err := fmt.Fprintf(f.w, "# %s\n", s)
	return err
}

func (f *Folded) Flush() error { return f.w.Flush() }

func (f *Folded) Finish() error {
	f.stacks.finish()
	for _, key := range f.stacks.sorted() {
		fmt.Fprintf(f.w, "%s %d\n", strings.ReplaceAll(key, stackSep, ";"), f.stacks.stats[key].self)
	}
	return f.w.Flush()
}
