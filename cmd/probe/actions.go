package main

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/probedbg/probe/action"
	"github.com/probedbg/probe/fetch"
	"github.com/probedbg/probe/output"
	"github.com/probedbg/probe/probe"
	"github.com/probedbg/probe/script"
	"github.com/probedbg/probe/symbols"
)

// maxStackFrames bounds a stacktrace action's unwind.
const maxStackFrames = 64

// probeDef is one probe text as the CLI, the REPL and YAML scripts take
// it: 'SPEC [if FILTER] [=> ACTION ...]'.
type probeDef struct {
	Text    string
	Spec    *fetch.Spec
	Actions []action.Action
	// fields are the fetch-arg names known before attaching; fieldsOpen
	// when some are only known once compiled in the process (DWARF
	// names, $params), and the actions are checked then.
	fields     []string
	fieldsOpen bool
	src        *script.Probe // where a script wrote it, or nil
}

// parseProbeDef parses a probe text and checks its fetch-args, filter and
// actions as far as can be done without a process (checkArgs).
func parseProbeDef(text string) (*probeDef, error) {
	specText, actText, hasActions := action.Split(text)
	sp, err := fetch.ParseSpec(specText)
	if err != nil {
		return nil, err
	}
	if hasActions && strings.TrimSpace(actText) == "" {
		return nil, &action.Error{Token: "=>", Reason: "no action after it (want e.g. => count)"}
	}
	fields, err := checkArgs(sp)
	if err != nil {
		return nil, err
	}
	acts, err := action.Parse(actText)
	if err != nil {
		return nil, err
	}
	d := &probeDef{Text: text, Spec: sp, Actions: acts, fields: fields, fieldsOpen: fields == nil}
	if !d.fieldsOpen {
		// A throwaway session: only the checks are wanted here.
		if _, err := action.NewSession().Compile(d.target(d.fields), acts); err != nil {
			return nil, err
		}
	}
	return d, nil
}

func (d *probeDef) target(fields []string) action.Probe {
	return action.Probe{Event: d.Spec.Group + "/" + d.Spec.Event, Fields: fields, Return: d.Spec.Kind == fetch.KindReturn}
}

// parseSpecs parses the command line's probe texts; enable/disable must
// name one of them.
func parseSpecs(texts []string) ([]*probeDef, error) {
	defs := make([]*probeDef, 0, len(texts))
	for _, s := range texts {
		d, err := parseProbeDef(s)
		if err != nil {
			return nil, err
		}
		defs = append(defs, d)
	}
	for _, d := range defs {
		for _, a := range d.Actions {
			if (a.Kind == action.Enable || a.Kind == action.Disable) && findDef(defs, a.Event) == nil {
				return nil, &action.Error{Token: a.Text, Reason: fmt.Sprintf("no probe has the event name %s", a.Event)}
			}
		}
	}
	return defs, nil
}

func findDef(defs []*probeDef, event string) *probeDef {
	for _, d := range defs {
		if d.Spec.Event == event || d.Spec.Group+"/"+d.Spec.Event == event {
			return d
		}
	}
	return nil
}

// addProbes installs the probes with their actions' handler, then binds
// enable/disable to the probes they name.
func addProbes(t *probe.Tracer, defs []*probeDef, s *sink) error {
	for _, d := range defs {
		for _, a := range d.Actions {
			switch a.Kind {
			case action.TraceOn, action.TraceOff, action.Enable, action.Disable:
				// They act on the other probes at the moment of their
				// hit: none may record to be handed on later.
				s.noRecord = true
			}
		}
	}
	defs, err := expandSDT(t, defs)
	if err != nil {
		return err
	}
	plans := make([]*action.Plan, 0, len(defs))
	for _, d := range defs {
		_, pl, err := addProbe(t, d, s)
		if err != nil {
			return located(d, err)
		}
		plans = append(plans, pl)
	}
	lookup := func(event string) []*probe.Probe {
		for _, p := range t.Probes() {
			if p.Event == event || p.Name() == event {
				return []*probe.Probe{p}
			}
		}
		return nil
	}
	for _, pl := range plans {
		if err := pl.Bind(lookup); err != nil {
			return err
		}
	}
	return nil
}

// expandSDT makes a def of each SDT probe an sdt: def's globs match
// (sdt:python:*), each with the def's fetch-args and actions.
func expandSDT(t *probe.Tracer, defs []*probeDef) ([]*probeDef, error) {
	var out []*probeDef
	for _, d := range defs {
		if !d.Spec.Loc.SDT {
			out = append(out, d)
			continue
		}
		matches, err := t.SDTMatches(d.Spec.Loc)
		if err != nil && d.Spec.Loc.IsGlob() {
			return nil, located(d, err)
		}
		if err != nil || !d.Spec.Loc.IsGlob() {
			// (Not there yet, a library to come: the fields are
			// known once it is.)
			e := *d
			if err == nil {
				e.fields, e.fieldsOpen = sdtFields(d.Spec, matches[0])
			}
			out = append(out, &e)
			continue
		}
		for _, n := range matches {
			sp := *d.Spec
			sp.Loc.Provider, sp.Loc.Name = n.Provider, n.Name
			sp.Group, sp.Event = fetch.SDTEventName(n.Provider, n.Name)
			e := *d
			e.Spec = &sp
			e.fields, e.fieldsOpen = sdtFields(&sp, n)
			out = append(out, &e)
		}
	}
	return out, nil
}

// sdtFields are the field names an sdt: probe's hits have at the site of
// note n: known before the probe goes in, so that its actions are
// compiled first and may run from the records the tracee makes.
func sdtFields(sp *fetch.Spec, n symbols.SDTProbe) (fields []string, open bool) {
	names, err := sdtArgNames(sp, fetch.ParseSDTArgs(n.Args))
	if err != nil {
		return nil, true // (the install says what is wrong)
	}
	return names, false
}

// addProbe installs one probe whose hits run its actions and, when they
// print, go to the sink. The REPL and YAML loader call it for each probe
// and Bind the returned plan once the probes it names exist.
func addProbe(t probeTarget, d *probeDef, s *sink) (*probe.Probe, *action.Plan, error) {
	// The plan is compiled before the probe goes in when the field names
	// are known; otherwise right after, and until then hits are ignored.
	var plan atomic.Pointer[action.Plan]
	if !d.fieldsOpen {
		pl, err := s.acts.Compile(d.target(d.fields), d.Actions)
		if err != nil {
			return nil, nil, err
		}
		plan.Store(pl)
	}
	// Actions that read no more than a hit's fields can run from a
	// record the tracee made itself, without stopping.
	recorded := !s.noRecord && plan.Load() != nil && plan.Load().FieldsOnly()
	// Actions that only count may be counted by the tracee itself.
	var tally *probe.Tally
	if recorded {
		tally = plan.Load().Tally()
	}
	// Hits only printed may be recorded raw (raw.go).
	raw := recorded && s.rawWanted && plan.Load().PrintOnly()
	p, err := t.AddSpec(d.Spec, probe.Handler{Recorded: recorded, Tally: tally, Raw: raw, Pre: func(h *probe.Hit) {
		pl := plan.Load()
		if pl == nil {
			return
		}
		print := pl.Run(h)
		if text := pl.AppendPrinted(nil); len(text) > 0 {
			s.stream.Do(func(output.Writer) error { return s.writePrinted(text) })
		}
		if !print {
			return
		}
		r := hitRecord(h)
		if pl.Stack() {
			frames := h.Stack(maxStackFrames)
			r.Stack = make([]string, len(frames))
			for i, f := range frames {
				r.Stack[i] = f.Text
			}
		}
		s.stream.Send(r)
	}})
	if err != nil {
		if pl := plan.Load(); pl != nil {
			pl.Remove() // its tables with it: nothing of a probe refused stays
		}
		return nil, nil, err
	}
	s.notePending(p)
	s.added = append(s.added, p)
	if pl := plan.Load(); pl != nil {
		s.planned(d)
		return p, pl, nil
	}
	pl, err := s.acts.Compile(d.target(p.FieldNames()), d.Actions)
	if err != nil {
		t.Remove(p)
		return nil, nil, err
	}
	plan.Store(pl)
	s.planned(d)
	return p, pl, nil
}

// hitRecord is a probe's hit as the trace prints it.
func hitRecord(h *probe.Hit) output.Record {
	lane, goroutine := h.Lane()
	return output.Record{
		Time: h.Time, CPU: h.CPU, Pid: h.Pid, Tid: h.Tid, Comm: h.Comm,
		Event: h.Probe.Event, Where: h.Where,
		// The call stack it happened on: in function_graph, a
		// comment among that stack's calls.
		Lane: lane, Goroutine: goroutine,
		EntryTime: returnEntry(h),
		// Fields live only during the handler: keep a copy.
		Fields: append([]fetch.Field(nil), h.Fields...),
	}
}

// planned notes that d's actions have their tables.
func (s *sink) planned(d *probeDef) {
	if s.withTables == nil {
		s.withTables = map[*probeDef]bool{}
	}
	s.withTables[d] = true
}

// emptyTables gives the probes of defs that never went in (the process
// ended first) the tables of their actions, with no hits, as for a
// probe that never fired, where their fields are known before the
// process is: a count the user asked for is printed, 0.
func (s *sink) emptyTables(defs []*probeDef) {
	for _, d := range defs {
		if s.withTables[d] || d.fieldsOpen {
			continue
		}
		if _, err := s.acts.Compile(d.target(d.fields), d.Actions); err == nil {
			s.planned(d)
		}
	}
}

// printEvery prints every count, histogram and aggregate each interval
// while the trace goes on (bpftrace's interval probe printing its maps),
// among the events in their order; the tables keep adding up, or with
// clear are emptied once printed (the final tables are then the last
// interval's rest). The intervals start once the probes are placed
// (ready closed), as bpftrace's once its probes are attached: placing
// them takes up to 0.7 s under TCG, and tables printed meanwhile read 0
// hits of probes not counting yet (TestAttachStopWhileAttached). stop
// ends it, before the final tables.
func (s *sink) printEvery(interval time.Duration, clear bool, ready <-chan struct{}) (stop func()) {
	if interval <= 0 {
		return func() {}
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		select {
		case <-ready:
		case <-done:
			return
		}
		start := time.Now()
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for n := 1; ; n++ {
			select {
			case <-done:
				return
			case now := <-tick.C:
				if !s.acts.HasTables() {
					continue
				}
				var b strings.Builder
				fmt.Fprintf(&b, "# interval %d: %s\n", n, now.Sub(start).Round(time.Millisecond))
				if clear {
					s.acts.DrawAndClear(&b)
				} else {
					s.acts.Draw(&b)
				}
				s.stream.Do(func(output.Writer) error { return s.writeTables(b.String()) })
			}
		}
	}()
	return func() {
		close(done)
		wg.Wait()
	}
}

// writeTables writes drawn tables after what the writer has: as they
// are into a text trace, else as the format's comments, a line each.
func (s *sink) writeTables(tables string) error { return s.writeText(tables, "# ") }

// writePrinted writes what printf actions printed, as writeTables does
// (bpftrace's printf: a line ends where its format says), buffered with
// the events where the writer can (output.Text.Print).
func (s *sink) writePrinted(text []byte) error {
	if p, ok := s.writer.(interface{ Print([]byte) error }); ok && s.text {
		return p.Print(text)
	}
	return s.writeText(string(text), "")
}

// writeText writes text after what the writer has: as it is into a
// text trace, else as the format's comments, a line each, less mark
// (the writer marks a comment itself: "# count..." not "# # count...").
func (s *sink) writeText(text, mark string) error {
	if err := s.writer.Flush(); err != nil {
		return err
	}
	if !s.text {
		for _, line := range strings.Split(strings.TrimSuffix(text, "\n"), "\n") {
			if err := s.writer.Comment(strings.TrimPrefix(line, mark)); err != nil {
				return err
			}
		}
		return s.writer.Flush()
	}
	_, err := s.file.WriteString(text)
	return err
}

// drawActions prints the counts and histograms after the trace, as
// ftrace's hist files are read at the end.
func (s *sink) drawActions() error {
	if !s.acts.HasTables() {
		return nil
	}
	if err := s.writer.Flush(); err != nil {
		return err
	}
	var b strings.Builder
	s.acts.Draw(&b)
	// JSON, Chrome, pprof and recordings keep notes in their own way:
	// the tables go there as comments.
	return s.writeTables(b.String())
}
