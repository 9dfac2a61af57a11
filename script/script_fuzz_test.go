package script

import (
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/probedbg/probe/action"
	"github.com/probedbg/probe/fetch"
)

// fuzzValidator checks a probe text as the CLI does, minus the fetch-args
// (they need a binary): the spec grammar and the action grammar, naming
// the bad token.
func fuzzValidator(text string) error {
	specText, actText, _ := action.Split(text)
	if _, err := fetch.ParseSpec(specText); err != nil {
		var se *fetch.SpecError
		if errors.As(err, &se) {
			return &TokenError{Token: se.Token, Err: err}
		}
		return err
	}
	if _, err := action.Parse(actText); err != nil {
		var ae *action.Error
		if errors.As(err, &ae) {
			return &TokenError{Token: ae.Token, Err: err}
		}
		return err
	}
	return nil
}

// FuzzParse loads any bytes as a script: it never panics, every error is
// an *Error at a real place in the file (FILE:LINE:COL with the line
// within the text, on one line), and every probe of a script that loads
// has such a place too.
func FuzzParse(f *testing.F) {
	if src, err := os.ReadFile("../examples/probes.yaml"); err == nil {
		f.Add(src)
	} else {
		f.Fatal(err)
	}
	for _, s := range []string{
		"tracer: function,profile\noutput: trace.txt\n",
		"probes:\n  - at: work\n    args: [i, \"x=%di:u32\"]\n    if: i > 1 && x != 0\n",
		"probes:\n  - return: work\n    event: grp/done\n    args: $retval\n    actions: [print, count, {count: [comm, tid]}, {hist: duration}, {hist: {field: x, scale: linear, step: 16}}, stacktrace, {enable: grp/done}]\n",
		"probes:\n  - spec: 'p:libc:malloc size=%di:u64'\n  - 'p:free'\n",
		"tracer:\n  name: [function_graph, profile]\n  filter: [work, \"libc:str*\"]\n  notrace: skip\n  graph-function: worker\n  max-depth: 3\n  graph-time-threshold: 50us\n",
		"output:\n  file: out.txt\n  format: json\nduration: 2s\n",
		"probes:\n  - at: work\n   args: [i]\n",
		"probes: [at: work\n",
		"duration: 1s\nduration: 2s\n",
		"--- a\n--- b\n",
		"probes:\n  - &a {at: work}\n  - *a\n",
		"probes:\n  - at: work\n    actions: [{hist: {field: x, scale: linear, step: 0}}]\n",
		"probes:\n  - 'p:work => count:comm,tid hist:x:linear=0'\n",
		"",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		const path = "f.yaml"
		// YAML breaks lines at \n, \r\n and a lone \r.
		lines := strings.Count(strings.ReplaceAll(string(src), "\r\n", "\n"), "\n") + strings.Count(strings.ReplaceAll(string(src), "\r\n", ""), "\r") + 1
		checkPos := func(what string, p Pos) {
			if p.File != path || p.Line < 1 || p.Col < 1 || p.Line > lines+1 {
				t.Fatalf("%q: %s at %v, outside the %d-line file", src, what, p, lines)
			}
		}
		s, err := Parse(path, src, fuzzValidator)
		if err != nil {
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("%q: error %T %v is not a script.Error", src, err, err)
			}
			checkPos("error", e.Pos)
			msg := err.Error()
			if !strings.HasPrefix(msg, e.Pos.String()+": ") || strings.ContainsAny(msg, "\n\r") {
				t.Fatalf("%q: error %q is not one FILE:LINE:COL: line", src, msg)
			}
			return
		}
		for _, p := range s.Probes {
			checkPos("probe "+p.Text, p.Pos)
			if err := fuzzValidator(p.Text); err != nil {
				t.Fatalf("%q: loaded probe %q fails its own validator: %v", src, p.Text, err)
			}
		}
	})
}
