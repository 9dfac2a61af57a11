package fetch

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestParseSpec(t *testing.T) {
	tests := []struct {
		in    string
		kind  Kind
		group string
		event string
		loc   Location
		args  []string
	}{
		{in: "p:work", event: "p_work_0", loc: Location{Symbol: "work"}},
		{in: "p work", event: "p_work_0", loc: Location{Symbol: "work"}},
		{in: "p:work+4", event: "p_work_4", loc: Location{Symbol: "work", Offset: 4}},
		{in: "p:work+0x10", event: "p_work_16", loc: Location{Symbol: "work", Offset: 16}},
		{in: "p:libc:malloc", event: "p_malloc_0", loc: Location{Module: "libc", Symbol: "malloc"}},
		{in: "p:libc.so.6:malloc+2", event: "p_malloc_2", loc: Location{Module: "libc.so.6", Symbol: "malloc", Offset: 2}},
		{in: "p:/usr/lib/libfoo.so:foo", event: "p_foo_0", loc: Location{Module: "/usr/lib/libfoo.so", Symbol: "foo"}},
		{in: "p:0x401136", event: "p_0x401136", loc: Location{Addr: 0x401136}},
		{in: "p:/bin/loop:0x1139", event: "p_loop_0x1139", loc: Location{Module: "/bin/loop", FileOffset: 0x1139, HasFileOff: true}},
		{in: "p:main.work", event: "p_main_work_0", loc: Location{Symbol: "main.work"}},
		{in: "p:example.com/pkg.(*T).Run", event: "p_example_com_pkg___T__Run_0", loc: Location{Symbol: "example.com/pkg.(*T).Run"}},
		{in: "p:grp/ev work", group: "grp", event: "ev", loc: Location{Symbol: "work"}},
		{in: "p:mine/open libc:open x=%di", group: "mine", event: "open", loc: Location{Module: "libc", Symbol: "open"}, args: []string{"x=%di"}},
		{in: "p:work a b", event: "p_work_0", loc: Location{Symbol: "work"}, args: []string{"a", "b"}},
		{in: "r:work", kind: KindReturn, event: "r_work_0", loc: Location{Symbol: "work"}},
		{in: "p:work%return", kind: KindReturn, event: "r_work_0", loc: Location{Symbol: "work"}},
		{in: "-:grp/ev", kind: KindDelete, group: "grp", event: "ev"},
		{in: "-:ev", kind: KindDelete, event: "ev"},
		{in: "p:fn.c:212", event: "p_fn_L212", loc: Location{File: "fn.c", Line: 212, HasLine: true}},
		{in: "p:src/app/fn.c:7 count", event: "p_fn_L7", loc: Location{File: "src/app/fn.c", Line: 7, HasLine: true}, args: []string{"count"}},
		{in: "p:myapp/slowpath fn.c:212 count state", group: "myapp", event: "slowpath", loc: Location{File: "fn.c", Line: 212, HasLine: true}, args: []string{"count", "state"}},
		{in: "p:work:3", event: "p_work_L3", loc: Location{Symbol: "work", Line: 3, HasLine: true}},
		{in: "p:main.work:2", event: "p_main_work_L2", loc: Location{Symbol: "main.work", Line: 2, HasLine: true}},
	}
	for _, tt := range tests {
		s, err := ParseSpec(tt.in)
		if err != nil {
			t.Errorf("ParseSpec(%q): %v", tt.in, err)
			continue
		}
		group := tt.group
		if group == "" {
			group = DefaultGroup
		}
		if s.Kind != tt.kind || s.Group != group || s.Event != tt.event || s.Loc != tt.loc || !reflect.DeepEqual(s.Args, tt.args) {
			t.Errorf("ParseSpec(%q) = kind %v %s/%s loc %+v args %q; want kind %v %s/%s loc %+v args %q",
				tt.in, s.Kind, s.Group, s.Event, s.Loc, s.Args, tt.kind, group, tt.event, tt.loc, tt.args)
		}
	}
}

func TestParseSpecErrors(t *testing.T) {
	tests := []struct{ in, token string }{
		{"", ""},
		{"q:work", `"q"`},
		{"p:", `"p:"`},
		{"p", "missing location"},
		{"p:work+zz", `"work+zz"`},
		{"p:work+", `"work+"`},
		{"p:0xzz", `"0xzz"`},
		{"p:libc:", `"libc:"`},
		{"p::foo", `":foo"`},
		{"p:/bin/x:0xqq", `"/bin/x:0xqq"`},
		{"p:grp/ev", "missing location"},
		{"-:", `"-:"`},
		{"-:ev work", "want -:"},
		{"p:x=%di", `"x=%di"`},
	}
	for _, tt := range tests {
		_, err := ParseSpec(tt.in)
		if err == nil {
			t.Errorf("ParseSpec(%q): no error", tt.in)
			continue
		}
		if !errors.Is(err, ErrBadInput) {
			t.Errorf("ParseSpec(%q): %v is not ErrBadInput", tt.in, err)
		}
		if !strings.Contains(err.Error(), tt.token) {
			t.Errorf("ParseSpec(%q) = %q; want it to name %s", tt.in, err, tt.token)
		}
		if strings.Contains(err.Error(), "\n") {
			t.Errorf("ParseSpec(%q): error is not one line: %q", tt.in, err)
		}
	}
}

// TestModuleColon: a location's MOD: is its last colon that is not half
// of a C++ "::".
func TestModuleColon(t *testing.T) {
	for tok, want := range map[string]int{
		"malloc": -1, "libc:malloc": 4, "Rect::area": -1, "geo::Rect::area": -1,
		"prog:geo::Rect::area": 4, "prog:f": 4, "a::b:c": 4, "::f": -1, "x:": 1,
	} {
		if got := moduleColon(tok); got != want {
			t.Errorf("moduleColon(%q) = %d, want %d", tok, got, want)
		}
	}
}
