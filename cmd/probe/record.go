package main

import (
	"slices"

	"github.com/probedbg/probe/output"
)

// cmdRecord records a trace to a file for probe report, as perf record:
// with "-- CMD" it launches CMD, otherwise it attaches to a PID. The flags
// are run's and attach's.
func cmdRecord(args []string) (int, error) {
	o, _, _, err := parseFlags(args)
	if err != nil {
		return bad("%v", err)
	}
	if o.out == "" {
		return bad("record: missing -o FILE (usage: probe record -o FILE [flags] [SPEC ...] -- CMD | PID [SPEC ...])")
	}
	if o.format != "" {
		return bad("record: --format %s: a recording keeps the records; give --format to probe report", o.format)
	}
	if output.IsOTLPTarget(o.out) {
		return bad("record: -o %s: a recording is a file; send it with probe report --format otlp -o %s FILE", o.out, o.out)
	}
	if ts, err := parseTracers(&o); err == nil && ts.stack {
		return bad("record: --tracer stack reports at detach only and is not recorded")
	}
	if slices.Contains(args, "--") {
		return cmdRun(args, true)
	}
	return cmdAttach(args, true)
}
