package script

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/goccy/go-yaml/parser"

	"github.com/probedbg/probe/output"
)

// fakeValidator rejects a probe text holding the word BAD, naming it.
func fakeValidator(text string) error {
	for _, w := range strings.Fields(text) {
		if strings.Contains(w, "BAD") {
			return &TokenError{Token: w, Err: fmt.Errorf("bad token %q", w)}
		}
	}
	return nil
}

func TestParseFull(t *testing.T) {
	src := `tracer:
  name: [function_graph, profile]
  filter: [work, "libc:str*"]
  notrace: skip
  graph-function: worker
  max-depth: 3
  graph-time-threshold: 50us
probes:
  - at: work
    args: [i, "x=%di:u32"]
    if: i > 1 && x != 0
  - return: work
    event: grp/done
    args: $retval
    actions: [print, count, {count: [comm, tid]}, {hist: duration}, {hist: {field: x, scale: log2}},
              {hist: {field: x, scale: linear, step: 16}}, stacktrace, traceon, traceoff,
              {enable: grp/done}, {disable: p_work_0}, "count:comm", 'printf("%d took %u\n", x, duration)', {mark: m0}]
  - spec: 'p:libc:malloc size=%di:u64'
  - 'p:free'
  - return: work
    event: done2
output:
  file: out.txt
  format: json
duration: 2s
`
	s, err := Parse("f.yaml", []byte(src), fakeValidator)
	if err != nil {
		t.Fatal(err)
	}
	want := &Script{
		Path: "f.yaml",
		Tracer: Tracer{
			Names: []string{"function_graph", "profile"}, Filter: []string{"work", "libc:str*"},
			Notrace: []string{"skip"}, GraphFunction: []string{"worker"}, MaxDepth: 3,
			Threshold: 50 * time.Microsecond, Pos: Pos{"f.yaml", 2, 3},
		},
		Probes: []Probe{
			{Text: "p:work i x=%di:u32 if i > 1 && x != 0", Pos: Pos{"f.yaml", 9, 5}},
			{Text: "r:grp/done work $retval => print count count:comm,tid hist:duration hist:x:log2 hist:x:linear=16 stacktrace traceon traceoff enable:grp/done disable:p_work_0 count:comm printf(\"%d took %u\\n\", x, duration) mark:m0", Pos: Pos{"f.yaml", 12, 5}},
			{Text: "p:libc:malloc size=%di:u64", Pos: Pos{"f.yaml", 18, 5}},
			{Text: "p:free", Pos: Pos{"f.yaml", 19, 5}},
			{Text: "r:probe/done2 work", Pos: Pos{"f.yaml", 20, 5}},
		},
		Output:      Output{File: "out.txt", Format: "json", Pos: Pos{"f.yaml", 23, 3}},
		Duration:    2 * time.Second,
		DurationPos: Pos{"f.yaml", 25, 11},
	}
	for i := range s.Probes {
		s.Probes[i].pieces = nil // where each part is: TestLocate
	}
	if !reflect.DeepEqual(s, want) {
		t.Errorf("got\n%+v\nwant\n%+v", s, want)
	}
}

// TestLocate: an error found when a probe is added (an unknown symbol, a
// variable, an event name) is reported at the node that holds it.
// TestEveryFormat: a script may name every format the command line
// takes (output.Formats), profile included, which scripts once refused.
func TestEveryFormat(t *testing.T) {
	for _, f := range output.Formats {
		s, err := Parse("f.yaml", []byte("output:\n  format: "+f.Name+"\n"), fakeValidator)
		if err != nil || s.Output.Format != f.Name {
			t.Errorf("format %s: %v, %+v", f.Name, err, s)
		}
	}
}

func TestLocate(t *testing.T) {
	src := "probes:\n  - at: wrk\n    event: grp/dup\n    args: [i, nosuchvar]\n  - 'p:work x=%di'\n"
	s, err := Parse("f.yaml", []byte(src), nil)
	if err != nil {
		t.Fatal(err)
	}
	base := errors.New("boom")
	for _, c := range []struct {
		probe int
		token string
		want  string
	}{
		{0, "wrk", "f.yaml:2:9: boom"},
		{0, "nosuchvar", "f.yaml:4:15: boom"},
		{0, "grp/dup", "f.yaml:3:12: boom"},
		{0, "", "f.yaml:2:5: boom"},
		{1, "work", "f.yaml:5:5: boom"},
	} {
		err := s.Probes[c.probe].Locate(base, c.token)
		if err.Error() != c.want || !errors.Is(err, base) {
			t.Errorf("probe %d, token %q: %v, want %q wrapping the error", c.probe, c.token, err, c.want)
		}
	}
}

func TestParseShortForms(t *testing.T) {
	s, err := Parse("f.yaml", []byte("tracer: function,profile\noutput: trace.txt\n"), fakeValidator)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(s.Tracer.Names, []string{"function", "profile"}) || s.Output.File != "trace.txt" || len(s.Probes) != 0 {
		t.Errorf("got %+v", s)
	}
}

func TestParseErrors(t *testing.T) {
	for _, tc := range []struct{ name, src, want string }{
		{"empty", "", `f.yaml:1:1: empty script: want a mapping with keys "probes", "tracer", "output", "duration"`},
		{"comments only", "# nothing\n", `f.yaml:1:1: empty script: want a mapping with keys "probes", "tracer", "output", "duration"`},
		{"syntax", "probes:\n  - at: work\n   args: [i]\n", `f.yaml:3:4: bad YAML: value is not allowed in this context`},
		{"unclosed flow", "probes: [at: work\n", `f.yaml:1:9: bad YAML: sequence end token ']' not found`},
		{"tab", "probes:\n\t- at: work\n", "f.yaml:2:1: bad YAML: found character '\t' that cannot start any token"},
		{"not a mapping", "- at: work\n", `f.yaml:1:1: script: want a mapping with keys "probes", "tracer", "output", "duration", got a list`},
		{"unknown top key", "probes: []\nprobe: []\n", `f.yaml:2:1: script: unknown key "probe" (want "probes", "tracer", "output", "duration")`},
		{"duplicate key", "duration: 1s\nduration: 2s\n", `f.yaml:2:1: bad YAML: mapping key "duration" already defined at [1:1]`},
		{"unknown tracer key", "tracer:\n  name: function\n  fitler: work\n", `f.yaml:3:3: tracer: unknown key "fitler" (want "name", "filter", "notrace", "graph-function", "max-depth", "graph-time-threshold", "args")`},
		{"unknown tracer", "tracer: function_grph\n", `f.yaml:1:9: unknown tracer "function_grph" (want nop, function, function_graph, profile, stack)`},
		{"unknown tracer in list", "tracer:\n  name: [function, bogus]\n", `f.yaml:2:20: unknown tracer "bogus" (want nop, function, function_graph, profile, stack)`},
		{"tracer args not a boolean", "tracer:\n  name: function_graph\n  args: 1\n", `f.yaml:3:9: tracer.args: want true or false, got the number 1`},
		{"tracer wrong type", "tracer: [function]\n", `f.yaml:1:9: tracer: want a tracer name (nop, function, function_graph, profile, stack) or a mapping with keys "name", "filter", "notrace", "graph-function", "max-depth", "graph-time-threshold", "args", got a list`},
		{"max-depth string", "tracer:\n  name: function_graph\n  max-depth: deep\n", `f.yaml:3:14: tracer.max-depth: want a positive whole number, got "deep"`},
		{"max-depth negative", "tracer:\n  name: function_graph\n  max-depth: -1\n", `f.yaml:3:14: tracer.max-depth: want a positive whole number, got the number -1`},
		{"bad threshold", "tracer:\n  name: function_graph\n  graph-time-threshold: fast\n", `f.yaml:3:25: tracer.graph-time-threshold: want a positive duration such as 5s or 50us, got "fast"`},
		{"filter mapping", "tracer:\n  name: function\n  filter: {a: b}\n", `f.yaml:3:11: tracer.filter[0]: want a string, got a mapping`},
		{"filter bool", "tracer:\n  name: function\n  filter: [work, true]\n", `f.yaml:3:18: tracer.filter[1]: want a string, got the boolean true`},
		{"bad duration", "duration: 5\n", `f.yaml:1:11: duration: want a positive duration such as 5s or 50us, got the number 5`},
		{"unknown format", "output:\n  format: xml\n", `f.yaml:2:11: output.format: unknown format "xml" (want text, json, chrome, perfetto, pprof, folded, graph, profile or otlp)`},
		{"unknown output key", "output:\n  path: x\n", `f.yaml:2:3: output: unknown key "path" (want "file", "format")`},
		{"probes not a list", "probes:\n  at: work\n", `f.yaml:2:3: probes: want a list of probes, got a mapping`},
		{"unknown probe key", "probes:\n  - at: work\n    filter: i > 1\n", `f.yaml:3:5: probes[0]: unknown key "filter" (want "at", "return", "spec", "event", "args", "if", "actions")`},
		{"no location", "probes:\n  - args: [i]\n", `f.yaml:2:5: probes[0]: want one of "at" (an entry probe), "return" (a return probe) or "spec" (a probe as on the command line)`},
		{"two locations", "probes:\n  - at: work\n    return: work\n", `f.yaml:3:5: probes[0]: "at" and "return" both given: want one`},
		{"probe number", "probes:\n  - 42\n", `f.yaml:2:5: probes[0]: want a probe (a mapping with keys "at", "return", "spec", "event", "args", "if", "actions", or a string such as "p:work i"), got the number 42`},
		{"location with space", "probes:\n  - at: work i\n", `f.yaml:2:9: probes[0].at: want one word, got "work i"`},
		{"empty second document", "0\n---", `f.yaml:2:1: want one YAML document, found a second`},
		{"empty action mapping", "probes:\n  - at: work\n    actions: [print, {}]\n", `f.yaml:3:22: probes[0].actions[1]: want an action: print, count, stacktrace, traceon, traceoff, or a mapping with one of "count", "hist", "enable", "disable", "mark", got an empty mapping`},
		{"args mapping", "probes:\n  - at: work\n    args: {i: 1}\n", `f.yaml:3:11: probes[0].args[0]: want a string, got a mapping`},
		{"empty if", "probes:\n  - at: work\n    if: ''\n", `f.yaml:3:9: probes[0].if: want a filter expression such as "size > 64"`},
		{"event on spec", "probes:\n  - spec: p:work\n    event: x\n", `f.yaml:3:5: probes[0]: "event" goes with "at" or "return"; name a spec's event in the spec (p:GRP/EVENT LOCATION)`},
		{"actions not a list", "probes:\n  - at: work\n    actions: count\n", `f.yaml:3:14: probes[0].actions: want a list of actions, got "count"`},
		{"unknown action key", "probes:\n  - at: work\n    actions: [{counts: [comm]}]\n", `f.yaml:3:16: probes[0].actions[0]: unknown key "counts" (want "count", "hist", "enable", "disable", "mark")`},
		{"two actions in one item", "probes:\n  - at: work\n    actions:\n      - count: [comm]\n        hist: i\n", `f.yaml:5:9: probes[0].actions[0]: want one action per list item, got "count" and "hist"`},
		{"hist no field", "probes:\n  - at: work\n    actions: [{hist: {scale: log2}}]\n", `f.yaml:3:22: probes[0].actions[0].hist: missing "field" (a fetch-arg name, or duration for a return probe)`},
		{"hist bad scale", "probes:\n  - at: work\n    actions: [{hist: {field: i, scale: log10}}]\n", `f.yaml:3:40: probes[0].actions[0].hist.scale: unknown scale "log10" (want log2 or linear)`},
		{"hist linear no step", "probes:\n  - at: work\n    actions: [{hist: {field: i, scale: linear}}]\n", `f.yaml:3:22: probes[0].actions[0].hist: a linear scale needs "step" (the width of a bucket)`},
		{"hist step without linear", "probes:\n  - at: work\n    actions: [{hist: {field: i, step: 4}}]\n", `f.yaml:3:33: probes[0].actions[0].hist.step: goes with scale: linear`},
		{"action number", "probes:\n  - at: work\n    actions: [1]\n", `f.yaml:3:15: probes[0].actions[0]: want an action: print, count, stacktrace, traceon, traceoff, or a mapping with one of "count", "hist", "enable", "disable", "mark", got the number 1`},
		{"anchor", "probes:\n  - &a {at: work}\n  - *a\n", `f.yaml:2:5: anchors and aliases are not supported: write the value out`},
		{"anchored key", "probes:\n  - &a at: work\n", `f.yaml:2:5: anchors and aliases are not supported: write the value out`},
		{"anchored top key", "&a probes:\n  - at: work\n", `f.yaml:1:1: anchors and aliases are not supported: write the value out`},
		{"validator at location", "probes:\n  - at: workBAD\n", `f.yaml:2:9: bad token "p:workBAD"`},
		{"validator at arg", "probes:\n  - at: work\n    args: [i, xBAD]\n", `f.yaml:3:15: bad token "xBAD"`},
		{"validator at action", "probes:\n  - at: work\n    actions:\n      - print\n      - {count: [cBAD]}\n", `f.yaml:5:9: bad token "count:cBAD"`},
		{"validator at event", "probes:\n  - return: work\n    event: eBAD\n", `f.yaml:3:12: bad token "r:probe/eBAD"`},
		{"validator at string probe", "probes:\n  - 'p:work xBAD'\n", `f.yaml:2:5: bad token "xBAD"`},
		{"two documents", "probes: []\n---\nprobes: []\n", `f.yaml:3:7: want one YAML document, found a second`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("f.yaml", []byte(tc.src), fakeValidator)
			var se *Error
			if !errors.As(err, &se) {
				t.Fatalf("got %v, want a *script.Error", err)
			}
			if err.Error() != tc.want {
				t.Errorf("got  %s\nwant %s", err, tc.want)
			}
		})
	}
}

// TestDescribeArticle: a node is described with the article its name
// takes ("got a anchor" was said of a key with an anchor).
func TestDescribeArticle(t *testing.T) {
	for src, want := range map[string]string{"&a x": "an anchor", "*a": "an alias", "!!str x": "a tag"} {
		f, err := parser.ParseBytes([]byte(src), 0)
		if err != nil {
			t.Fatalf("%q: %v", src, err)
		}
		if got := describe(f.Docs[0].Body); got != want {
			t.Errorf("describe(%q) = %q, want %q", src, got, want)
		}
	}
}
