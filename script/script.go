// Package script loads probe scripts: YAML files that describe the probes
// (with their fetch-args, filters and actions), the tracer and its options,
// the output and, for attach, how long to trace.
//
//	s, err := script.Load("probes.yaml", validate)
//	for _, p := range s.Probes { fmt.Println(p.Pos, p.Text) }
//
// Every probe becomes one text in the command line's grammar,
// `SPEC [if FILTER] [=> ACTION ...]`, so the CLI, the REPL and scripts
// share one parser. Every mistake is reported as FILE:LINE:COL and what
// was expected there; unknown keys are mistakes.
package script

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/parser"
	"github.com/goccy/go-yaml/token"

	"github.com/probedbg/probe/output"
)

// Script is a loaded probe script. Zero values mean "not given".
type Script struct {
	Path     string
	Tracer   Tracer
	Probes   []Probe
	Output   Output
	Duration time.Duration
	// DurationPos is where duration was given (Line 0: it was not).
	DurationPos Pos
}

// Tracer is the tracer section, as the CLI's flags give it.
type Tracer struct {
	Names         []string // nop, function, function_graph, profile, stack
	Filter        []string
	Notrace       []string
	GraphFunction []string
	MaxDepth      int
	Threshold     time.Duration // graph-time-threshold
	Args          bool          // each function's arguments and return value
	Pos           Pos           // the tracer section (Line 0: not given)
}

// Probe is one probe in the CLI grammar, with where the script defines it.
type Probe struct {
	Text string
	Pos  Pos
	// Where each part of the probe is written, for errors found only
	// when it is resolved against the process (Locate).
	pieces []piecePos
}

type piecePos struct {
	text  string
	alias []string
	pos   Pos
}

// Locate returns err, found when the probe was added to a process, as an
// error at the script's node that holds token (the location, a fetch-arg,
// the event name), or at the probe's when no node does; it unwraps to err.
func (p *Probe) Locate(err error, token string) error {
	at := p.Pos
	if i := pieceIndex(len(p.pieces), func(i int) (string, []string) { return p.pieces[i].text, p.pieces[i].alias }, token); i >= 0 {
		at = p.pieces[i].pos
	}
	return &LocatedError{Pos: at, Err: err}
}

// LocatedError is an error at a place in a script.
type LocatedError struct {
	Pos Pos
	Err error
}

func (e *LocatedError) Error() string { return e.Pos.String() + ": " + oneLine(e.Err) }
func (e *LocatedError) Unwrap() error { return e.Err }

// Output is where events go.
type Output struct {
	File   string
	Format string
	Pos    Pos // the output section (Line 0: not given)
}

// Tracers are the tracers' names, for scripts, --tracer, the help, the
// man page and the completions.
var Tracers = []string{"nop", "function", "function_graph", "profile", "stack"}

// Pos is a place in a script.
type Pos struct {
	File      string
	Line, Col int
}

func (p Pos) String() string { return fmt.Sprintf("%s:%d:%d", p.File, p.Line, p.Col) }

// Error is a mistake in a script: where, and what was expected there.
type Error struct {
	Pos Pos
	Msg string
}

func (e *Error) Error() string { return e.Pos.String() + ": " + e.Msg }

// TokenError is what a probe validator returns to name the bad token, so
// that the error points at the YAML node that holds it rather than at the
// whole probe.
type TokenError struct {
	Token string
	Err   error
}

func (e *TokenError) Error() string { return e.Err.Error() }
func (e *TokenError) Unwrap() error { return e.Err }

// Load reads the script at path. validateProbe checks each probe's text
// (the grammar of specs and actions lives elsewhere); its error is
// reported at the probe's node, or at the node holding a TokenError's
// token. Every error Load returns is an *Error, except a file that
// cannot be read.
func Load(path string, validateProbe func(text string) error) (*Script, error) {
	src, err := ReadFile(path)
	if err != nil {
		return nil, err
	}
	return Parse(path, src, validateProbe)
}

// MaxFileSize bounds a script read: no probe script is near it, and a path
// such as /dev/zero must not grow probe's memory without end.
const MaxFileSize = 1 << 20

// ErrTooLarge is a script file over MaxFileSize.
var ErrTooLarge = fmt.Errorf("larger than %d KiB: not a probe script", MaxFileSize>>10)

// ReadFile reads a script file (YAML, or REPL commands), refusing one
// larger than MaxFileSize.
func ReadFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	src, err := io.ReadAll(io.LimitReader(f, MaxFileSize+1))
	if err != nil {
		return nil, err
	}
	if len(src) > MaxFileSize {
		return nil, fmt.Errorf("%s: %w", path, ErrTooLarge)
	}
	return src, nil
}

// Parse is Load on a script already read; path names it in errors.
func Parse(path string, src []byte, validateProbe func(text string) error) (*Script, error) {
	l := &loader{path: path, validate: validateProbe}
	file, err := parser.ParseBytes(src, 0)
	if err != nil {
		return nil, l.syntaxError(err)
	}
	s := &Script{Path: path}
	var body ast.Node
	switch {
	case len(file.Docs) > 1:
		return nil, l.errAt(file.Docs[1], "want one YAML document, found a second")
	case len(file.Docs) == 1:
		body = file.Docs[0].Body
	}
	if body == nil || body.Type() == ast.NullType {
		return nil, &Error{Pos{path, 1, 1}, "empty script: want a mapping with keys " + quoteList(topKeys)}
	}
	if err := l.top(body, s); err != nil {
		return nil, err
	}
	return s, nil
}

var (
	topKeys    = []string{"probes", "tracer", "output", "duration"}
	tracerKeys = []string{"name", "filter", "notrace", "graph-function", "max-depth", "graph-time-threshold", "args"}
	outputKeys = []string{"file", "format"}
	probeKeys  = []string{"at", "return", "spec", "event", "args", "if", "actions"}
	actionKeys = []string{"count", "hist", "enable", "disable", "mark"}
	histKeys   = []string{"field", "scale", "step"}
	// Actions written as a bare word.
	wordActions = []string{"print", "count", "stacktrace", "traceon", "traceoff"}
)

type loader struct {
	path     string
	validate func(string) error
}

func (l *loader) pos(n ast.Node) Pos {
	if d, ok := n.(*ast.DocumentNode); ok && d.Body == nil {
		// An empty document ("---" alone): its GetToken would dereference the nil body.
		return l.tokenPos(d.Start)
	}
	tk := n.GetToken()
	if m, ok := n.(*ast.MappingNode); ok && m.IsFlowStyle {
		tk = m.Start // the "{"
	} else if ok && len(m.Values) > 0 {
		tk = m.Values[0].Key.GetToken()
	}
	if mv, ok := n.(*ast.MappingValueNode); ok {
		tk = mv.Key.GetToken()
	}
	return l.tokenPos(tk)
}

func (l *loader) tokenPos(tk *token.Token) Pos {
	if tk == nil {
		return Pos{l.path, 1, 1}
	}
	return Pos{l.path, tk.Position.Line, tk.Position.Column}
}

func (l *loader) errAt(n ast.Node, format string, a ...any) error {
	return &Error{l.pos(n), fmt.Sprintf(format, a...)}
}

// syntaxError turns the YAML library's error into FILE:LINE:COL: MESSAGE.
func (l *loader) syntaxError(err error) error {
	var ye yaml.Error
	if errors.As(err, &ye) && ye.GetToken() != nil {
		p := ye.GetToken().Position
		return &Error{Pos{l.path, p.Line, p.Column}, "bad YAML: " + ye.GetMessage()}
	}
	return &Error{Pos{l.path, 1, 1}, "bad YAML: " + err.Error()}
}

// entry is a key and its value in a mapping.
type entry struct {
	key   string
	keyN  ast.Node
	value ast.Node
}

func isMapping(n ast.Node) bool {
	switch n.(type) {
	case *ast.MappingNode, *ast.MappingValueNode:
		return true
	}
	return false
}

// mapping reads a mapping whose keys must be among known.
func (l *loader) mapping(n ast.Node, what string, known []string) ([]entry, error) {
	var pairs []*ast.MappingValueNode
	switch m := n.(type) {
	case *ast.MappingNode:
		pairs = m.Values
	case *ast.MappingValueNode:
		pairs = []*ast.MappingValueNode{m}
	default:
		return nil, l.errAt(n, "%s: want a mapping with keys %s, got %s", what, quoteList(known), describe(n))
	}
	var es []entry
	seen := map[string]bool{}
	for _, p := range pairs {
		if err := l.plain(p.Key); err != nil {
			return nil, err
		}
		if err := l.plain(p.Value); err != nil {
			return nil, err
		}
		k, ok := p.Key.(*ast.StringNode)
		if !ok {
			return nil, l.errAt(p.Key, "%s: want a key among %s, got %s", what, quoteList(known), describe(p.Key))
		}
		if !contains(known, k.Value) {
			return nil, l.errAt(p.Key, "%s: unknown key %q (want %s)", what, k.Value, quoteList(known))
		}
		if seen[k.Value] {
			return nil, l.errAt(p.Key, "%s: duplicate key %q", what, k.Value)
		}
		seen[k.Value] = true
		es = append(es, entry{k.Value, p.Key, p.Value})
	}
	return es, nil
}

// plain refuses the YAML features a script has no use for, which would
// otherwise make a value mean something other than what it reads as.
func (l *loader) plain(n ast.Node) error {
	switch n.(type) {
	case *ast.AnchorNode, *ast.AliasNode:
		return l.errAt(n, "anchors and aliases are not supported: write the value out")
	case *ast.TagNode:
		return l.errAt(n, "tags are not supported: write a plain value")
	case *ast.MergeKeyNode:
		return l.errAt(n, "merge keys are not supported")
	}
	return nil
}

// str reads a scalar as text: a string, or a number as written.
func (l *loader) str(n ast.Node, what string) (string, error) {
	if err := l.plain(n); err != nil {
		return "", err
	}
	switch v := n.(type) {
	case *ast.StringNode:
		return v.Value, nil
	case *ast.LiteralNode:
		return strings.TrimSpace(v.Value.Value), nil
	case *ast.IntegerNode, *ast.FloatNode:
		return n.GetToken().Value, nil
	}
	return "", l.errAt(n, "%s: want a string, got %s", what, describe(n))
}

// word reads a string that must be one token of the probe grammar.
func (l *loader) word(n ast.Node, what string) (string, error) {
	s, err := l.str(n, what)
	if err != nil {
		return "", err
	}
	if s == "" || strings.ContainsAny(s, " \t\n") {
		return "", l.errAt(n, "%s: want one word, got %q", what, s)
	}
	return s, nil
}

// list reads a sequence, or a single value as a list of one.
func (l *loader) list(n ast.Node, what string) ([]ast.Node, error) {
	if err := l.plain(n); err != nil {
		return nil, err
	}
	if seq, ok := n.(*ast.SequenceNode); ok {
		for _, v := range seq.Values {
			if err := l.plain(v); err != nil {
				return nil, err
			}
		}
		return seq.Values, nil
	}
	if n.Type() == ast.NullType {
		return nil, l.errAt(n, "%s: want a value or a list, got nothing", what)
	}
	return []ast.Node{n}, nil
}

// words reads a list of strings (or one string; a comma list splits, as
// the CLI's flags take it).
func (l *loader) words(n ast.Node, what string) ([]string, error) {
	items, err := l.list(n, what)
	if err != nil {
		return nil, err
	}
	var out []string
	for i, it := range items {
		s, err := l.word(it, fmt.Sprintf("%s[%d]", what, i))
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}

func (l *loader) duration(n ast.Node, what string) (time.Duration, error) {
	s, err := l.str(n, what)
	if err == nil {
		d, perr := time.ParseDuration(s)
		if perr == nil && d > 0 {
			return d, nil
		}
	}
	if err := l.plain(n); err != nil {
		return 0, err
	}
	return 0, l.errAt(n, "%s: want a positive duration such as 5s or 50us, got %s", what, describe(n))
}

func (l *loader) top(body ast.Node, s *Script) error {
	es, err := l.mapping(body, "script", topKeys)
	if err != nil {
		return err
	}
	for _, e := range es {
		switch e.key {
		case "probes":
			err = l.probes(e.value, s)
		case "tracer":
			err = l.tracer(e.value, &s.Tracer)
		case "output":
			err = l.output(e.value, &s.Output)
		case "duration":
			s.Duration, err = l.duration(e.value, "duration")
			s.DurationPos = l.pos(e.value)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func (l *loader) tracer(n ast.Node, t *Tracer) error {
	t.Pos = l.pos(n)
	if _, ok := n.(*ast.StringNode); ok {
		return l.tracerNames(n, t)
	}
	es, err := l.mapping(n, "tracer", tracerKeys)
	if err != nil && isMapping(n) {
		return err
	}
	if err != nil {
		return l.errAt(n, "tracer: want a tracer name (%s) or a mapping with keys %s, got %s",
			strings.Join(Tracers, ", "), quoteList(tracerKeys), describe(n))
	}
	for _, e := range es {
		what := "tracer." + e.key
		switch e.key {
		case "name":
			err = l.tracerNames(e.value, t)
		case "filter":
			t.Filter, err = l.words(e.value, what)
		case "notrace":
			t.Notrace, err = l.words(e.value, what)
		case "graph-function":
			t.GraphFunction, err = l.words(e.value, what)
		case "max-depth":
			i, ok := e.value.(*ast.IntegerNode)
			if !ok || !positive(i) {
				err = l.errAt(e.value, "%s: want a positive whole number, got %s", what, describe(e.value))
			} else {
				t.MaxDepth, _ = strconv.Atoi(i.GetToken().Value)
			}
		case "graph-time-threshold":
			t.Threshold, err = l.duration(e.value, what)
		case "args":
			b, ok := e.value.(*ast.BoolNode)
			if !ok {
				err = l.errAt(e.value, "%s: want true or false, got %s", what, describe(e.value))
			} else {
				t.Args = b.Value
			}
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func positive(i *ast.IntegerNode) bool {
	n, err := strconv.Atoi(i.GetToken().Value)
	return err == nil && n > 0 && n < 1<<20
}

// tracerNames reads "function_graph", "function_graph,profile" or a list.
func (l *loader) tracerNames(n ast.Node, t *Tracer) error {
	items, err := l.list(n, "tracer.name")
	if err != nil {
		return err
	}
	for _, it := range items {
		s, err := l.str(it, "tracer.name")
		if err != nil {
			return err
		}
		for _, name := range strings.Split(s, ",") {
			name = strings.TrimSpace(name)
			if !contains(Tracers, name) {
				return l.errAt(it, "unknown tracer %q (want %s)", name, strings.Join(Tracers, ", "))
			}
			t.Names = append(t.Names, name)
		}
	}
	return nil
}

func (l *loader) output(n ast.Node, o *Output) error {
	o.Pos = l.pos(n)
	if _, ok := n.(*ast.StringNode); ok {
		o.File, _ = l.str(n, "output")
		return nil
	}
	es, err := l.mapping(n, "output", outputKeys)
	if err != nil && isMapping(n) {
		return err
	}
	if err != nil {
		return l.errAt(n, "output: want a file name or a mapping with keys %s, got %s", quoteList(outputKeys), describe(n))
	}
	for _, e := range es {
		switch e.key {
		case "file":
			o.File, err = l.str(e.value, "output.file")
		case "format":
			o.Format, err = l.str(e.value, "output.format")
			if _, known := output.FormatNamed(o.Format); err == nil && !known {
				err = l.errAt(e.value, "output.format: unknown format %q (want %s)", o.Format, output.FormatNames())
			}
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func (l *loader) probes(n ast.Node, s *Script) error {
	seq, ok := n.(*ast.SequenceNode)
	if !ok {
		return l.errAt(n, "probes: want a list of probes, got %s", describe(n))
	}
	for i, item := range seq.Values {
		p, err := l.probe(item, fmt.Sprintf("probes[%d]", i))
		if err != nil {
			return err
		}
		s.Probes = append(s.Probes, p)
	}
	return nil
}

// piece is a part of a probe's text and the node it came from, so that a
// validator's complaint about a token lands on the right node.
type piece struct {
	text  string
	node  ast.Node
	alias []string // other spellings of the same token in the text
}

// probe reads one probe: a string in the CLI grammar, or a mapping.
func (l *loader) probe(n ast.Node, what string) (Probe, error) {
	if err := l.plain(n); err != nil {
		return Probe{}, err
	}
	var pieces []piece
	var words []string // the text in the CLI grammar
	add := func(text string, n ast.Node) {
		pieces = append(pieces, piece{text, n, nil})
		words = append(words, text)
	}
	switch n.(type) {
	case *ast.StringNode, *ast.LiteralNode:
		text, err := l.str(n, what)
		if err != nil {
			return Probe{}, err
		}
		add(text, n)
	default:
		es, err := l.mapping(n, what, probeKeys)
		if err != nil && isMapping(n) {
			return Probe{}, err
		}
		if err != nil {
			return Probe{}, l.errAt(n, "%s: want a probe (a mapping with keys %s, or a string such as \"p:work i\"), got %s",
				what, quoteList(probeKeys), describe(n))
		}
		get := map[string]entry{}
		for _, e := range es {
			get[e.key] = e
		}
		var locKeys []string
		for _, k := range []string{"at", "return", "spec"} {
			if _, ok := get[k]; ok {
				locKeys = append(locKeys, k)
			}
		}
		switch len(locKeys) {
		case 0:
			return Probe{}, l.errAt(n, "%s: want one of \"at\" (an entry probe), \"return\" (a return probe) or \"spec\" (a probe as on the command line)", what)
		case 2, 3:
			return Probe{}, l.errAt(get[locKeys[1]].keyN, "%s: %q and %q both given: want one", what, locKeys[0], locKeys[1])
		}
		loc := get[locKeys[0]]
		if loc.key == "spec" {
			if ev, ok := get["event"]; ok {
				return Probe{}, l.errAt(ev.keyN, "%s: \"event\" goes with \"at\" or \"return\"; name a spec's event in the spec (p:GRP/EVENT LOCATION)", what)
			}
			text, err := l.str(loc.value, what+".spec")
			if err != nil {
				return Probe{}, err
			}
			add(text, loc.value)
		} else {
			kind := map[string]string{"at": "p", "return": "r"}[loc.key]
			at, err := l.word(loc.value, what+"."+loc.key)
			if err != nil {
				return Probe{}, err
			}
			if ev, ok := get["event"]; ok {
				name, err := l.word(ev.value, what+".event")
				if err != nil {
					return Probe{}, err
				}
				group := name
				if !strings.Contains(name, "/") {
					// The grammar tells p:EVENT from p:LOCATION by the
					// group: give the default one.
					group = "probe/" + name
				}
				pieces = append(pieces, piece{name, ev.value, []string{kind + ":" + group, group}}, piece{at, loc.value, nil})
				words = append(words, kind+":"+group, at)
			} else {
				pieces = append(pieces, piece{at, loc.value, []string{kind + ":" + at}})
				words = append(words, kind+":"+at)
			}
		}
		if a, ok := get["args"]; ok {
			items, err := l.list(a.value, what+".args")
			if err != nil {
				return Probe{}, err
			}
			for i, it := range items {
				arg, err := l.word(it, fmt.Sprintf("%s.args[%d]", what, i))
				if err != nil {
					return Probe{}, err
				}
				add(arg, it)
			}
		}
		if f, ok := get["if"]; ok {
			expr, err := l.str(f.value, what+".if")
			if err != nil {
				return Probe{}, err
			}
			if strings.TrimSpace(expr) == "" {
				return Probe{}, l.errAt(f.value, "%s.if: want a filter expression such as \"size > 64\"", what)
			}
			words = append(words, "if")
			pieces = append(pieces, piece{expr, f.value, []string{"if"}})
			words = append(words, expr)
		}
		if a, ok := get["actions"]; ok {
			seq, ok := a.value.(*ast.SequenceNode)
			if !ok {
				return Probe{}, l.errAt(a.value, "%s.actions: want a list of actions, got %s", what, describe(a.value))
			}
			words = append(words, "=>")
			for i, it := range seq.Values {
				act, err := l.action(it, fmt.Sprintf("%s.actions[%d]", what, i))
				if err != nil {
					return Probe{}, err
				}
				add(act, it)
			}
		}
	}
	p := Probe{Text: strings.Join(words, " "), Pos: l.pos(n)}
	for _, pc := range pieces {
		if pc.node != nil {
			p.pieces = append(p.pieces, piecePos{pc.text, pc.alias, l.pos(pc.node)})
		}
	}
	if l.validate != nil {
		if err := l.validate(p.Text); err != nil {
			at := n
			var te *TokenError
			if errors.As(err, &te) {
				if pn := findPiece(pieces, te.Token); pn != nil {
					at = pn
				}
			}
			return Probe{}, l.errAt(at, "%s", oneLine(err))
		}
	}
	return p, nil
}

// findPiece returns the node of the piece that holds token: one whose
// text is the token or has it as a word, else one that contains it.
func findPiece(pieces []piece, token string) ast.Node {
	if i := pieceIndex(len(pieces), func(i int) (string, []string) { return pieces[i].text, pieces[i].alias }, token); i >= 0 {
		return pieces[i].node
	}
	return nil
}

// pieceIndex is findPiece's choice among n pieces, their text and aliases
// given by at; -1 if none holds token.
func pieceIndex(n int, at func(int) (string, []string), token string) int {
	if token == "" {
		return -1
	}
	for i := 0; i < n; i++ {
		if text, alias := at(i); text == token || contains(alias, token) || contains(strings.Fields(text), token) {
			return i
		}
	}
	for i := 0; i < n; i++ {
		if text, _ := at(i); strings.Contains(text, token) {
			return i
		}
	}
	return -1
}

// action turns one YAML action into its CLI word: "stacktrace",
// {count: [comm, tid]} -> "count:comm,tid", {hist: {field: size, scale:
// linear, step: 16}} -> "hist:size:linear=16", {enable: EVENT} ->
// "enable:EVENT". A word in the CLI form ("count:comm"), or a printf,
// is taken as is.
func (l *loader) action(n ast.Node, what string) (string, error) {
	if err := l.plain(n); err != nil {
		return "", err
	}
	if sn, ok := n.(*ast.StringNode); ok {
		if strings.HasPrefix(sn.Value, "printf(") {
			return l.str(n, what) // (its format may hold spaces)
		}
		return l.word(n, what)
	}
	es, err := l.mapping(n, what, actionKeys)
	if err != nil {
		if isMapping(n) {
			return "", err
		}
		return "", l.errAt(n, "%s: want an action: %s, or a mapping with one of %s, got %s",
			what, strings.Join(wordActions, ", "), quoteList(actionKeys), describe(n))
	}
	if len(es) == 0 {
		return "", l.errAt(n, "%s: want an action: %s, or a mapping with one of %s, got an empty mapping",
			what, strings.Join(wordActions, ", "), quoteList(actionKeys))
	}
	if len(es) != 1 {
		return "", l.errAt(es[1].keyN, "%s: want one action per list item, got %q and %q", what, es[0].key, es[1].key)
	}
	e := es[0]
	what += "." + e.key
	switch e.key {
	case "count":
		keys, err := l.words(e.value, what)
		if err != nil {
			return "", err
		}
		return "count:" + strings.Join(keys, ","), nil
	case "enable", "disable", "mark":
		ev, err := l.word(e.value, what)
		if err != nil {
			return "", err
		}
		return e.key + ":" + ev, nil
	}
	// hist: FIELD, or hist: {field: F, scale: log2|linear, step: N}
	if _, ok := e.value.(*ast.StringNode); ok {
		field, err := l.word(e.value, what)
		return "hist:" + field, err
	}
	hs, err := l.mapping(e.value, what, histKeys)
	if err != nil && isMapping(e.value) {
		return "", err
	}
	if err != nil {
		return "", l.errAt(e.value, "%s: want a field name or a mapping with keys %s, got %s", what, quoteList(histKeys), describe(e.value))
	}
	var field, scale, step string
	var scaleN, stepN ast.Node
	for _, h := range hs {
		switch h.key {
		case "field":
			field, err = l.word(h.value, what+".field")
		case "scale":
			scale, err = l.word(h.value, what+".scale")
			scaleN = h.value
		case "step":
			step, err = l.word(h.value, what+".step")
			stepN = h.keyN
		}
		if err != nil {
			return "", err
		}
	}
	switch {
	case field == "":
		return "", l.errAt(e.value, "%s: missing \"field\" (a fetch-arg name, or duration for a return probe)", what)
	case scale != "" && scale != "log2" && scale != "linear":
		return "", l.errAt(scaleN, "%s.scale: unknown scale %q (want log2 or linear)", what, scale)
	case scale == "linear" && step == "":
		return "", l.errAt(e.value, "%s: a linear scale needs \"step\" (the width of a bucket)", what)
	case scale != "linear" && step != "":
		return "", l.errAt(stepN, "%s.step: goes with scale: linear", what)
	case scale == "linear":
		return "hist:" + field + ":linear=" + step, nil
	case scale == "log2":
		return "hist:" + field + ":log2", nil
	}
	return "hist:" + field, nil
}

// describe names what a node is, for "want X, got Y".
func describe(n ast.Node) string {
	switch v := n.(type) {
	case *ast.StringNode:
		return fmt.Sprintf("%q", v.Value)
	case *ast.IntegerNode, *ast.FloatNode:
		return "the number " + n.GetToken().Value
	case *ast.BoolNode:
		return "the boolean " + n.GetToken().Value
	case *ast.NullNode:
		return "nothing"
	case *ast.SequenceNode:
		return "a list"
	case *ast.MappingNode, *ast.MappingValueNode:
		return "a mapping"
	case *ast.LiteralNode:
		return "a block of text"
	}
	name := n.Type().YAMLName()
	if strings.ContainsRune("aeiou", rune(name[0])) {
		return "an " + name // an anchor, an alias, an int
	}
	return "a " + name
}

func quoteList(ss []string) string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = strconv.Quote(s)
	}
	return strings.Join(q, ", ")
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

func oneLine(err error) string { return strings.ReplaceAll(err.Error(), "\n", "; ") }
