package output

import (
	"bufio"
	"fmt"
	"io"
	"slices"
	"strings"
)

// CallGraph writes uftrace's graph view of function_graph's calls, at the
// end of the trace: every call path once, with its number of calls and
// their total time, the program at the root. A function with a single
// callee path shows it at its own level; several are drawn as branches:
//
//	# Function Call Graph for 'shape'
//	========== FUNCTION CALL GRAPH ==========
//	# TOTAL TIME   FUNCTION
//	   30.101 us : (1) shape
//	   30.101 us : (1) main
//	   12.120 us :  +-(2) top
//	    8.000 us :  | (2) mid
//	             :  |
//	    9.300 us :  +-(1) recurse
//	    4.000 us :    (1) recurse
type CallGraph struct {
	w     *bufio.Writer
	root  cgNode
	lanes map[int64][]cgFrame // each call stack's open calls, by depth
	notes []string
}

type cgNode struct {
	name     string
	calls    int
	total    int64 // ns
	children []*cgNode
	byName   map[string]*cgNode
}

type cgFrame struct {
	node  *cgNode
	entry int64
}

// NewCallGraph returns the graph writer; program names the root.
func NewCallGraph(w io.Writer, program string) *CallGraph {
	return &CallGraph{w: bufio.NewWriterSize(w, 64<<10), root: cgNode{name: program, calls: 1}, lanes: map[int64][]cgFrame{}}
}

func (n *cgNode) child(name string) *cgNode {
	if c := n.byName[name]; c != nil {
		return c
	}
	if n.byName == nil {
		n.byName = map[string]*cgNode{}
	}
	c := &cgNode{name: name}
	n.byName[name] = c
	n.children = append(n.children, c)
	return c
}

func (g *CallGraph) Write(r *Record) error {
	stack := g.lanes[r.Lane]
	switch r.Kind {
	case KindEntry:
		// Calls left open deeper never returned (their records lost).
		stack = stack[:min(len(stack), r.Depth)]
		parent := &g.root
		if len(stack) > 0 {
			parent = stack[len(stack)-1].node
		}
		c := parent.child(r.Func)
		c.calls++
		g.lanes[r.Lane] = append(stack, cgFrame{node: c, entry: r.Time})
	case KindReturn, KindLost:
		if r.Depth >= len(stack) {
			return nil // entered before the trace began
		}
		f := stack[r.Depth]
		d := r.Time - f.entry
		if r.Kind == KindReturn && r.EntryTime != 0 {
			d = r.Time - r.EntryTime
		}
		f.node.total += max(d, 0)
		if r.Depth == 0 {
			g.root.total += max(d, 0)
			delete(g.lanes, r.Lane)
		} else {
			g.lanes[r.Lane] = stack[:r.Depth]
		}
	}
	return nil
}

func (g *CallGraph) Comment(s string) error {
	g.notes = append(g.notes, s)
	return nil
}

func (g *CallGraph) Flush() error { return g.w.Flush() }

func (g *CallGraph) Finish() error {
	fmt.Fprintf(g.w, "# Function Call Graph for '%s'\n", g.root.name)
	if len(g.root.children) > 0 {
		g.w.WriteString("========== FUNCTION CALL GRAPH ==========\n# TOTAL TIME   FUNCTION\n")
		g.node(&g.root, nil, false, false)
	}
	for _, n := range g.notes {
		fmt.Fprintf(g.w, "# %s\n", n)
	}
	g.notes = nil
	return g.w.Flush()
}

// node writes n's line and its callees'. branches has one entry per
// level of indentation, true where a branch line still runs down it;
// line: n is one of several callees, drawn with "+-"; last: the last of
// them, whose branch line ends here.
func (g *CallGraph) node(n *cgNode, branches []bool, line, last bool) {
	fmt.Fprintf(g.w, "%s : ", graphTime(n.total))
	indentTo(g.w, branches, line)
	fmt.Fprintf(g.w, "(%d) %s\n", n.calls, n.name)
	if last && len(branches) > 0 {
		branches[len(branches)-1] = false
	}
	several := len(n.children) > 1
	if several {
		branches = append(slices.Clone(branches), true)
	}
	for i, c := range n.children {
		end := i == len(n.children)-1
		g.node(c, branches, several, several && end)
		if !end {
			// A blank line between callees, their branch lines drawn
			// through it.
			var sep strings.Builder
			sep.WriteString("             : ")
			indentTo(&sep, branches, false)
			g.w.WriteString(strings.TrimRight(sep.String(), " "))
			g.w.WriteByte('\n')
		}
	}
}

// indentTo draws the levels: " | " where a branch line runs, "   " where
// none does, and with line " +-" at the innermost one that runs (and
// "---" past it) to reach this callee.
func indentTo(w io.StringWriter, branches []bool, line bool) {
	last := -1
	for i, b := range branches {
		if line && b {
			last = i
		}
	}
	for i, b := range branches {
		switch {
		case line && i == last:
			w.WriteString(" +-")
		case line && i > last && last >= 0:
			w.WriteString("---")
		case b:
			w.WriteString(" | ")
		default:
			w.WriteString("   ")
		}
	}
}

// graphTime is a total time as uftrace prints it: 3 decimals of us, ms
// or s, 12 characters.
func graphTime(ns int64) string {
	v, unit := float64(ns)/1e3, "us"
	switch {
	case ns >= 1e9:
		v, unit = float64(ns)/1e9, " s"
	case ns >= 1e6:
		v, unit = float64(ns)/1e6, "ms"
	}
	return fmt.Sprintf("  %7.3f %s", v, unit)
}
