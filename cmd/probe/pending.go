package main

import (
	"fmt"
	"os"

	"github.com/probedbg/probe/probe"
)

// notePending says on stderr that p waits for its library (dlopen), and
// keeps it for the summary.
func (s *sink) notePending(p *probe.Probe) {
	if !p.Pending() {
		return
	}
	fmt.Fprintf(os.Stderr, "probe: %s pending until %s is loaded\n", p.Event, p.Spec.Loc.Module)
	s.pending = append(s.pending, p)
}

// pendingSummary notes, after the trace, the probes whose library was
// never loaded: not an error, but no hit could have come from them.
func (s *sink) pendingSummary() {
	for _, p := range s.pending {
		if !p.EverInstalled() {
			s.writer.Comment(fmt.Sprintf("%s was never installed: %s was not loaded", p.Event, p.Spec.Loc.Module))
		}
	}
}
