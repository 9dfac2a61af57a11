//go:build amd64

package fetch

import (
	"errors"
	"strings"
	"testing"
)

// TestFetchExpr: a fetch-arg worked out from those before it: C's
// operators and precedence, signed 64 bits unless typed, fields of every
// kind it can read (a register's, memory's, a DWARF variable's), and
// (fault) where a field it names has no number or it divides by zero;
// the fetch-args it does not take for one read as before.
func TestFetchExpr(t *testing.T) {
	for _, tt := range []struct{ args, want string }{
		{"a=%di:u32 b=%si:u32 s=a+b", " a=5 b=8192 s=8197"},
		{"a=%di:u32 m=a*3-1:u32 p=(a+1)*2 q=a+1*2", " a=5 m=14 p=12 q=7"},
		{"a=%di:u32 d=a/2 r=a%2 sh=a<<4 sr=a>>1 o=a|0x10 x=a^1 n=~a neg=-a and=a&4", " a=5 d=2 r=1 sh=80 sr=2 o=21 x=4 n=-6 neg=-5 and=4"},
		{"a=%di:u32 h=a*2:x32 s=a-6:s8 u=a-6:u64", " a=5 h=0xa s=-1 u=18446744073709551615"},
		{"a=%di:u32 z=a/(a-a) m=a%(a-a)", " a=5 z=(fault) m=(fault)"},
		{"s=+0(%si):string t=s+1", ` s="hi" t=(fault)`},
		{"v=+0(%r12):u32 w=v+1", " v=(fault) w=(fault)"},
		{"n t=n*2", " n=-2 t=-4"},
		{"a=%di:u32 b=a*2 c=b+a", " a=5 b=10 c=15"},
		// Not expressions: a register's %, offsets, symbols, members.
		{"a=%di:u32 r=%si", " a=5 r=0x2000"},
		{"a=%di:u32 v=+0(%si):u8", " a=5 v=104"},
		{"a=%di:u32 v=-8(%sp):u8 w=-0x8(%rbx):u8", " a=5 v=(fault) w=(fault)"},
		{"a=%di:u32 v=@counter+4:u8", " a=5 v=42"},
		{"req req->len:u16", ` req={method="GET",len=5} len=5`},
	} {
		if got := fxRender(t, strings.Fields(tt.args), false); got != tt.want {
			t.Errorf("%q: got %q, want %q", tt.args, got, tt.want)
		}
	}
}

// TestFetchExprFilter: a filter tests a field worked out as any other.
func TestFetchExprFilter(t *testing.T) {
	h, _ := fxHit()
	for filter, keep := range map[string]bool{"b == 10": true, "b > 10": false, "b >= 10 && a < 6": true} {
		a, err := Compile(strings.Fields("a=%di:u32 b=a*2 if "+filter), fxEnv(false))
		if err != nil {
			t.Fatal(err)
		}
		if got := a.Keep(a.Fetch(h, nil)); got != keep {
			t.Errorf("if %s: kept %v, want %v", filter, got, keep)
		}
		if a.Lower().Filter != nil {
			t.Errorf("if %s: a stub would test a field it cannot work out", filter)
		}
	}
}

// TestFetchExprErrors: an expression that cannot be worked out is bad
// input naming it.
func TestFetchExprErrors(t *testing.T) {
	for args, want := range map[string]string{
		"a=%di x=a*nope":     `"nope" is not a fetch-arg before it (fetch-args: a) in "x=a*nope"`,
		"a=%di x=a*(2":       `a "(" is not closed`,
		"a=%di x=a*":         "an operand is missing",
		"a=%di x=a*2)":       `unexpected ")"`,
		"a=%di x=a*2:string": `an expression is an integer: type "string" cannot be`,
		"a=%di x=a*2:u8[2]":  `bad type "u8[2]"`,
		"a=%di x=a+0xz":      `bad number "0xz"`,
		"a=%di x=b*a b=%si":  `"b" is not a fetch-arg before it`,
	} {
		_, err := Compile(strings.Fields(args), fxEnv(false))
		if err == nil || !errors.Is(err, ErrBadInput) || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want %q", args, err, want)
		}
	}
}

// TestReadsDWARF: an expression over fetch-args reads no DWARF
// variable; a name that is not one before it does.
func TestReadsDWARF(t *testing.T) {
	for args, want := range map[string]bool{
		"x=$retval:s64 n=x/9":       false,
		"$retval:s64 n=arg1/9 m=-n": false,
		"x=%di y=x*2 if y > 3":      false,
		"x=%di y=z*2":               true,
		"req->len":                  true,
		"x=%di y=x":                 true, // (a DWARF variable that happens to share a name)
		"$params":                   true,
		"x=%di if req > 3":          false,
	} {
		if got := ReadsDWARF(strings.Fields(args)); got != want {
			t.Errorf("%q: %v, want %v", args, got, want)
		}
	}
}
