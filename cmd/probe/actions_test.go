package main

import (
	"errors"
	"strings"
	"testing"

	"github.com/probedbg/probe/fetch"
)

func TestParseProbeDef(t *testing.T) {
	for _, tc := range []struct {
		text    string
		event   string
		args    string
		actions int
		open    bool
	}{
		{"p:work", "p_work_0", "", 0, false},
		{"p:malloc size=%di:u64 if size > 64 => count:comm hist:size stacktrace", "p_malloc_0", "size=%di:u64 if size > 64", 3, false},
		{`p:work $comm if comm == "a=>b" => count:arg1`, "p_work_0", `$comm if comm == "a=>b"`, 1, false},
		{"r:work => hist:duration", "r_work_0", "", 1, false},
		// A DWARF name's field is named before the process is seen...
		{"p:work req->len => hist:len", "p_work_0", "req->len", 1, false},
		// ...but $params' fields only once compiled in it.
		{"p:work $params => count:n", "p_work_0", "$params", 1, true},
	} {
		d, err := parseProbeDef(tc.text)
		if err != nil {
			t.Errorf("parseProbeDef(%q): %v", tc.text, err)
			continue
		}
		if d.Spec.Event != tc.event || strings.Join(d.Spec.Args, " ") != tc.args || len(d.Actions) != tc.actions || d.fieldsOpen != tc.open {
			t.Errorf("parseProbeDef(%q) = event %q args %q, %d actions, open %v", tc.text, d.Spec.Event, d.Spec.Args, len(d.Actions), d.fieldsOpen)
		}
	}
}

func TestParseProbeDefErrors(t *testing.T) {
	for _, tc := range []struct{ text, token string }{
		{"p:work => frob", `"frob"`},
		{"p:work n=%di => count:m", `"count:m"`},
		{"p:work => hist:duration", `"hist:duration"`},
		{"p:work n=%di => hist:n:linear=x", `"hist:n:linear=x"`},
		{"p:work n=%di => hist:n:log2:linear=5", `"hist:n:log2:linear=5"`},
		{"p:work n=%di =>", `"=>"`},
		{"p:work req->len => count:req", `"count:req"`},
		{"p:work x=%zz", `"%zz"`},
		{"p:work n=%di:u99", `"u99"`},
	} {
		_, err := parseProbeDef(tc.text)
		if err == nil || !errors.Is(err, fetch.ErrBadInput) || !strings.Contains(err.Error(), tc.token) {
			t.Errorf("parseProbeDef(%q) = %v; want a bad-input error naming %s", tc.text, err, tc.token)
		}
	}
	if _, err := parseSpecs([]string{"p:work => disable:p_other_0"}); err == nil || !strings.Contains(err.Error(), `"disable:p_other_0"`) {
		t.Errorf("parseSpecs with an unknown event = %v", err)
	}
	if _, err := parseSpecs([]string{"p:work => disable:p_other_0", "p:other"}); err != nil {
		t.Errorf("parseSpecs: %v", err)
	}
}
