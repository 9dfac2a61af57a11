package probe

import (
	"slices"

	"github.com/probedbg/probe/codegen"
	"github.com/probedbg/probe/ring"
)

// Tallies: a probe whose handler only counts its hits and draws log2
// histograms of fields read from registers or the stack (Handler.Tally)
// is counted by the tracee itself, where it records in-process: its stub
// adds to counters in the thread's ring header (codegen.Tally) and
// makes no record. The drain reads each thread's counters and hands the
// handler what the thread added since the last look. Per hit that is a
// few instructions in the tracee and nothing in the tracer; no ring
// fills, whatever the rate.

// Tally says that a handler's Pre does nothing but count hits and draw
// log2 histograms (as bpftrace's hist()) of some of the probe's fields:
// then, where the probe records in the tracee and has no filter, the
// tracee keeps the counts, Pre is not called, and Add is given what each
// thread added (on the drain's goroutine, as Recorded handlers are).
type Tally struct {
	Hists []string // fields whose log2 histogram is kept
	Add   func(TallyDelta)
}

// TallyDelta is what one thread added to a probe's counts.
type TallyDelta struct {
	Pid   int // the thread's process
	Tid   int
	Comm  string
	Hits  uint64
	Hists []Log2Hist // in the order of Tally.Hists
}

// Log2Hist is a log2 histogram: Buckets[0] counts the value 0,
// Buckets[i] the values in [2^(i-1), 2^i); Negative the values below 0;
// Sum is the values' sum (an unsigned value of 2^63 or more counts as
// 2^63-1).
type Log2Hist struct {
	Buckets  [65]uint64
	Negative uint64
	Sum      int64
}

// siteTally is one probe's counters in each ring: its hits at at; with
// a filter, the hits it let through next; then a histogram block per
// field of its Tally, of the hits let through.
type siteTally struct {
	p      *Probe
	at     int
	filter *codegen.Filter
	values []codegen.TallyValue
}

// passedAt is the word of the hits the filter let through (with none,
// every hit's).
func (pt *siteTally) passedAt() int {
	if pt.filter != nil {
		return pt.at + 1
	}
	return pt.at
}

// histAt is the first word of the j'th histogram.
func (pt *siteTally) histAt(j int) int { return pt.passedAt() + 1 + j*codegen.TallyHistWords }

// tallyPlan returns what st's probes count in the tracee, without the
// counters' places, or nil if st cannot be counted there: a probe of it
// prints, or filters other than on numbers the stub reads, or a return
// (returns: its function is traced with returns hooked) or the function
// tracer needs records.
func (t *Tracer) tallyPlan(st *site, traced bool) []siteTally {
	if len(st.probes) == 0 || len(st.returns) > 0 || traced {
		return nil
	}
	plan := make([]siteTally, 0, len(st.probes))
	for _, p := range st.probes {
		ta := p.handler.Tally
		if ta == nil || !p.handler.Recorded || p.handler.Post != nil {
			return nil
		}
		pt := siteTally{p: p}
		low := p.argsAt(st).Lower()
		if p.argsAt(st).Filter() != "" {
			if pt.filter = low.Filter; pt.filter == nil {
				return nil
			}
		}
		for _, name := range ta.Hists {
			v, ok := low.Values[name]
			if !ok {
				return nil
			}
			pt.values = append(pt.values, v)
		}
		plan = append(plan, pt)
	}
	return plan
}

func (pt *siteTally) words() int { return pt.histAt(len(pt.values)) - pt.at }

// sameTallies reports whether two plans count the same things.
func sameTallies(a, b []siteTally) bool {
	return slices.EqualFunc(a, b, func(x, y siteTally) bool {
		return x.p == y.p && x.filter == y.filter && slices.Equal(x.values, y.values)
	})
}

// placeTallies gives plan its counters in the rings: the stub's
// tallies, or false when the rings have no room left.
func (in *inproc) placeTallies(plan []siteTally) ([]codegen.Tally, bool) {
	n := 0
	for i := range plan {
		n += plan[i].words()
	}
	if in.tallyWords+n > ring.TallyWords {
		return nil, false
	}
	var code []codegen.Tally
	for i := range plan {
		pt := &plan[i]
		pt.at = in.tallyWords
		code = append(code, codegen.Tally{At: pt.at})
		if pt.filter != nil {
			code = append(code, codegen.Tally{At: pt.passedAt(), Filter: pt.filter})
		}
		for j := range pt.values {
			code = append(code, codegen.Tally{At: pt.histAt(j), Value: &pt.values[j], Filter: pt.filter})
		}
		in.tallyWords += pt.words()
	}
	return code, true
}

// collectTallies hands each counted probe what each thread added to its
// counters since the last look. A thread adds to its hits before its
// histograms, and the words are read in that order: a hit read without
// its values has them at the next look, which hands on whatever word
// changed (a hit's last additions may be all that did).
func (t *Tracer) collectTallies() {
	in := t.inproc
	if in == nil || len(in.tallied) == 0 {
		return
	}
	in.rings.Tallies(in.tallyWords, func(tid int, words []uint64) {
		last := in.tallyLast[tid]
		if len(last) < len(words) {
			last = append(last, make([]uint64, len(words)-len(last))...)
			in.tallyLast[tid] = last
		}
		for _, rs := range in.tallied {
			for i := range rs.tallies {
				t.handTally(tid, &rs.tallies[i], words, last)
			}
			if rs.filtered {
				t.handRejected(rs, words, last)
			}
		}
	})
}

// handTally hands pt's handler what thread tid added to pt's counters
// (words, seen last as last) and notes them seen.
func (t *Tracer) handTally(tid int, pt *siteTally, words, last []uint64) {
	in := t.inproc
	end := pt.at + pt.words()
	if slices.Equal(words[pt.at:end], last[pt.at:end]) {
		return
	}
	hits := words[pt.at] - last[pt.at]
	p := pt.p
	if in.quiet[tid] || !p.enabled.Load() {
		// A vfork child's hits, or a disabled probe's: not reported.
		copy(last[pt.at:end], words[pt.at:end])
		return
	}
	d := TallyDelta{Pid: t.pid, Tid: tid, Comm: t.threadComm(tid), Hits: words[pt.passedAt()] - last[pt.passedAt()], Hists: make([]Log2Hist, len(pt.values))}
	for j := range pt.values {
		at := pt.histAt(j)
		h := &d.Hists[j]
		for b := range h.Buckets {
			h.Buckets[b] = words[at+b] - last[at+b]
		}
		h.Negative = words[at+codegen.TallyNegative] - last[at+codegen.TallyNegative]
		h.Sum = int64(words[at+codegen.TallySum] - last[at+codegen.TallySum])
	}
	copy(last[pt.at:end], words[pt.at:end])
	p.hits.Add(hits)
	p.handler.Tally.Add(d)
}

// handRejected counts, for each probe of rs, the hits its stub's filter
// rejected since the last look: no record came of them, and a probe's
// hits count every hit, as at a stop.
func (t *Tracer) handRejected(rs *recordSite, words, last []uint64) {
	n := words[rs.rejected] - last[rs.rejected]
	last[rs.rejected] = words[rs.rejected]
	for _, p := range rs.site.probes {
		p.hits.Add(n)
	}
}

// siteFilter is what st's stub tests before it records: a hit none of
// its probes' filters lets through needs no record. nil where a probe
// has no filter, or one a stub cannot test.
func siteFilter(st *site) *codegen.Filter {
	var f *codegen.Filter
	for _, p := range st.probes {
		if p.argsAt(st).Filter() == "" {
			return nil
		}
		pf := p.argsAt(st).Lower().Filter
		if pf == nil {
			return nil
		}
		if f == nil {
			f = pf
		} else {
			f = &codegen.Filter{Kind: codegen.FilterOr, L: f, R: pf}
		}
	}
	return f
}
