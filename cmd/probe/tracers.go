package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/probedbg/probe/fetch"
	"github.com/probedbg/probe/output"
	"github.com/probedbg/probe/probe"
	"github.com/probedbg/probe/script"
)

// tracers is what --tracer and the filter flags asked for.
type tracers struct {
	function, graph, profile, stack bool
	calls                           bool // --calls: ltrace's library calls
}

func (ts tracers) any() bool     { return ts.function || ts.graph || ts.profile || ts.stack || ts.calls }
func (ts tracers) returns() bool { return ts.graph || ts.profile || ts.stack || ts.calls }

// parseTracers checks --tracer and the flags that go with it, as ftrace
// has one current tracer: function or function_graph, with the profile
// and the stack tracer beside either. The names are script.Tracers':
// a tracer is added there, here and in probe.FuncTraceOptions.
func parseTracers(o *options) (tracers, error) {
	var ts tracers
	for _, name := range strings.Split(o.tracers, ",") {
		switch strings.TrimSpace(name) {
		case "", "nop":
		case "function":
			ts.function = true
		case "function_graph":
			ts.graph = true
		case "profile":
			ts.profile = true
		case "stack":
			ts.stack = true
		default:
			return ts, fmt.Errorf("--tracer: unknown tracer %q (want %s)", name, strings.Join(script.Tracers, ", "))
		}
	}
	if ts.function && ts.graph {
		return ts, fmt.Errorf("--tracer: function and function_graph cannot run together")
	}
	if len(o.calls) > 0 {
		if ts.any() || len(o.filter) > 0 {
			return ts, fmt.Errorf("--calls: it is a tracer of its own (ltrace's); give it without --tracer and --filter")
		}
		for _, g := range o.calls {
			if strings.Trim(g, ", ") == "" {
				return ts, fmt.Errorf("--calls %q: want MOD:GLOB, e.g. 'libc:*'", g)
			}
		}
		ts.calls = true
		if o.summary && o.format != "" && o.format != "text" {
			return ts, fmt.Errorf("-c: its table is text; give it without --format %s", o.format)
		}
	} else if o.summary {
		return ts, fmt.Errorf("-c needs --calls (ltrace -c's table of the library calls)")
	} else if f := o.callLines.given(); f != "" {
		return ts, fmt.Errorf("%s needs --calls (ltrace's lines of the library calls)", f)
	} else if o.syscalls && o.noLibCalls {
		ts.calls = true // (ltrace -S -L: the system calls alone)
	} else if o.syscalls {
		return ts, fmt.Errorf("-S needs --calls (ltrace -S: the system calls among the library calls), or -L (the system calls alone)")
	}
	if o.noLibCalls && (!o.syscalls || len(o.calls) > 0) {
		return ts, fmt.Errorf("-L: no library calls, the system calls alone: give it with -S, without --calls")
	}
	if n := o.callLines.indent; n < 0 || n > 64 {
		return ts, fmt.Errorf("-n %d: want from 0 to 64 spaces a level", n)
	}
	if n := o.callLines.strlen; n < 0 {
		return ts, fmt.Errorf("-s %d: want a length of at least 1 byte", n)
	}
	if n := o.callLines.arraylen; n < 0 {
		return ts, fmt.Errorf("-A %d: want at least 1 element", n)
	}
	type flagSet struct {
		name string
		set  bool
	}
	if !ts.any() {
		for _, f := range []flagSet{{"--filter", len(o.filter) > 0}, {"--notrace", len(o.notrace) > 0}, {"--args", o.args}} {
			if f.set {
				return ts, fmt.Errorf("%s needs --tracer", f.name)
			}
		}
	}
	if !ts.returns() {
		for _, f := range []flagSet{{"--graph-function", len(o.graphFunc) > 0}, {"--max-depth", o.maxDepth != 0}, {"--graph-time-threshold", o.threshold != 0}} {
			if f.set {
				return ts, fmt.Errorf("%s needs --tracer function_graph, profile or stack", f.name)
			}
		}
	}
	if o.maxDepth < 0 {
		return ts, fmt.Errorf("--max-depth %d: want a positive depth", o.maxDepth)
	}
	if o.interval < 0 {
		return ts, fmt.Errorf("--interval %s: want a positive duration", o.interval)
	}
	if o.threshold < 0 {
		return ts, fmt.Errorf("--graph-time-threshold %s: want a positive duration", o.threshold)
	}
	return ts, checkFormat(o, ts)
}

// newWriter picks the trace format: function_graph draws everything it is
// given, probe events included; the profile's table follows the trace.
func newWriter(f io.Writer, ts tracers, o *options, probes bool) (primary, all output.Writer) {
	if w := formatWriter(f, ts, o, probes); w != nil {
		return w, w
	}
	switch {
	case ts.calls:
		wall := o.wallOffset // (a recording's)
		if wall == 0 {
			wall = output.NowClocks().Wall
		}
		primary = output.NewCalls(f, output.CallsOptions{Summary: o.summary, Stamp: o.callLines.stamp(),
			Relative: o.callLines.relative, Durations: o.callLines.durations, WallOffset: wall, Indent: o.callLines.indent, StringLen: o.callLines.strlen})
	case ts.graph:
		primary = output.NewGraph(f, output.GraphOptions{Threshold: int64(o.threshold), CPUWidth: cpuWidth(o)})
	case ts.function:
		primary = output.NewText(f, "function")
	case probes || !ts.any():
		primary = output.NewText(f, "nop")
	}
	var ws []output.Writer
	if primary != nil {
		ws = append(ws, primary)
	}
	if ts.profile {
		p := output.NewProfile(f)
		if primary == nil {
			primary = p
		}
		ws = append(ws, p)
	}
	if primary == nil { // the stack tracer alone: its report comes at the end
		primary = &commentsOnly{w: bufio.NewWriter(f)}
		ws = append(ws, primary)
	}
	if len(ws) == 1 {
		return primary, primary
	}
	return primary, output.Tee(ws...)
}

// addTracer starts the function tracer, feeding the sink.
func addTracer(t probeTarget, ts tracers, o *options, s *sink) error {
	if !ts.any() {
		return nil
	}
	opts := probe.FuncTraceOptions{
		Filter: o.filter, Notrace: o.notrace, GraphFunction: o.graphFunc, MaxDepth: o.maxDepth,
		Returns: ts.returns(), Stack: ts.stack, Callers: ts.function, Args: o.args,
	}
	if ts.calls {
		// ltrace: the program's calls into the libraries, with their
		// arguments and results.
		opts.Filter, opts.Args, opts.FromMain, opts.Errno, opts.Syscalls, opts.NoFunctions = o.calls, true, true, true, o.syscalls, o.noLibCalls
		opts.ArrayLen = o.callLines.arraylen
	}
	// The stack tracer alone reports at the end: no event per call.
	if ts.function || ts.graph || ts.profile || ts.calls {
		opts.Handler = func(ev *probe.FuncEvent) {
			s.stream.Send(funcRecord(ev))
		}
	}
	info, err := t.TraceFunctions(opts)
	if err != nil {
		return err
	}
	for _, lib := range info.Waiting {
		fmt.Fprintf(os.Stderr, "probe: function tracer: %s's functions pending until it is loaded\n", lib)
	}
	s.traced = info
	s.stack, s.calls = ts.stack, ts.calls
	return nil
}

// fieldsCopy keeps an event's fields, which live only during the handler.
func fieldsCopy(fs []fetch.Field) []fetch.Field {
	if len(fs) == 0 {
		return nil
	}
	return append([]fetch.Field(nil), fs...)
}

var recordKind = [...]output.Kind{
	probe.FuncEntry:  output.KindEntry,
	probe.FuncReturn: output.KindReturn,
	probe.FuncLost:   output.KindLost,
}

// skippedNote says which selected functions could not be traced, briefly.
func skippedNote(skipped []probe.SkippedFunc) string {
	why := make([]string, len(skipped))
	for i, sk := range skipped {
		why[i] = fmt.Sprintf("%s (%s)", sk.Func, sk.Reason)
	}
	return fmt.Sprintf("%d functions not traced: %s", len(skipped), firstNames(why, 5))
}

// firstNames is names' first n, ", and N more" after them.
func firstNames(names []string, n int) string {
	if len(names) <= n {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s, and %d more", strings.Join(names[:n], ", "), len(names)-n)
}

func stackReport(us []probe.StackUsage) []output.StackUsage {
	out := make([]output.StackUsage, 0, len(us))
	for _, u := range us {
		su := output.StackUsage{Tid: u.Tid, Comm: u.Comm, Used: u.Used}
		for _, f := range u.Frames {
			su.Frames = append(su.Frames, output.StackFrame{Location: f.Location, Used: f.Used})
		}
		out = append(out, su)
	}
	return out
}

// commentsOnly is the trace of the stack tracer alone: no events, only
// the notes at the end.
type commentsOnly struct{ w *bufio.Writer }

func (c *commentsOnly) Write(*output.Record) error { return nil }
func (c *commentsOnly) Comment(s string) error {
	_, err := fmt.Fprintf(c.w, "# %s\n", s)
	return err
}
func (c *commentsOnly) Flush() error  { return c.w.Flush() }
func (c *commentsOnly) Finish() error { return c.w.Flush() }

// callLines are ltrace's options for its lines: their times, indent and
// strings' length.
type callLines struct {
	t, tt, ttt bool // -t, -tt, -ttt: the time of day, with microseconds, since the epoch
	relative   bool // -r: since the last line
	durations  bool // -T: spent in each call
	indent     int  // -n: spaces a nesting level
	strlen     int  // -s: the most bytes of a string shown
	arraylen   int  // -A: the most elements of an array shown
}

func (c *callLines) flags(fs *flag.FlagSet) {
	fs.BoolVar(&c.t, "t", false, "")
	fs.BoolVar(&c.tt, "tt", false, "")
	fs.BoolVar(&c.ttt, "ttt", false, "")
	fs.BoolVar(&c.relative, "r", false, "")
	fs.BoolVar(&c.durations, "T", false, "")
	fs.IntVar(&c.indent, "n", 0, "")
	fs.IntVar(&c.strlen, "s", 0, "")
	fs.IntVar(&c.arraylen, "A", 0, "")
}

// stamp is output.CallsOptions.Stamp: the most precise asked for.
func (c *callLines) stamp() int {
	switch {
	case c.ttt:
		return 3
	case c.tt:
		return 2
	case c.t:
		return 1
	}
	return 0
}

// given names a flag of them that was given, or is "".
func (c *callLines) given() string {
	for _, f := range []struct {
		name string
		set  bool
	}{{"-t", c.t}, {"-tt", c.tt}, {"-ttt", c.ttt}, {"-r", c.relative}, {"-T", c.durations}, {"-n", c.indent != 0}, {"-s", c.strlen != 0}, {"-A", c.arraylen != 0}} {
		if f.set {
			return f.name
		}
	}
	return ""
}
