package main

import (
	"errors"
	"fmt"
	"strings"

	"github.com/probedbg/probe/action"
	"github.com/probedbg/probe/fetch"
	"github.com/probedbg/probe/script"
	"github.com/probedbg/probe/symbols"
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
	if !o.set["args"] && s.Tracer.Args {
		o.args = true
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
	if f := s.Output.Format; f != "" && !o.set["format"] {
		o.format = f
		// Some formats need some tracers (checkFormat): say where.
		if _, err := parseTracers(o); err != nil && strings.HasPrefix(err.Error(), "--format") {
			return nil, fmt.Errorf("%s: %v", s.Output.Pos, err)
		}
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
	for i := range s.Probes {
		specs = append(specs, s.Probes[i].Text)
		o.scriptProbes = append(o.scriptProbes, &s.Probes[i])
	}
	return append(specs, cliSpecs...), nil
}

// locateScriptProbes gives the probes that came from the script (the first
// of defs, as applyScript put them) their place in it, where an error found
// when the probe is added is reported.
func locateScriptProbes(defs []*probeDef, o *options) {
	for i, src := range o.scriptProbes {
		if i < len(defs) {
			defs[i].src = src
		}
	}
}

// located is err, from adding d to the process, at d's place in its script
// if it came from one: at the node of the token the error names.
func located(d *probeDef, err error) error {
	if d.src == nil || err == nil {
		return err
	}
	token := ""
	var us *symbols.UnknownSymbolError
	var ae *fetch.ArgError
	switch {
	case errors.As(err, &us):
		token = us.Name
	case errors.As(err, &ae):
		token = ae.Token
	case strings.HasSuffix(err.Error(), "already exists"):
		token = d.Spec.Group + "/" + d.Spec.Event
	}
	return d.src.Locate(err, token)
}

// validateProbeText is parseProbeDef for a YAML script: its errors name
// the token at fault, so that the script can say where it is.
func validateProbeText(text string) error {
	_, err := parseProbeDef(text)
	var se *fetch.SpecError
	var ae *fetch.ArgError
	var acte *action.Error
	switch {
	case errors.As(err, &se):
		return &script.TokenError{Token: se.Token, Err: err}
	case errors.As(err, &ae):
		tok := ae.Token
		if strings.HasPrefix(err.Error(), "bad filter") {
			tok = "if"
		}
		specText, _, _ := action.Split(text)
		return &script.TokenError{Token: tok, Err: fmt.Errorf("bad probe %q: %w", strings.TrimSpace(specText), err)}
	case errors.As(err, &acte):
		return &script.TokenError{Token: acte.Token, Err: err}
	}
	return err
}

// anyVar stands for a DWARF variable when checking fetch-args without
// the process: the name is resolved when the probe is added.
type anyVar struct{}

func (anyVar) Read(*fetch.HitEnv) (uint64, string, error) { return 0, "", nil }

// checkArgs compiles the fetch-args with stand-ins for symbols and DWARF,
// which are resolved when the probe is added, and returns the field names
// (nil when $params hides them until then; empty when there are none). A
// filter is compiled too unless a field is a DWARF name, whose type
// decides how it compares.
func checkArgs(sp *fetch.Spec) (fields []string, err error) {
	args := sp.Args
	if sp.Loc.SDT {
		// $argN are known once the notes are read: checked as any
		// registers, the fields open until then.
		some := make([]fetch.SDTArg, 12) // (sys/sdt.h's most)
		for i := range some {
			some[i] = fetch.SDTArg{Fetch: `\0`, Type: "u64"}
		}
		_, err := sdtArgNames(sp, some)
		return nil, err
	}
	for i, tok := range args {
		if tok == "if" {
			if dwarfNames(args[:i]) || sp.Kind == fetch.KindOverride {
				// (An o: probe's filter may name its function's
				// parameters, known once the function is found.)
				args = args[:i]
			}
			break
		}
	}
	params := false
	env := fetch.CompileEnv{
		Return:        sp.Kind == fetch.KindReturn,
		ResolveSymbol: anySymbol,
		DWARF:         func(string) (fetch.DwarfVar, error) { return anyVar{}, nil },
		Params:        func() ([]string, error) { params = true; return nil, nil },
	}
	compiled, err := fetch.Compile(args, env)
	if err != nil {
		return nil, err
	}
	if params || sp.Kind == fetch.KindOverride {
		return nil, nil
	}
	return append([]string{}, compiled.Names()...), nil // known, even if none
}

// anySymbol resolves every symbol, for checks without a process.
func anySymbol(string) (uint64, error) { return 0x1000, nil }

// sdtArgNames compiles an sdt: spec's fetch-args as they are at a site
// whose note has arguments args, and returns their names.
func sdtArgNames(sp *fetch.Spec, args []fetch.SDTArg) ([]string, error) {
	tokens, err := fetch.SDTFetchArgs(sp.Args, args)
	if err != nil {
		return nil, &fetch.SpecError{Spec: sp.Text, Reason: err.Error()}
	}
	compiled, err := fetch.Compile(tokens, fetch.CompileEnv{ResolveSymbol: anySymbol})
	if err != nil {
		return nil, err
	}
	return append([]string{}, compiled.Names()...), nil
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
