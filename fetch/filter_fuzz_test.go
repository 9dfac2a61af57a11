//go:build amd64

package fetch

import (
	"strings"
	"testing"
)

// FuzzFilter compiles any filter expression over a fixed set of fields and
// evaluates it: nothing may panic, every error is an ErrBadInput on one
// line, and a filter that compiles agrees with its negation.
func FuzzFilter(f *testing.F) {
	for _, s := range []string{
		"x == 5",
		"x == 1 || x == 5 && n < 0",
		"!(x == 5 || n > 0) && s ~ \"h*\"",
		"comm == 'loop' && c == \"hi\"",
		"m ~ \"[!a-z]?*\" || l > 0x10000 || nn < -1 || u & 3",
		"(x==5)&&(n<0)",
	} {
		f.Add(s)
	}
	args, err := Compile(strings.Fields(fxFilterArgs), fxEnv(false))
	if err != nil {
		f.Fatal(err)
	}
	h, _ := fxHit()
	fields := args.Fetch(h, nil)
	f.Fuzz(func(t *testing.T, expr string) {
		flt, err := compileFilter(expr, args)
		if err != nil {
			fxCheckBadInput(t, expr, err)
			return
		}
		a := *args
		a.filter = flt
		a.Fetch(h, nil) // records the comm
		keep := a.Keep(fields)
		neg, err := compileFilter("!("+expr+")", args)
		if err != nil {
			if !strings.Contains(err.Error(), "nested too deeply") {
				t.Fatalf("%q compiles but its negation does not: %v", expr, err)
			}
			return
		}
		a.filter = neg
		if a.Keep(fields) == keep {
			t.Fatalf("%q and its negation both give %v", expr, keep)
		}
	})
}

// FuzzGlob checks globMatch, a port of the kernel's iterative glob_match,
// against a plain recursive matcher of the same syntax.
func FuzzGlob(f *testing.F) {
	for _, s := range [][2]string{
		{"*.[ch]", "x.c"}, {"[!a-c]x", "dx"}, {"[]]", "]"}, {"[a-]", "-"}, {"\\*", "*"},
		{"a*b*c", "abbc"}, {"[", "["}, {"*[!a]", "a"}, {"a\\", "a"}, {"[!]]?*", "ab"},
	} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, pat, s string) {
		if len(pat) > 40 || len(s) > 40 || strings.Count(pat, "*") > 5 {
			return
		}
		// C strings end at a NUL.
		if i := strings.IndexByte(pat, 0); i >= 0 {
			pat = pat[:i]
		}
		if i := strings.IndexByte(s, 0); i >= 0 {
			s = s[:i]
		}
		if got, want := globMatch(pat, s), refGlob(pat, s); got != want {
			t.Fatalf("globMatch(%q, %q) = %v, reference says %v", pat, s, got, want)
		}
	})
}

func refGlob(pat, s string) bool {
	if pat == "" {
		return s == ""
	}
	switch pat[0] {
	case '*':
		for i := 0; i <= len(s); i++ {
			if refGlob(pat[1:], s[i:]) {
				return true
			}
		}
		return false
	case '?':
		return s != "" && refGlob(pat[1:], s[1:])
	case '\\':
		if len(pat) == 1 { // a NUL is quoted: the end of the string
			return s == ""
		}
		return s != "" && s[0] == pat[1] && refGlob(pat[2:], s[1:])
	case '[':
		j, inv, matched := 1, false, false
		if j < len(pat) && pat[j] == '!' {
			inv, j = true, j+1
		}
		for first := true; ; first = false {
			if j >= len(pat) {
				return s != "" && s[0] == '[' && refGlob(pat[1:], s[1:]) // malformed: a literal [
			}
			a := pat[j]
			if a == ']' && !first {
				j++
				break
			}
			b := a
			if j+1 < len(pat) && pat[j+1] == '-' && (j+2 >= len(pat) || pat[j+2] != ']') {
				if j+2 >= len(pat) {
					return s != "" && s[0] == '[' && refGlob(pat[1:], s[1:])
				}
				b, j = pat[j+2], j+3
			} else {
				j++
			}
			if s != "" && a <= s[0] && s[0] <= b {
				matched = true
			}
		}
		return s != "" && matched != inv && refGlob(pat[j:], s[1:])
	}
	return s != "" && s[0] == pat[0] && refGlob(pat[1:], s[1:])
}
