package output

import (
	"io"
	"strings"
)

// Needs is what a format needs of the trace to have something to show.
type Needs uint8

const (
	// AnyTrace: any tracer's events and any probe's hits.
	AnyTrace Needs = iota
	// CallsAndReturns: calls and their returns (function_graph, profile).
	CallsAndReturns
	// CallStacks: call stacks, built from calls and returns or carried by
	// probe hits (the stacktrace action).
	CallStacks
)

// A Format is one of the trace's formats. Each is declared once, in
// Formats: the command line, its help, scripts and the REPL read it.
type Format struct {
	Name string
	// Help says what it is, in a phrase for --help.
	Help  string
	Needs Needs
	// Binary formats are not written to a terminal.
	Binary bool
	// Collector formats are sent to a URL (-o), not written to a file.
	Collector bool
	// Sectioned formats can be cut into sections, one a tracer, as the
	// REPL's output command does; the others are one document a trace.
	Sectioned bool
	// New makes its writer; nil for text, whose writer depends on the
	// tracers (function_graph's, --calls'...).
	New func(w io.Writer, o FormatOptions) (Writer, error)
}

// FormatOptions is what some formats' writers need to know.
type FormatOptions struct {
	// Returns: the trace has returns (Chrome's spans, not instants).
	Returns bool
	// Clocks maps the trace's clock to the wall's and boot's (Perfetto).
	Clocks PerfettoClocks
	// Program names the traced program (the call graph's root, OTLP's
	// service).
	Program string
	// Target is the collector's URL (OTLP); Pid the traced process.
	Target string
	Pid    int
	// Notes is where a format with no place for comments says them
	// (folded: stderr).
	Notes io.Writer
}

// Formats is every format, the default first.
var Formats = []Format{
	{Name: "text", Help: "ftrace's text (the default)", Sectioned: true},
	{Name: "json", Help: "a JSON object a line", Sectioned: true,
		New: func(w io.Writer, _ FormatOptions) (Writer, error) { return NewJSON(w), nil }},
	{Name: "chrome", Help: "Chrome's trace events (chrome://tracing)",
		New: func(w io.Writer, o FormatOptions) (Writer, error) { return NewChrome(w, o.Returns), nil }},
	{Name: "perfetto", Help: "Perfetto's protobuf trace", Binary: true,
		New: func(w io.Writer, o FormatOptions) (Writer, error) { return NewPerfetto(w, o.Clocks), nil }},
	{Name: "pprof", Help: "a pprof profile of the call stacks", Needs: CallStacks, Binary: true,
		New: func(w io.Writer, _ FormatOptions) (Writer, error) { return NewPprof(w), nil }},
	{Name: "folded", Help: "folded call stacks (flame graphs)", Needs: CallStacks,
		New: func(w io.Writer, o FormatOptions) (Writer, error) { return NewFolded(w, o.Notes), nil }},
	{Name: "graph", Help: "uftrace's call graph", Needs: CallsAndReturns,
		New: func(w io.Writer, o FormatOptions) (Writer, error) { return NewCallGraph(w, o.Program), nil }},
	{Name: "profile", Help: "uftrace report: calls and time by function", Needs: CallsAndReturns,
		New: func(w io.Writer, _ FormatOptions) (Writer, error) { return NewProfile(w), nil }},
	{Name: "otlp", Help: "spans to an OpenTelemetry collector,\n-o otlp://HOST:PORT[/PATH] (OTLP/HTTP)", Collector: true,
		New: func(_ io.Writer, o FormatOptions) (Writer, error) {
			return NewOTLP(o.Target, o.Program, o.Pid, o.Clocks.Wall)
		}},
}

// FormatNamed is the format of that name.
func FormatNamed(name string) (*Format, bool) {
	for i := range Formats {
		if Formats[i].Name == name {
			return &Formats[i], true
		}
	}
	return nil, false
}

// FormatNames lists the formats' names for a message: "text, json, ...
// or otlp".
func FormatNames() string {
	names := FormatsWhere(func(*Format) bool { return true })
	last := len(names) - 1
	return strings.Join(names[:last], ", ") + " or " + names[last]
}

// FormatsWhere is the names of the formats keep keeps, in the table's
// order.
func FormatsWhere(keep func(*Format) bool) []string {
	var names []string
	for i := range Formats {
		if keep(&Formats[i]) {
			names = append(names, Formats[i].Name)
		}
	}
	return names
}

// FormatHelp is the formats' help, a format a line (or two): every line
// but the first starts with indent.
func FormatHelp(indent string) string {
	name := 0
	for _, f := range Formats {
		name = max(name, len(f.Name))
	}
	under := "\n" + indent + strings.Repeat(" ", name+2)
	var b strings.Builder
	for i, f := range Formats {
		if i > 0 {
			b.WriteString("\n" + indent)
		}
		help := strings.ReplaceAll(f.Help, "\n", under)
		line := f.Name + strings.Repeat(" ", name+2-len(f.Name)) + help
		needs := ""
		switch f.Needs {
		case CallsAndReturns:
			needs = "(function_graph)"
		case CallStacks:
			needs = "(function_graph, or probes' => stacktrace)"
		}
		last := line[strings.LastIndexByte(line, '\n')+1:]
		if needs != "" && len(indent)+len(last)+1+len(needs) > 80 {
			line += under + needs
		} else if needs != "" {
			line += " " + needs
		}
		b.WriteString(line)
	}
	return b.String()
}
