package action

import (
	"math/bits"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/probedbg/probe/fetch"
	"github.com/probedbg/probe/probe"
)

// Session is the actions of every probe of one trace: the tracing switch
// that traceon/traceoff flip, and the probes' aggregates, in the order
// they were compiled. Safe from any goroutine.
type Session struct {
	tracingOff atomic.Bool // zero value: tracing on
	mu         sync.Mutex
	plans      []*Plan
	// marks are, by mark:NAME, each thread's time at its last hit of a
	// probe that marks it; marked, the names some plan marks.
	marksMu sync.Mutex
	marks   map[string]map[int]int64
	marked  map[string]bool
}

// NewSession returns a session with tracing on.
func NewSession() *Session { return &Session{} }

// Tracing reports whether events print (ftrace's tracing_on).
func (s *Session) Tracing() bool { return !s.tracingOff.Load() }

// SetTracing turns event printing on or off for all probes.
func (s *Session) SetTracing(on bool) { s.tracingOff.Store(!on) }

// Probe is what Compile checks an action list against.
type Probe struct {
	Event  string   // GRP/EVENT, for the tables' titles
	Fields []string // its fetch-arg names
	Return bool     // a return probe: hist:duration is allowed
}

// Plan is the compiled actions of one probe. Run it from the probe's
// Pre handler, on the ptrace thread.
type Plan struct {
	session  *Session
	probe    Probe
	acts     []Action
	print    bool // the event prints (when tracing is on)
	stack    bool
	stackKey bool // a table is keyed by the stack
	counts   []*counter
	aggs     []*aggregate
	hists    []*histTable
	printers []printer
	printed  []byte   // what the printers printed at the hit Run took
	marks    []string // mark:NAME
	markRefs []string // the @NAMEs the plan reads
	switches []toggle // enable/disable, bound by Bind
	traceSet bool     // traceon or traceoff is listed
	traceTo  bool     // the last one listed: on?

	mu        sync.Mutex // guards the tables: Draw runs on other goroutines
	keyBuf    []byte
	stackText string // the hit's stack as a key, during Run
}

type toggle struct {
	event string
	on    bool
	ps    []*probe.Probe // the probes of that name (one in each process of a REPL's session)
}

// Compile checks acts against p (every KEY and FIELD a fetch-arg of p,
// duration only on a return probe) and returns its Plan, added to the
// session's tables. No actions means print.
func (s *Session) Compile(p Probe, acts []Action) (*Plan, error) {
	pl := &Plan{session: s, probe: p, acts: acts, print: len(acts) == 0}
	has := func(name string) bool {
		if mark, ok := strings.CutPrefix(name, "@"); ok {
			if !slices.Contains(pl.markRefs, mark) {
				pl.markRefs = append(pl.markRefs, mark)
			}
			return true // (checked by Bind: some probe marks it)
		}
		return slices.Contains(p.Fields, name)
	}
	// value checks name, a number a's FIELD reads: a field, @MARK, or
	// a return probe's duration; also lists the other names it may be.
	value := func(a Action, name, also string) error {
		switch {
		case has(name):
		case name == Duration && p.Return:
		case name == Duration:
			return bad(a.Text, "duration is only known at a return probe (r:), and %s is an entry probe", p.Event)
		default:
			return bad(a.Text, "%s is not a field of %s (fields: %s%s)", name, p.Event, fieldList(p.Fields), also)
		}
		return nil
	}
	for _, a := range acts {
		switch a.Kind {
		case Print:
			pl.print = true
		case Stacktrace:
			pl.print, pl.stack = true, true
		case TraceOn, TraceOff:
			pl.traceSet, pl.traceTo = true, a.Kind == TraceOn
		case Count, Sum, Avg, Min, Max, Hist:
			for _, k := range a.Keys {
				if k != "comm" && k != "pid" && k != "tid" && k != "cpu" && k != StackKey && !has(k) {
					return nil, bad(a.Text, "%s is not a field of %s (fields: %s; or comm, pid, tid, cpu, stack)", k, p.Event, fieldList(p.Fields))
				}
				pl.stackKey = pl.stackKey || k == StackKey
			}
			if a.Kind != Count {
				if err := value(a, a.Field, ""); err != nil {
					return nil, err
				}
			}
			switch a.Kind {
			case Count:
				pl.counts = append(pl.counts, &counter{act: a, counts: make(map[string]*uint64)})
			case Hist:
				pl.hists = append(pl.hists, &histTable{act: a, byKey: map[string]*histogram{}})
			default:
				pl.aggs = append(pl.aggs, &aggregate{act: a, byKey: map[string]*stats{}})
			}
		case Enable, Disable:
			pl.switches = append(pl.switches, toggle{event: a.Event, on: a.Kind == Enable})
		case Mark:
			pl.marks = append(pl.marks, a.Field)
			s.marksMu.Lock()
			if s.marked == nil {
				s.marked = map[string]bool{}
			}
			s.marked[a.Field] = true
			s.marksMu.Unlock()
		case Printf:
			for _, arg := range a.Args {
				if arg == "comm" || arg == "pid" || arg == "tid" || arg == "cpu" {
					continue
				}
				if err := value(a, arg, "; or comm, pid, tid, cpu"); err != nil {
					return nil, err
				}
			}
			pieces, err := compileFormat(a.Format, len(a.Args))
			if err != nil {
				return nil, bad(a.Text, "%v", err)
			}
			pl.printers = append(pl.printers, printer{pieces: pieces, args: a.Args})
		}
	}
	s.mu.Lock()
	s.plans = append(s.plans, pl)
	s.mu.Unlock()
	return pl, nil
}

func fieldList(f []string) string {
	if len(f) == 0 {
		return "none"
	}
	s := f[0]
	for _, n := range f[1:] {
		s += ", " + n
	}
	return s
}

// Events returns the events the plan enables or disables, for a caller
// to check before attaching.
func (pl *Plan) Events() []string {
	var ev []string
	for _, t := range pl.switches {
		ev = append(ev, t.event)
	}
	return ev
}

// Bind finds the probes that enable/disable act on (lookup returns every
// probe of that event name, none for an unknown one), and checks that
// some probe marks each @MARK the plan reads.
func (pl *Plan) Bind(lookup func(event string) []*probe.Probe) error {
	s := pl.session
	s.marksMu.Lock()
	for _, m := range pl.markRefs {
		if !s.marked[m] {
			s.marksMu.Unlock()
			return bad("@"+m, "no probe marks %s (give one => mark:%s)", m, m)
		}
	}
	s.marksMu.Unlock()
	for i := range pl.switches {
		t := &pl.switches[i]
		if t.ps = lookup(t.event); len(t.ps) == 0 {
			verb := "disable"
			if t.on {
				verb = "enable"
			}
			return bad(verb+":"+t.event, "no probe has the event name %s", t.event)
		}
	}
	return nil
}

// AppendPrinted appends what the plan's printf actions printed at the
// hit Run last took (nothing when tracing is off).
func (pl *Plan) AppendPrinted(b []byte) []byte { return append(b, pl.printed...) }

// PrintOnly reports whether the plan does nothing but print the event
// (no action, or print): its hits may be printed from a recording, long
// after.
func (pl *Plan) PrintOnly() bool {
	return pl.print && !pl.stack && !pl.traceSet && len(pl.switches)+len(pl.counts)+len(pl.aggs)+len(pl.hists)+len(pl.printers) == 0
}

// Stack reports whether the plan wants the user stack at each hit.
func (pl *Plan) Stack() bool { return pl.stack }

// FieldsOnly reports whether every action reads no more than the hit's
// fields, thread, CPU and time (print, count, hist): the plan may run
// long after the hit, from a record (in-process probes). Stacks need the
// thread stopped; traceon/off and enable/disable act on other probes at
// the moment of the hit.
func (pl *Plan) FieldsOnly() bool {
	if pl.stackKey {
		return false
	}
	for _, a := range pl.acts {
		switch a.Kind {
		case Print, Printf, Count, Hist, Sum, Avg, Min, Max, Mark:
		default:
			return false
		}
	}
	return true
}

// Remove takes the plan's tables out of the session (its probe was deleted).
func (pl *Plan) Remove() {
	s := pl.session
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, p := range s.plans {
		if p == pl {
			s.plans = append(s.plans[:i], s.plans[i+1:]...)
			return
		}
	}
}

// Run applies the actions to a hit and reports whether the event is to
// be printed (with its stack if Stack). The trace switches act first, so
// the hit that turns tracing on prints and the one that turns it off
// does not.
func (pl *Plan) Run(h *probe.Hit) (print bool) {
	if pl.traceSet {
		pl.session.SetTracing(pl.traceTo)
	}
	for _, t := range pl.switches {
		for _, p := range t.ps {
			p.SetEnabled(t.on)
		}
	}
	if len(pl.counts) > 0 || len(pl.hists) > 0 || len(pl.aggs) > 0 {
		pl.stackText = ""
		if pl.stackKey {
			pl.stackText = stackKey(h)
		}
		pl.mu.Lock()
		for _, c := range pl.counts {
			pl.keyBuf = appendKeys(pl.keyBuf[:0], c.act.Keys, h.Comm, h.Pid, h.Tid, h.CPU, h, pl.stackText)
			c.addN(pl.keyBuf, 1)
		}
		for _, ht := range pl.hists {
			if v, ok := pl.value(h, ht.act.Field); ok {
				pl.keyBuf = appendKeys(pl.keyBuf[:0], ht.act.Keys, h.Comm, h.Pid, h.Tid, h.CPU, h, pl.stackText)
				ht.at(pl.keyBuf).add(v)
			}
		}
		for _, ag := range pl.aggs {
			if v, ok := pl.value(h, ag.act.Field); ok {
				pl.keyBuf = appendKeys(pl.keyBuf[:0], ag.act.Keys, h.Comm, h.Pid, h.Tid, h.CPU, h, pl.stackText)
				ag.add(pl.keyBuf, v)
			}
		}
		pl.mu.Unlock()
	}
	pl.printed = pl.printed[:0]
	if len(pl.printers) > 0 && pl.session.Tracing() {
		for i := range pl.printers {
			pl.printed = pl.printers[i].appendText(pl.printed, h, pl.value)
		}
	}
	// Marks last: the hit's own actions read the mark before it.
	if len(pl.marks) > 0 {
		s := pl.session
		s.marksMu.Lock()
		if s.marks == nil {
			s.marks = map[string]map[int]int64{}
		}
		for _, m := range pl.marks {
			if s.marks[m] == nil {
				s.marks[m] = map[int]int64{}
			}
			s.marks[m][h.Tid] = h.Time
		}
		s.marksMu.Unlock()
	}
	return pl.print && pl.session.Tracing()
}

// value is the number of name at h: a numeric field, a return's
// duration, or @MARK, the time since the thread's last hit of a probe
// that marks it (none if it has none).
func (pl *Plan) value(h *probe.Hit, name string) (int64, bool) {
	mark, ok := strings.CutPrefix(name, "@")
	if !ok {
		return histValue(h, name)
	}
	s := pl.session
	s.marksMu.Lock()
	at, ok := s.marks[mark][h.Tid]
	s.marksMu.Unlock()
	return h.Time - at, ok
}

// stackKey is the hit's user stack as a key: its functions, outermost
// first, as folded stacks are written.
func stackKey(h *probe.Hit) string {
	frames := h.Stack(maxKeyFrames)
	names := make([]string, len(frames))
	for i, f := range frames {
		names[len(frames)-1-i] = fetch.FrameFunc(f.Text)
	}
	return strings.Join(names, ";")
}

// maxKeyFrames bounds a stack key.
const maxKeyFrames = 32

// Tally returns what the probe's tracee may count for the plan itself
// (probe.Tally): nil unless the plan does nothing but count, by no key
// or by thread (comm, tid), and draw log2 histograms of fields; nor
// marks or reads a mark.
func (pl *Plan) Tally() *probe.Tally {
	if pl.print || pl.stack || pl.traceSet || len(pl.switches) > 0 || len(pl.aggs) > 0 || len(pl.printers) > 0 || len(pl.counts)+len(pl.hists) == 0 {
		return nil
	}
	if len(pl.marks)+len(pl.markRefs) > 0 {
		return nil // (a mark is the tracer's, set and read hit by hit)
	}
	for _, c := range pl.counts {
		for _, k := range c.act.Keys {
			if k != "comm" && k != "pid" && k != "tid" {
				return nil
			}
		}
	}
	ta := &probe.Tally{Add: pl.addTally}
	for _, ht := range pl.hists {
		if ht.act.Step > 0 || ht.act.Field == Duration || len(ht.act.Keys) > 0 {
			return nil
		}
		ta.Hists = append(ta.Hists, ht.act.Field)
	}
	return ta
}

// addTally adds what one thread counted, as Run would have hit by hit.
func (pl *Plan) addTally(d probe.TallyDelta) {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	for _, c := range pl.counts {
		if d.Hits == 0 {
			break // (values of hits counted before: no key of none)
		}
		pl.keyBuf = appendKeys(pl.keyBuf[:0], c.act.Keys, d.Comm, d.Pid, d.Tid, 0, nil, "")
		c.addN(pl.keyBuf, d.Hits)
	}
	for i, ht := range pl.hists {
		hg := ht.at(nil) // (no keys: Tally)
		h := &d.Hists[i]
		for b, n := range h.Buckets {
			hg.log2[b] += n
			hg.total += n
		}
		hg.negative += h.Negative
		hg.total += h.Negative
		hg.sum += h.Sum
	}
}

// counter is one count action's table: key text -> hits.
type counter struct {
	act    Action
	counts map[string]*uint64 // pointers: a lookup by string(buf) does not allocate
	total  uint64
}

// appendKeys appends the key text of keys: "comm=..., pid=..., tid=...", the
// fields' values from h (nil: none), the stack's text.
func appendKeys(buf []byte, keys []string, comm string, pid, tid, cpu int, h *probe.Hit, stack string) []byte {
	for i, k := range keys {
		if i > 0 {
			buf = append(buf, ", "...)
		}
		buf = append(append(buf, k...), '=')
		switch k {
		case "comm":
			buf = append(buf, comm...)
		case "pid":
			buf = strconv.AppendInt(buf, int64(pid), 10)
		case "tid":
			buf = strconv.AppendInt(buf, int64(tid), 10)
		case "cpu":
			buf = strconv.AppendInt(buf, int64(cpu), 10)
		case StackKey:
			buf = append(buf, stack...)
		default:
			if f := field(h, k); f != nil {
				buf = f.Value.AppendText(buf)
			}
		}
	}
	return buf
}

// addN counts n hits under the key text key.
func (c *counter) addN(key []byte, n uint64) {
	c.total += n
	if p, ok := c.counts[string(key)]; ok {
		*p += n
		return
	}
	p := new(uint64) // (not &n: n would escape, and every hit allocate)
	*p = n
	c.counts[string(key)] = p
}

func field(h *probe.Hit, name string) *fetch.Field {
	if h == nil {
		return nil
	}
	for i := range h.Fields {
		if h.Fields[i].Name == name {
			return &h.Fields[i]
		}
	}
	return nil
}

// histValue is the number a hist action counts at h: a numeric field
// (fields that are strings or faulted are skipped), or the duration.
func histValue(h *probe.Hit, name string) (int64, bool) {
	if f := field(h, name); f != nil {
		v := f.Value
		if v.Faulted() || v.Type().IsString() || v.Len() > 0 {
			return 0, false
		}
		if v.Type().Signed() {
			return v.Int(), true
		}
		return int64(min(v.Uint(), 1<<63-1)), true
	}
	if name == Duration && h.Return != nil && h.Return.EntryTime != 0 {
		return h.Time - h.Return.EntryTime, true
	}
	return 0, false
}

// histTable is one hist action's histograms, one per key.
type histTable struct {
	act   Action
	byKey map[string]*histogram
}

// at returns the histogram of key, made if new.
func (ht *histTable) at(key []byte) *histogram {
	if hg, ok := ht.byKey[string(key)]; ok {
		return hg
	}
	hg := &histogram{act: ht.act, linear: make(map[int64]uint64)}
	ht.byKey[string(key)] = hg
	return hg
}

// aggregate is one sum, avg, min or max action's values, by key.
type aggregate struct {
	act   Action
	byKey map[string]*stats
	hits  uint64
}

// stats are what sum, avg, min and max need of a key's values.
type stats struct {
	n        uint64
	sum      int64
	min, max int64
}

func (ag *aggregate) add(key []byte, v int64) {
	ag.hits++
	st, ok := ag.byKey[string(key)]
	if !ok {
		st = &stats{min: v, max: v}
		ag.byKey[string(key)] = st
	}
	st.n++
	st.sum += v
	st.min, st.max = min(st.min, v), max(st.max, v)
}

// value is the action's result for st: avg as a whole number, rounded
// toward zero (bpftrace's avg() is integer too).
func (ag *aggregate) value(st *stats) int64 {
	switch ag.act.Kind {
	case Sum:
		return st.sum
	case Avg:
		return st.sum / int64(st.n)
	case Min:
		return st.min
	}
	return st.max
}

// histogram is one hist action's buckets. log2 as bpftrace's hist():
// [0], [1], [2, 4), [4, 8) ...; negative values in one bucket below.
type histogram struct {
	act      Action
	log2     [65]uint64 // index 0: value 0; i: [2^(i-1), 2^i)
	negative uint64
	linear   map[int64]uint64 // bucket index (value / step, floored) -> count
	total    uint64
	sum      int64
}

func (hg *histogram) add(v int64) {
	hg.total++
	hg.sum += v
	if hg.act.Step > 0 {
		step := int64(min(hg.act.Step, 1<<62))
		b := v / step
		if v < 0 && v%step != 0 {
			b--
		}
		hg.linear[b]++
		return
	}
	if v < 0 {
		hg.negative++
		return
	}
	hg.log2[bits.Len64(uint64(v))]++
}
