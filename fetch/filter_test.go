//go:build amd64

package fetch

import (
	"errors"
	"strings"
	"testing"
)

// fxFilterArgs are the fields the filter tests use; at fxHit they are
// x=5 s="hi" n=-16 b=171 c={'h','i','\0'} sym=0x401000 m="hi" (DWARF
// text) l=0x10005 (DWARF raw) nn=-2 (DWARF, a signed 32-bit int) u=7
// (DWARF, no int type) f=(fault) fs=(fault) arr={1,2,3} e=0x5 (x32).
const fxFilterArgs = "x=%di:u32 s=+0(%si):string n=%al:s8 b=%r11:u8 c=+0(%si):char[3] sym=%rip:symbol " +
	"m=req->method l=req->len nn=n u=u f=+0(%r12):u32 fs=+0(%r12):string arr=+0(%r9):u16[3] e=%edi"

func fxFilter(t *testing.T, expr string) (*Args, error) {
	t.Helper()
	return Compile(append(strings.Fields(fxFilterArgs), append([]string{"if"}, strings.Fields(expr)...)...), fxEnv(false))
}

func TestFilterKeep(t *testing.T) {
	tests := []struct {
		expr string
		want bool
	}{
		// Unsigned comparisons.
		{"x == 5", true},
		{"x != 5", false},
		{"x < 6", true},
		{"x <= 5", true},
		{"x > 5", false},
		{"x >= 5", true},
		{"x & 4", true},
		{"x & 2", false},
		{"x==5", true},
		{"x == 0x5", true},
		{"x == 05", true},
		{"x == 010", false},
		{"x < 4294967295", true},
		{"b > 127", true},
		{"b == 0xab", true},
		{"e == 5", true},
		{"sym == 0x401000", true},
		// Signed comparisons, with the field's size.
		{"n < 0", true},
		{"n == -16", true},
		{"n > -17", true},
		{"n >= -16", true},
		{"n == 240", true}, // the field's bits, written unsigned
		{"n == 0xf0", true},
		{"n > 100", false},
		{"n & 0x80", true},
		// C precedence: && binds tighter than ||; ! binds tightest.
		{"x == 1 || x == 5 && n < 0", true},
		{"x == 1 || x == 5 && n > 0", false},
		{"(x == 1 || x == 5) && n > 0", false},
		{"x == 5 || x == 1 && n > 0", true},
		{"(x == 5 || x == 1) && n > 0", false},
		{"!x == 5", false},
		{"!(x == 1) && x == 5", true},
		{"!x == 1 && x == 5", true},
		{"!!(x == 5)", true},
		{"!(x == 5 || n > 0)", false},
		{"!(x == 1 || n > 0)", true},
		{"((x == 5))", true},
		{"x == 1 || x == 2 || x == 5", true},
		{"x == 5 && n < 0 && b > 1", true},
		{"x == 5 && n < 0 && b > 200", false},
		{"!(x == 5) || !(n < 0) || b == 171", true},
		{"(x==5)&&(n<0)", true},
		// Strings: == != and ~ globs, as ftrace.
		{`s == "hi"`, true},
		{`s == 'hi'`, true},
		{`s != "hi"`, false},
		{`s == "h"`, false},
		{`s ~ "h*"`, true},
		{`s ~ "*i"`, true},
		{`s ~ "*h*"`, true},
		{`s ~ "*"`, true},
		{`s ~ "h?"`, true},
		{`s ~ "?"`, false},
		{`s ~ "[a-h]i"`, true},
		{`s ~ "[!a-h]i"`, false},
		{`s ~ "!h*"`, false},
		{`s ~ "!x*"`, true},
		{`s ~ "hi"`, true},
		{`s ~ "h"`, false},
		{`s.ustring == "hi"`, true},
		{`s == "h i"`, false},
		// The thread's comm, as ftrace's generic comm field.
		{`comm == "loop"`, true},
		{`COMM ~ "lo*"`, true},
		{`comm != "loop"`, false},
		{`comm ~ "*x*" || x == 5`, true},
		// A char array compares as a string.
		{`c == "hi"`, true},
		{`c ~ "h*"`, true},
		// DWARF variables: text without quotes for strings, raw for numbers.
		{`m == "hi"`, true},
		{`m ~ "h*"`, true},
		{`l == 0x10005`, true},
		{`l > 65536`, true},
		{`nn < 0`, true},
		{`nn == -2`, true},
		{`nn == 0xfffffffe`, true},
		{`u == 7`, true},
		{`u < -1`, false},
		{`u > -1`, true},
		// A faulted value compares as 0 or "".
		{`f == 0`, true},
		{`f > 0`, false},
		{`fs == ""`, true},
		{`fs ~ "*"`, true},
	}
	h, _ := fxHit()
	for _, tt := range tests {
		a, err := fxFilter(t, tt.expr)
		if err != nil {
			t.Errorf("%q: %v", tt.expr, err)
			continue
		}
		fields := a.Fetch(h, nil)
		if got := a.Keep(fields); got != tt.want {
			t.Errorf("%q: Keep = %v, want %v (fields:%s)", tt.expr, got, tt.want, AppendFields(nil, fields))
		}
	}
}

// Keep sees the comm of the hit that was fetched last.
func TestFilterCommPerHit(t *testing.T) {
	a, err := Compile(strings.Fields(`x=%di if comm == "loop"`), fxEnv(false))
	if err != nil {
		t.Fatal(err)
	}
	h, _ := fxHit()
	if !a.Keep(a.Fetch(h, nil)) {
		t.Error("comm loop dropped")
	}
	h.Comm = "other"
	if a.Keep(a.Fetch(h, nil)) {
		t.Error("comm other kept")
	}
	// An arg named comm is the field, as an event field shadows ftrace's
	// generic one.
	a, err = Compile(strings.Fields(`comm=+0(%si):string if comm == "hi"`), fxEnv(false))
	if err != nil {
		t.Fatal(err)
	}
	if !a.Keep(a.Fetch(h, nil)) {
		t.Error("arg comm not used")
	}
}

func TestFilterErrors(t *testing.T) {
	tests := []struct{ expr, want string }{
		{"y == 1", `unknown field "y" (fields: x, s, n, b, c, sym, m, l, nn, u, f, fs, arr, e, comm)`},
		{"x ==", `missing value after "x =="`},
		{"x 5", `expected an operator (== != < <= > >= & ~) after "x", not "5"`},
		{"x = 5", `expected an operator`},
		{"x", `missing operator after "x"`},
		{"(x == 5", `missing ")"`},
		{"x == 5)", `too many ")"`},
		{"x == 5 &&", `expression ends where a comparison was expected`},
		{"x == 5 ||", `expression ends`},
		{"x == 5 & x == 1", `expected && or || before "& x == 1"`},
		{"x == 5 x == 1", `expected && or || before "x == 1"`},
		{`s < "a"`, `< cannot compare strings`},
		{`x == "a"`, `field "x" is a number`},
		{`s == 5`, `field "s" is a string: quote the value`},
		{`comm == 5`, `field "comm" is a string`},
		{`x ~ 5`, `~ matches strings`},
		{`s == "abc`, `missing closing "`},
		{`s == 'abc`, `missing closing '`},
		{`x == abc`, `bad value "abc" (did you forget quotes?)`},
		{`x == +5`, `bad value "+5"`},
		{`x == -5`, `field "x" is unsigned (u32): -5 is negative`},
		{`x == 0x1ffffffff`, `0x1ffffffff does not fit field "x" (u32)`},
		{`n == -129`, `-129 does not fit field "n" (s8)`},
		{`n == 256`, `256 does not fit field "n" (s8)`},
		{`x == 5z`, `bad number "5z"`},
		{`x == 99999999999999999999`, `bad number`},
		{`arr == 1`, `field "arr" is an array`},
		{`()`, `expected a field name at ")"`},
		{`!= 5`, `missing field name before "!= 5"`},
		{`x == 5 && (`, `expression ends`},
		{"`", "expected a field name"},
		{`s == "` + strings.Repeat("a", 300) + `"`, `too long`},
		{strings.Repeat("(", 200) + "x == 5" + strings.Repeat(")", 200), `nested too deeply`},
		{strings.Repeat("!", 200) + "x == 5", `nested too deeply`},
	}
	for _, tt := range tests {
		_, err := fxFilter(t, tt.expr)
		if err == nil {
			t.Errorf("%q: no error, want %q", tt.expr, tt.want)
			continue
		}
		if !errors.Is(err, ErrBadInput) {
			t.Errorf("%q: %v is not ErrBadInput", tt.expr, err)
		}
		msg := err.Error()
		if !strings.Contains(msg, tt.want) || !strings.HasPrefix(msg, "bad filter ") || strings.Contains(msg, "\n") {
			t.Errorf("%q:\n got %s\nwant %s", tt.expr, msg, tt.want)
		}
	}
}

// The glob is the kernel's glob_match (lib/glob.c).
func TestGlobMatch(t *testing.T) {
	tests := []struct {
		pat, s string
		want   bool
	}{
		{"", "", true},
		{"", "a", false},
		{"*", "", true},
		{"*", "abc", true},
		{"**", "abc", true},
		{"a*b", "aXXb", true},
		{"a*b", "aXXbc", false},
		{"a*b*c", "abbc", true},
		{"*a", "aaa", true},
		{"*aa", "a", false},
		{"*ab", "aab", true},
		{"?", "", false},
		{"?", "x", true},
		{"??", "x", false},
		{"[abc]", "b", true},
		{"[abc]", "d", false},
		{"[a-c]x", "bx", true},
		{"[!a-c]x", "bx", false},
		{"[!a-c]x", "dx", true},
		{"[]]", "]", true},
		{"[!]]", "a", true},
		{"[!]]", "]", false},
		{"[a-]", "-", true},
		{"[a-]", "b", false},
		{"[z-a]", "m", false},
		{"[", "[", true},
		{"[a", "[a", true},
		{"[a-", "[a-", true},
		{"\\*", "*", true},
		{"\\*", "a", false},
		{"\\[x]", "[x]", true},
		{"a\\", "a", true},
		{"*.[ch]", "x.c", true},
		{"*.[ch]", "x.o", false},
		{"[!a]", "", false},
		{"*[!a]", "a", false},
		{"*b*", "abc", true},
		{"a*", "a", true},
	}
	for _, tt := range tests {
		if got := globMatch(tt.pat, tt.s); got != tt.want {
			t.Errorf("globMatch(%q, %q) = %v, want %v", tt.pat, tt.s, got, tt.want)
		}
	}
}
