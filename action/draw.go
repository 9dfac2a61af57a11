package action

import (
	"bufio"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
)

// barWidth is the width of the longest bar, as bpftrace's 52 is too wide
// next to long keys.
const barWidth = 40

// Draw writes every count and histogram of the session, a table per
// action, in the order the probes were compiled: what the CLI prints at
// detach and the REPL's stats shows at any time. Nothing is written when
// no probe counts.
func (s *Session) Draw(w io.Writer) error { return s.draw(w, false) }

// DrawAndClear is Draw, each table emptied once drawn, under the lock
// its hits are added under: none is lost between the two (bpftrace's
// print then clear, a table per interval).
func (s *Session) DrawAndClear(w io.Writer) error { return s.draw(w, true) }

func (s *Session) draw(w io.Writer, clear bool) error {
	s.mu.Lock()
	plans := slices.Clone(s.plans)
	s.mu.Unlock()
	bw := bufio.NewWriter(w)
	for _, pl := range plans {
		pl.mu.Lock()
		pl.draw(bw)
		if clear {
			pl.clear()
		}
		pl.mu.Unlock()
	}
	return bw.Flush()
}

// clear empties the plan's tables. The caller holds pl.mu.
func (pl *Plan) clear() {
	for _, c := range pl.counts {
		c.counts, c.total = make(map[string]*uint64), 0
	}
	for _, ht := range pl.hists {
		ht.byKey = map[string]*histogram{}
	}
	for _, ag := range pl.aggs {
		ag.byKey, ag.hits = map[string]*stats{}, 0
	}
}

// HasTables reports whether some probe counts or draws a histogram.
func (s *Session) HasTables() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, pl := range s.plans {
		if len(pl.counts) > 0 || len(pl.hists) > 0 || len(pl.aggs) > 0 {
			return true
		}
	}
	return false
}

type row struct {
	label string
	n     uint64
}

// draw writes the plan's tables. The caller holds pl.mu.
func (pl *Plan) draw(w io.Writer) {
	for _, c := range pl.counts {
		rows := make([]row, 0, len(c.counts))
		for k, n := range c.counts {
			if k == "" {
				k = "total"
			}
			rows = append(rows, row{k, *n})
		}
		// By count, most first, as ftrace's hist sort=hitcount.descending.
		slices.SortFunc(rows, func(a, b row) int {
			if a.n != b.n {
				return cmpDesc(a.n, b.n)
			}
			return strings.Compare(a.label, b.label)
		})
		fmt.Fprintf(w, "# %s of %s: %d hits, %d %s\n", c.act.Text, pl.probe.Event, c.total, len(rows), plural(len(rows), "key", "keys"))
		drawRows(w, rows)
	}
	for _, ag := range pl.aggs {
		keys := slices.Collect(maps.Keys(ag.byKey))
		// Greatest first; for min, least first.
		slices.SortFunc(keys, func(a, b string) int {
			va, vb := ag.value(ag.byKey[a]), ag.value(ag.byKey[b])
			if va != vb {
				if (va > vb) != (ag.act.Kind == Min) {
					return -1
				}
				return 1
			}
			return strings.Compare(a, b)
		})
		fmt.Fprintf(w, "# %s of %s: %d values, %d %s\n", ag.act.Text, pl.probe.Event, ag.hits, len(keys), plural(len(keys), "key", "keys"))
		width := 0
		for _, k := range keys {
			width = max(width, len(keyLabel(k)))
		}
		for _, k := range keys {
			fmt.Fprintf(w, "%-*s %12d\n", width, keyLabel(k), ag.value(ag.byKey[k]))
		}
	}
	for _, ht := range pl.hists {
		kind := "log2"
		if ht.act.Step > 0 {
			kind = "linear, step " + strconv.FormatUint(ht.act.Step, 10)
		}
		keys := slices.Collect(maps.Keys(ht.byKey))
		// Most values first, as the counts.
		slices.SortFunc(keys, func(a, b string) int {
			if na, nb := ht.byKey[a].total, ht.byKey[b].total; na != nb {
				return cmpDesc(na, nb)
			}
			return strings.Compare(a, b)
		})
		if len(keys) == 0 && len(ht.act.Keys) == 0 {
			keys = []string{""} // an empty histogram still has its title
		}
		for _, k := range keys {
			hg := ht.byKey[k]
			if hg == nil {
				hg = &histogram{act: ht.act}
			}
			of := pl.probe.Event
			if k != "" {
				of += ", " + k
			}
			fmt.Fprintf(w, "# %s of %s (%s): %d values, sum %d\n", ht.act.Text, of, kind, hg.total, hg.sum)
			drawRows(w, hg.rows())
		}
	}
}

// keyLabel is how a key's row is labelled: "total" for no key.
func keyLabel(k string) string {
	if k == "" {
		return "total"
	}
	return k
}

func cmpDesc(a, b uint64) int {
	if a > b {
		return -1
	}
	return 1
}

// rows are the histogram's buckets from the lowest non-empty to the
// highest, empty ones between kept so the shape reads right.
func (hg *histogram) rows() []row {
	var rows []row
	if hg.act.Step > 0 {
		if len(hg.linear) == 0 {
			return nil
		}
		keys := make([]int64, 0, len(hg.linear))
		for k := range hg.linear {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		step := int64(hg.act.Step)
		for b := keys[0]; b <= keys[len(keys)-1]; b++ {
			rows = append(rows, row{fmt.Sprintf("[%d, %d)", b*step, (b+1)*step), hg.linear[b]})
		}
		return rows
	}
	if hg.negative > 0 {
		rows = append(rows, row{"(..., 0)", hg.negative})
	}
	lo, hi := -1, -1
	for i, n := range hg.log2 {
		if n > 0 {
			if lo < 0 {
				lo = i
			}
			hi = i
		}
	}
	for i := lo; i >= 0 && i <= hi; i++ {
		var label string
		switch i {
		case 0:
			label = "[0]"
		case 1:
			label = "[1]"
		case 64:
			label = fmt.Sprintf("[%d, ...)", uint64(1)<<63)
		default:
			label = fmt.Sprintf("[%d, %d)", uint64(1)<<(i-1), uint64(1)<<i)
		}
		rows = append(rows, row{label, hg.log2[i]})
	}
	return rows
}

// drawRows writes "label  count |@@@@      |" lines, the bars scaled to
// the largest count.
func drawRows(w io.Writer, rows []row) {
	width, most := 0, uint64(0)
	for _, r := range rows {
		width = max(width, len(r.label))
		most = max(most, r.n)
	}
	for _, r := range rows {
		bar := 0
		if most > 0 {
			bar = int(r.n * barWidth / most)
		}
		if r.n > 0 && bar == 0 {
			bar = 1 // a non-empty bucket always shows
		}
		fmt.Fprintf(w, "%-*s %8d |%s%s|\n", width, r.label, r.n, strings.Repeat("@", bar), strings.Repeat(" ", barWidth-bar))
	}
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
