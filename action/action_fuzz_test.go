package action

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/probedbg/probe/fetch"
)

// FuzzParse splits any probe text at its "=>", parses the actions and
// compiles them for a probe: nothing panics, every error is a one-line
// ErrBadInput naming a token of the input, and parsing the actions'
// own texts again gives the same actions.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"p:work => print count count:comm,n hist:n hist:n:log2 hist:duration:linear=100 stacktrace traceon traceoff enable:ev disable:grp/ev",
		`p:work $comm if comm == "a=>b" => print`,
		`p:work $comm if comm == "a\"=>b" => print`,
		"p:work n=%di if n >= 3=>count",
		"p:work => hist:n:linear=0 count:1x enable:a/b/c disable: print:x",
		"p:work => hist:n:linear=0x10 hist:n:linear=-1 hist:duration",
		`p:work n=%di => printf("%d %-5s|%#lx\n", n, comm, n) printf("(%d)", tid) count`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		spec, actText, has := Split(text)
		if has && (!strings.Contains(text, "=>") || strings.Contains(spec, "=>") && !strings.ContainsAny(spec, `"'`)) {
			t.Fatalf("Split(%q) = %q, %q", text, spec, actText)
		}
		if !has && (spec != text || actText != "") {
			t.Fatalf("Split(%q) without => = %q, %q", text, spec, actText)
		}
		acts, err := Parse(actText)
		if err != nil {
			checkBad(t, actText, err)
			return
		}
		var texts []string
		for _, a := range acts {
			texts = append(texts, a.Text)
		}
		again, err := Parse(strings.Join(texts, " "))
		if err != nil || !reflect.DeepEqual(again, acts) {
			t.Fatalf("Parse(%q) = %+v; parsing its texts again gives %+v, %v", actText, acts, again, err)
		}
		for _, ret := range []bool{false, true} {
			p := Probe{Event: "probe/ev", Fields: []string{"n", "s"}, Return: ret}
			if _, err := NewSession().Compile(p, acts); err != nil {
				checkBad(t, actText, err)
			}
		}
	})
}

func checkBad(t *testing.T, input string, err error) {
	t.Helper()
	if !errors.Is(err, fetch.ErrBadInput) {
		t.Fatalf("%q: error %v is not ErrBadInput", input, err)
	}
	msg := err.Error()
	if strings.ContainsAny(msg, "\n\r") {
		t.Fatalf("%q: error %q is not one line", input, msg)
	}
	var ae *Error
	if errors.As(err, &ae) && !strings.Contains(input, ae.Token) {
		t.Fatalf("%q: error names %q, not a token of the input", input, ae.Token)
	}
}
