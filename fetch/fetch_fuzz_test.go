//go:build amd64

package fetch

import (
	"errors"
	"strings"
	"testing"
)

// FuzzCompileArgs compiles any tokens, then fetches, filters and prints
// them: nothing may panic, every error is an ErrBadInput on one line, and
// every field has a name the kernel would accept.
func FuzzCompileArgs(f *testing.F) {
	for _, s := range []string{
		"x=%di:u32 s=+0(%si):string",
		"+8(+0(%r8)):s32 $stack1 $arg7 @0x1000:u16 @counter+4 \\0x10:u8",
		"v=+0(%r9):x16[3] w=+0(%r10):string[3] %r11:b4@4/8 $comm",
		"req->method req:string arr[2] $params",
		"x=%di:u32 if x == 5 && comm ~ \"lo*\"",
	} {
		f.Add(s, false)
	}
	f.Add("r=$retval:s8 +0($retval):string", true)
	f.Fuzz(func(t *testing.T, s string, ret bool) {
		a, err := Compile(strings.Fields(s), fxEnv(ret))
		if err != nil {
			fxCheckBadInput(t, s, err)
			return
		}
		for _, n := range a.Names() {
			if !isIdent(n) || len(n) > maxArgNameLen {
				t.Errorf("%q: field name %q", s, n)
			}
		}
		h, _ := fxHit()
		fields := a.Fetch(h, nil)
		if len(fields) != a.Len() {
			t.Fatalf("%q: %d fields, Len %d", s, len(fields), a.Len())
		}
		a.Keep(fields)
		text := string(AppendFields(nil, fields))
		if strings.ContainsAny(text, "\n\r") {
			t.Errorf("%q: output breaks the line: %q", s, text)
		}
		fields = a.Fetch(&HitEnv{}, fields[:0])
		a.Keep(fields)
		AppendFields(nil, fields)
	})
}

func fxCheckBadInput(t *testing.T, input string, err error) {
	t.Helper()
	if !errors.Is(err, ErrBadInput) {
		t.Fatalf("%q: error %v is not ErrBadInput", input, err)
	}
	if msg := err.Error(); msg == "" || strings.ContainsAny(msg, "\n\r") {
		t.Fatalf("%q: error message %q is not one line", input, msg)
	}
}
