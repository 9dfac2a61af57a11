package main

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/probedbg/probe/probe"
	"github.com/probedbg/probe/script"
)

// applyScript loads --script and merges it into the command line: the
// script's values are defaults that flags given on the command line
// override, and the command line's specs come after the script's probes.
// Everything is checked here, before any process is touched.
func applyScript(o *options, cliSpecs []string, attach bool) ([]string, error) {
	s, err := script.Load(o.script, validateProbeText)
	if err != nil {
		return nil, err
	}
	if !o.set["tracer"] && len(s.Tracer.Names) > 0 {
		o.tracers = strings.Join(s.Tracer.Names, ",")
	}
	if !o.set["filter"] && s.Tracer.Filter != nil {
		o.filter = s.Tracer.Filter
	}
	if !o.set["notrace"] && s.Tracer.Notrace != nil {
		o.notrace = s.Tracer.Notrace
	}
	if !o.set["graph-function"] && s.Tracer.GraphFunction != nil {
		o.graphFunc = s.Tracer.GraphFunction
	}
	if !o.set["max-depth"] && s.Tracer.MaxDepth != 0 {
		o.maxDepth = s.Tracer.MaxDepth
	}
	if !o.set["graph-time-threshold"] && s.Tracer.Threshold != 0 {
		o.threshold = s.Tracer.Threshold
	}
	if s.Tracer.Pos.Line != 0 {
		// The tracers' rules (function_graph with function...) live in
		// parseTracers: say where the script broke one.
		if _, err := parseTracers(o); err != nil {
			return nil, fmt.Errorf("%s: %v", s.Tracer.Pos, err)
		}
	}
	if !o.set["o"] && s.Output.File != "" {
		o.out = s.Output.File
	}
	if f := s.Output.Format; f != "" && f != "text" {
		return nil, fmt.Errorf("%s: output.format %q: this build writes text only", s.Output.Pos, f)
	}
	if s.DurationPos.Line != 0 {
		if !attach {
			return nil, fmt.Errorf("%s: duration: applies to attach only (run traces until the program exits)", s.DurationPos)
		}
		if !o.set["duration"] {
			o.duration = s.Duration
		}
	}
	var specs []string
	for _, p := range s.Probes {
		spec, _ := splitActions(p.Text)
		specs = append(specs, spec)
	}
	return append(specs, cliSpecs...), nil
}

// splitActions cuts a probe text at "=>": SPEC [if FILTER] => ACTION ...
func splitActions(text string) (spec string, actions []string) {
	words := strings.Fields(text)
	for i, w := range words {
		if w == "=>" {
			return strings.Join(words[:i], " "), words[i+1:]
		}
	}
	return text, nil
}

// validateProbeText checks a probe text without a process: the spec's
// grammar, the fetch-args' syntax and types, the filter when no field
// needs DWARF, and the actions. What needs the process (symbols, DWARF
// names) is checked when the probe is added.
func validateProbeText(text string) error {
	specText, actions := splitActions(text)
	sp, err := probe.ParseSpec(specText)
	if err != nil {
		var se *probe.SpecError
		if errors.As(err, &se) {
			return &script.TokenError{Token: se.Token, Err: err}
		}
		return err
	}
	fields, err := checkArgs(sp)
	if err != nil {
		return err
	}
	for _, a := range actions {
		if err := checkAction(a, sp, fields); err != nil {
			return &script.TokenError{Token: a, Err: err}
		}
	}
	return nil
}

// anyVar stands for a DWARF variable when checking fetch-args without
// the process: the name is resolved when the probe is added.
type anyVar struct{}

func (anyVar) Read(*probe.HitEnv) (uint64, string, error) { return 0, "", nil }

// checkArgs compiles the fetch-args with stand-ins for symbols and DWARF
// and returns the field names (nil when $params hides them). A filter is
// compiled too unless a field is a DWARF name, whose type decides how it
// compares.
func checkArgs(sp *probe.Spec) (fields []string, err error) {
	args, hasFilter := sp.Args, false
	for i, tok := range args {
		if tok == "if" {
			hasFilter = true
			if dwarfNames(args[:i]) {
				args = args[:i]
			}
			break
		}
	}
	params := false
	env := probe.CompileEnv{
		Return:        sp.Kind == probe.KindReturn,
		ResolveSymbol: func(string) (uint64, error) { return 0x1000, nil },
		DWARF:         func(string) (probe.DwarfVar, error) { return anyVar{}, nil },
		Params:        func() ([]string, error) { params = true; return nil, nil },
	}
	compiled, err := probe.CompileArgs(args, env)
	if err != nil {
		var ae *probe.ArgError
		if errors.As(err, &ae) {
			tok := ae.Token
			if hasFilter && strings.HasPrefix(err.Error(), "bad filter") {
				tok = "if"
			}
			return nil, &script.TokenError{Token: tok, Err: fmt.Errorf("bad probe %q: %w", sp.Text, err)}
		}
		return nil, err
	}
	if params {
		return nil, nil
	}
	return compiled.Names(), nil
}

// dwarfNames reports whether a fetch-arg names a DWARF variable.
func dwarfNames(tokens []string) bool {
	for _, tok := range tokens {
		if _, fetch, ok := strings.Cut(tok, "="); ok {
			tok = fetch
		}
		if tok != "" && !strings.ContainsRune("%@+-\\$", rune(tok[0])) {
			return true
		}
	}
	return false
}

var (
	eventNameRE = regexp.MustCompile(`^([A-Za-z_][A-Za-z0-9_]*/)?[A-Za-z_][A-Za-z0-9_]*$`)
	histRE      = regexp.MustCompile(`^hist:([^:]+)(:log2|:linear=(.*))?$`)
)

// checkAction checks one action word against the grammar:
// print, count[:KEY,...], hist:FIELD[:log2|:linear=STEP], stacktrace,
// traceon, traceoff, enable:EVENT, disable:EVENT. fields are the probe's
// field names (nil: not known without the process).
func checkAction(a string, sp *probe.Spec, fields []string) error {
	known := func(what, name string, extra ...string) error {
		if fields == nil {
			return nil
		}
		for _, f := range append(fields, extra...) {
			if f == name {
				return nil
			}
		}
		return fmt.Errorf("action %q: %s %q is not a field of %s (fields: %s)", a, what, name, sp.Event, strings.Join(append(fields, extra...), ", "))
	}
	name, arg, hasArg := strings.Cut(a, ":")
	switch {
	case !hasArg && (name == "print" || name == "count" || name == "stacktrace" || name == "traceon" || name == "traceoff"):
		return nil
	case name == "count" && hasArg:
		for _, k := range strings.Split(arg, ",") {
			if k == "" {
				return fmt.Errorf("action %q: empty key (want count:KEY[,KEY...])", a)
			}
			if err := known("key", k, "comm", "tid", "cpu"); err != nil {
				return err
			}
		}
		return nil
	case (name == "enable" || name == "disable") && hasArg:
		if !eventNameRE.MatchString(arg) {
			return fmt.Errorf("action %q: want %s:EVENT, an event name", a, name)
		}
		return nil
	case name == "hist":
		m := histRE.FindStringSubmatch(a)
		if m == nil {
			return fmt.Errorf("action %q: want hist:FIELD[:log2|:linear=STEP]", a)
		}
		if m[2] != "" && m[2] != ":log2" {
			if step, err := strconv.ParseUint(m[3], 10, 63); err != nil || step == 0 {
				return fmt.Errorf("action %q: bad step %q (want a positive whole number)", a, m[3])
			}
		}
		if m[1] == "duration" {
			if sp.Kind != probe.KindReturn {
				return fmt.Errorf("action %q: duration needs a return probe (r:), not %s", a, sp.Event)
			}
			return nil
		}
		return known("field", m[1])
	}
	return fmt.Errorf("unknown action %q (want print, count[:KEY,...], hist:FIELD[:log2|:linear=STEP], stacktrace, traceon, traceoff, enable:EVENT, disable:EVENT)", a)
}
