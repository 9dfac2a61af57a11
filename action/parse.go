// Package action is what a probe does at a hit besides printing: count,
// hist, stacktrace, traceon/traceoff, enable/disable, as ftrace's event
// triggers. The CLI, the REPL and YAML scripts share one grammar:
//
//	SPEC [if FILTER] [=> ACTION ...]
//	'p:malloc size=%di:u64 if size > 64 => count:comm hist:size stacktrace'
//
// Parse the action texts, Compile them for a probe within a Session, run
// the Plan from the probe's handler, and Draw the counts and histograms.
package action

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/probedbg/probe/fetch"
)

// Kind is what one action does.
type Kind int

const (
	Print      Kind = iota // print the event
	Count                  // count hits, by the values of Keys
	Hist                   // histogram of Field
	Stacktrace             // print the event and the user stack
	TraceOn                // turn event printing on for all probes
	TraceOff               // ... and off
	Enable                 // enable the probe named Event
	Disable                // disable it
	Sum                    // the sum of Field, by the values of Keys
	Avg                    // its mean
	Min                    // its least value
	Max                    // its greatest
	Printf                 // print Format with Args, and not the event
	Mark                   // note the hit's time for its thread, as Field
)

// Action is one parsed action token.
type Action struct {
	Kind  Kind
	Text  string   // the token as written
	Keys  []string // Count, Sum..Max, Hist: fetch-arg names or comm, pid, tid, cpu, stack; none: one total
	Field string   // Hist, Sum..Max: a fetch-arg name, or "duration"
	Step  uint64   // Hist: the bucket width of a linear histogram; 0 for log2
	Event string   // Enable, Disable: [GRP/]EVENT
	// Printf: the format (C's, its escapes undone) and the names of
	// its arguments, fields or comm, pid, tid, cpu, duration.
	Format string
	Args   []string
}

// Duration is the Hist field that is a return probe's call duration (ns).
const Duration = "duration"

// StackKey is the key that is the user stack at the hit, its functions
// outermost first: "main;worker;work".
const StackKey = "stack"

// aggregates are the actions that reduce a field, by name.
var aggregates = map[string]Kind{"sum": Sum, "avg": Avg, "min": Min, "max": Max}

// Error is a bad action; it is a fetch.ErrBadInput.
type Error struct {
	Token  string
	Reason string
}

func (e *Error) Error() string        { return fmt.Sprintf("bad action %q: %s", e.Token, e.Reason) }
func (e *Error) Is(target error) bool { return target == fetch.ErrBadInput }
func bad(tok, format string, a ...any) error {
	return &Error{Token: tok, Reason: fmt.Sprintf(format, a...)}
}

// Split cuts a probe text at its "=>": the spec (with any filter) before,
// the actions after. A "=>" inside a quoted string of the filter does not
// count. has is false when there is no "=>".
func Split(text string) (spec, actions string, has bool) {
	var quote byte
	for i := 0; i < len(text); i++ {
		c := text[i]
		switch {
		case quote != 0 && c == '\\':
			i++ // an escaped character, the quote included
		case quote != 0:
			if c == quote {
				quote = 0
			}
		case c == '"' || c == '\'':
			quote = c
		case c == '=' && i+1 < len(text) && text[i+1] == '>':
			return strings.TrimSpace(text[:i]), strings.TrimSpace(text[i+2:]), true
		}
	}
	return text, "", false
}

// Parse parses whitespace-separated action tokens. It checks the syntax
// only; Compile checks the names against a probe.
func Parse(text string) ([]Action, error) {
	toks, err := tokens(text)
	if err != nil {
		return nil, err
	}
	acts := make([]Action, 0, len(toks))
	for _, tok := range toks {
		a, err := parseOne(tok)
		if err != nil {
			return nil, err
		}
		acts = append(acts, a)
	}
	return acts, nil
}

// tokens cuts text at white space outside quotes and parentheses: a
// printf's format and arguments are one token.
func tokens(text string) ([]string, error) {
	var toks []string
	start, depth := -1, 0
	var quote byte
	for i := 0; i < len(text); i++ {
		c := text[i]
		switch {
		case quote != 0 && c == '\\':
			i++
		case quote != 0:
			if c == quote {
				quote = 0
			}
		case c == '"':
			quote = c
		case c == '(':
			depth++
		case c == ')':
			depth--
		case depth == 0 && (c == ' ' || c == '\t' || c == '\n'):
			if start >= 0 {
				toks = append(toks, text[start:i])
				start = -1
			}
			continue
		}
		if start < 0 {
			start = i
		}
	}
	if start >= 0 {
		toks = append(toks, text[start:])
	}
	if quote != 0 || depth != 0 {
		tok := text
		if len(toks) > 0 {
			tok = toks[len(toks)-1]
		}
		return nil, bad(tok, "an unclosed quote or parenthesis")
	}
	return toks, nil
}

func parseOne(tok string) (Action, error) {
	if strings.HasPrefix(tok, "printf(") {
		return parsePrintf(tok)
	}
	name, arg, hasArg := strings.Cut(tok, ":")
	a := Action{Text: tok}
	noArg := func(k Kind) (Action, error) {
		if hasArg {
			return a, bad(tok, "%s takes no argument", name)
		}
		a.Kind = k
		return a, nil
	}
	switch name {
	case "print":
		return noArg(Print)
	case "stacktrace":
		return noArg(Stacktrace)
	case "traceon":
		return noArg(TraceOn)
	case "traceoff":
		return noArg(TraceOff)
	case "count":
		a.Kind = Count
		if !hasArg {
			return a, nil
		}
		var err error
		a.Keys, err = parseKeys(tok, arg)
		return a, err
	case "sum", "avg", "min", "max":
		a.Kind = aggregates[name]
		field, keys, hasKeys := strings.Cut(arg, ":")
		if !hasArg || !isValueName(field) {
			return a, bad(tok, "want %s:FIELD[:KEY,...]", name)
		}
		a.Field = field
		if hasKeys {
			var err error
			a.Keys, err = parseKeys(tok, keys)
			return a, err
		}
		return a, nil
	case "hist":
		a.Kind = Hist
		field, modes, _ := strings.Cut(arg, ":")
		if !hasArg || !isValueName(field) {
			return a, bad(tok, "want hist:FIELD[:log2|:linear=STEP][:key=KEY,...]")
		}
		a.Field = field
		scale := ""
		for mode := range strings.SplitSeq(modes, ":") {
			if mode == "log2" || strings.HasPrefix(mode, "linear=") {
				if scale != "" {
					return a, bad(tok, "%s and %s: a histogram has one scale", scale, mode)
				}
				scale = mode
			}
			switch {
			case mode == "" && modes == "", mode == "log2":
			case strings.HasPrefix(mode, "linear="):
				step, err := strconv.ParseUint(strings.TrimPrefix(mode, "linear="), 0, 64)
				if err != nil || step == 0 {
					return a, bad(tok, "bad STEP %q (want a positive integer)", strings.TrimPrefix(mode, "linear="))
				}
				a.Step = step
			case strings.HasPrefix(mode, "key="):
				var err error
				if a.Keys, err = parseKeys(tok, strings.TrimPrefix(mode, "key=")); err != nil {
					return a, err
				}
			default:
				return a, bad(tok, "unknown histogram option %q (want log2, linear=STEP or key=KEY,...)", mode)
			}
		}
		return a, nil
	case "mark":
		a.Kind = Mark
		if !hasArg || !isIdent(arg) {
			return a, bad(tok, "want mark:NAME")
		}
		a.Field = arg
		return a, nil
	case "enable", "disable":
		a.Kind = Enable
		if name == "disable" {
			a.Kind = Disable
		}
		grp, ev, hasGrp := strings.Cut(arg, "/")
		if !hasGrp {
			grp, ev = "", arg
		}
		if !hasArg || !isIdent(ev) || hasGrp && !isIdent(grp) {
			return a, bad(tok, "want %s:[GRP/]EVENT", name)
		}
		a.Event = arg
		return a, nil
	}
	return a, bad(tok, "unknown action (want print, printf, count, sum, avg, min, max, hist, stacktrace, mark, traceon, traceoff, enable or disable)")
}

// parsePrintf reads printf("FORMAT", ARG, ...): a C format string (its
// escapes as Go's), then field names.
func parsePrintf(tok string) (Action, error) {
	a := Action{Kind: Printf, Text: tok}
	inner, ok := strings.CutSuffix(strings.TrimPrefix(tok, "printf("), ")")
	if !ok || !strings.HasPrefix(inner, `"`) {
		return a, bad(tok, `want printf("FORMAT", FIELD, ...)`)
	}
	end := 1
	for end < len(inner) && inner[end] != '"' {
		if inner[end] == '\\' {
			end++
		}
		end++
	}
	if end >= len(inner) {
		return a, bad(tok, "the format's quote is not closed")
	}
	format, err := strconv.Unquote(inner[:end+1])
	if err != nil {
		return a, bad(tok, "bad format %s: %v", inner[:end+1], err)
	}
	a.Format = format
	rest := strings.TrimSpace(inner[end+1:])
	if rest != "" {
		list, ok := strings.CutPrefix(rest, ",")
		if !ok {
			return a, bad(tok, "want a comma after the format")
		}
		for arg := range strings.SplitSeq(list, ",") {
			arg = strings.TrimSpace(arg)
			if !isValueName(arg) {
				return a, bad(tok, "bad argument %q (want a fetch-arg name, comm, pid, tid, cpu, duration or @MARK)", arg)
			}
			a.Args = append(a.Args, arg)
		}
	}
	if _, err := compileFormat(a.Format, len(a.Args)); err != nil {
		return a, bad(tok, "%v", err)
	}
	return a, nil
}

// parseKeys reads a comma list of keys.
func parseKeys(tok, list string) ([]string, error) {
	var keys []string
	for _, k := range strings.Split(list, ",") {
		if !isIdent(k) {
			return nil, bad(tok, "bad key %q (want a fetch-arg name, comm, tid, cpu or stack)", k)
		}
		keys = append(keys, k)
	}
	return keys, nil
}

// isValueName reports whether s names a value of a hit: a fetch-arg,
// comm, tid..., or @MARK (the time since its thread's mark).
func isValueName(s string) bool {
	return isIdent(strings.TrimPrefix(s, "@"))
}

func isIdent(s string) bool {
	if s == "" {
		return false
	}
	for i, c := range s {
		if !(c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || i > 0 && c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}
