package output

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"
)

// Summary is what a recording holds, for probe report --info (uftrace
// info): its header and a count of its records.
type Summary struct {
	Path                  string // the file
	Info                  RecordingInfo
	Records               int
	Entries, Returns      int
	LostReturns, Probes   int
	Threads               map[int]string // tid: comm
	Functions             map[string]int // entries by function
	Events                map[string]int // probe events by name
	First, Last           int64          // the records' times
	Notes                 []string       // the trace's comments: events lost, returns lost...
	Whole                 bool           // the recording ended as its recorder ended it
	TruncatedAfterRecords int
	// Raw is how many of the records were decoded from the tracee's
	// own (a raw capture: Replay's FrameHandler).
	Raw int
}

// Summarize reads the rest of rec, the frames it does not decode itself
// by other (Replay); one cut short says so (Whole).
func (rec *Recording) Summarize(other FrameHandler) *Summary {
	s := &summarizer{sum: Summary{Info: rec.Info, Threads: map[int]string{}, Functions: map[string]int{}, Events: map[string]int{}}}
	if inner := other; inner != nil {
		other = func(kind byte, payload []byte, cut bool, out ReplayOut) error {
			return inner(kind, payload, cut, rawCounter{out, &s.sum.Raw})
		}
	}
	n, err := rec.Replay(s, s, other) // (the summarizer fails no write: an error is the cut)
	s.sum.Whole = err == nil
	if err != nil {
		s.sum.TruncatedAfterRecords = n
	}
	return &s.sum
}

type summarizer struct{ sum Summary }

// rawCounter counts the records a FrameHandler makes.
type rawCounter struct {
	ReplayOut
	n *int
}

func (c rawCounter) Record(r *Record) { *c.n++; c.ReplayOut.Record(r) }

func (s *summarizer) Write(r *Record) error {
	m := &s.sum
	m.Records++
	if m.First == 0 || r.Time < m.First {
		m.First = r.Time
	}
	m.Last = max(m.Last, r.Time)
	m.Threads[r.Tid] = r.Comm
	switch r.Kind {
	case KindEntry:
		m.Entries++
		m.Functions[r.Func]++
	case KindReturn:
		m.Returns++
	case KindLost:
		m.LostReturns++
	case KindProbe:
		m.Probes++
		m.Events[r.Event]++
	}
	return nil
}

func (s *summarizer) Comment(c string) error { s.sum.Notes = append(s.sum.Notes, c); return nil }
func (s *summarizer) Flush() error           { return nil }
func (s *summarizer) Finish() error          { return nil }

// WriteTo prints the summary, one "# key: value" line each, the most
// called functions and the events first.
func (m *Summary) WriteTo(w io.Writer) (int64, error) {
	var b strings.Builder
	line := func(key, format string, args ...any) {
		fmt.Fprintf(&b, "# %-14s %s\n", key+":", fmt.Sprintf(format, args...))
	}
	i := m.Info
	if m.Path != "" {
		line("recording", "%s", m.Path)
	}
	if len(i.Command) > 0 {
		line("command", "%s", strings.Join(i.Command, " "))
	}
	if i.Pid != 0 {
		how := "launched"
		if i.Attached {
			how = "attached"
		}
		line("process", "%d (%s)", i.Pid, how)
	}
	if i.Host != "" {
		line("machine", "%s, %s, Linux %s", i.Host, i.Arch, i.Kernel)
	}
	if !i.Started.IsZero() {
		line("recorded", "%s", i.Started.Format(time.RFC3339))
	}
	tracers := i.Tracers
	if tracers == "" {
		tracers = "nop"
	}
	line("tracers", "%s", tracers)
	if i.Threshold > 0 {
		line("threshold", "%v", time.Duration(i.Threshold))
	}
	state := "whole"
	if !m.Whole {
		state = fmt.Sprintf("cut short after %d records", m.TruncatedAfterRecords)
	}
	line("records", "%d (%s): %d entries, %d returns, %d returns lost, %d probe events", m.Records, state, m.Entries, m.Returns, m.LostReturns, m.Probes)
	if m.Raw > 0 {
		line("raw", "%d of them decoded from the records the tracee made (a raw capture)", m.Raw)
	}
	if m.Records > 0 {
		line("time", "%d.%06d to %d.%06d (%s)", m.First/1e9, m.First%1e9/1e3, m.Last/1e9, m.Last%1e9/1e3, time.Duration(m.Last-m.First))
	}
	tids := slices.Sorted(maps.Keys(m.Threads))
	var ts []string
	for _, t := range tids {
		ts = append(ts, fmt.Sprintf("%s-%d", m.Threads[t], t))
	}
	line("threads", "%d: %s", len(tids), strings.Join(ts, " "))
	if len(m.Functions) > 0 {
		line("functions", "%d: %s", len(m.Functions), topCounts(m.Functions, 10))
	}
	if len(m.Events) > 0 {
		line("events", "%d: %s", len(m.Events), topCounts(m.Events, 10))
	}
	for _, n := range m.Notes {
		line("note", "%s", n)
	}
	n, err := io.WriteString(w, b.String())
	return int64(n), err
}

// topCounts lists the n largest counts, "name count" by count then name.
func topCounts(counts map[string]int, n int) string {
	names := slices.Collect(maps.Keys(counts))
	slices.SortFunc(names, func(a, b string) int {
		if counts[a] != counts[b] {
			return counts[b] - counts[a]
		}
		return strings.Compare(a, b)
	})
	var parts []string
	for i, name := range names {
		if i == n {
			parts = append(parts, fmt.Sprintf("and %d more", len(names)-n))
			break
		}
		parts = append(parts, fmt.Sprintf("%s %d", name, counts[name]))
	}
	return strings.Join(parts, ", ")
}
