package fetch

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

// FuzzParseSpec: any text gives a spec or a one-line ErrBadInput, never a
// panic; a parsed spec's event name is always a valid identifier.
func FuzzParseSpec(f *testing.F) {
	for _, s := range []string{
		"p:work", "p work", "p:work+4", "p:libc:malloc+0x10", "p:0x401136",
		"p:/bin/ls:0x1139", "p:grp/ev fn.c:12 a b", "r:work%return $retval",
		"-:grp/ev", "p:work x=+0(%di):string if x ~ \"a*\"", "p:main.(*T).Run",
		"q:x", "p:", "p::", "p:+", "p:work+", "p:a:b:c", "p:x:99999999999",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		s, err := ParseSpec(text)
		if err != nil {
			if !errors.Is(err, ErrBadInput) {
				t.Fatalf("ParseSpec(%q): %v is not ErrBadInput", text, err)
			}
			if strings.Contains(err.Error(), "\n") && !strings.Contains(text, "\n") {
				t.Fatalf("ParseSpec(%q): error on several lines: %q", text, err)
			}
			return
		}
		if !isIdent(s.Event) || !isIdent(s.Group) {
			t.Fatalf("ParseSpec(%q): event %q/%q is not an identifier", text, s.Group, s.Event)
		}
		// Written out again in the long form, the spec parses to itself.
		long := map[Kind]string{KindEntry: "p", KindReturn: "r", KindDelete: "-"}[s.Kind] + ":" + s.Group + "/" + s.Event
		if s.Kind != KindDelete {
			long += " " + s.Loc.String() + " " + strings.Join(s.Args, " ")
		}
		again, err := ParseSpec(long)
		if err != nil {
			t.Fatalf("ParseSpec(%q) = %+v, but its long form %q fails: %v", text, s, long, err)
		}
		again.Text = s.Text
		if !reflect.DeepEqual(again, s) {
			t.Fatalf("ParseSpec(%q) = %+v; its long form %q gives %+v", text, s, long, again)
		}
	})
}
