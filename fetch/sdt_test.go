package fetch

import (
	"runtime"
	"slices"
	"strings"
	"testing"
)

// TestParseSDTArgs: a note's operands become fetch-args, typed by their
// size and sign; an operand a fetch-arg cannot read is an error of that
// argument alone.
func TestParseSDTArgs(t *testing.T) {
	type arg struct{ fetch, typ string }
	cases := map[string][]arg{
		"amd64": {
			{"%rbx", "u64"}, {"%eax", "s32"}, {"-80(%rbx)", "u64"}, {"+112(%rsp)", "s32"},
			{"+0(%rdi)", "u8"}, {`\5`, "s16"}, {"@counter+8", "u64"}, {"+0(%rax,%rdx,8)", "u64"},
			{"-8(,%rcx,4)", "s32"}, {"+16(%rsi,%rdi,1)", "u16"}, {"", ""},
		},
		"arm64": {
			{"%x0", "u64"}, {"%w1", "s32"}, {"+8(%x0)", "s64"}, {"+12(%sp)", "s32"},
			{"+0(%x19)", "u8"}, {`\5`, "s16"}, {"-16(%x29)", "u64"}, {"", ""},
		},
	}
	notes := map[string]string{
		"amd64": "8@%rbx -4@%eax 8@-80(%rbx) -4@112(%rsp) 1@(%rdi) -2@$5 8@counter+8(%rip) 8@(%rax,%rdx,8) -4@-8(,%rcx,4) 2@16(%rsi,%rdi) 8@%xmm0",
		"arm64": "8@x0 -4@w1 -8@[x0, 8] -4@[sp, 12] 1@[x19] -2@5 8@[x29, -16] 8@v0",
	}
	want, ok := cases[runtime.GOARCH]
	if !ok {
		t.Fatalf("no operands of %s", runtime.GOARCH)
	}
	got := ParseSDTArgs(notes[runtime.GOARCH])
	if len(got) != len(want) {
		t.Fatalf("%d arguments, want %d: %+v", len(got), len(want), got)
	}
	for i, w := range want {
		g := got[i]
		if w.fetch == "" {
			if g.Err == nil || !strings.Contains(g.Err.Error(), "an operand a fetch-arg cannot read") {
				t.Errorf("argument %d: %+v, want an error", i+1, g)
			}
			continue
		}
		if g.Fetch != w.fetch || g.Type != w.typ || g.Err != nil {
			t.Errorf("argument %d: %+v, want %s:%s", i+1, g, w.fetch, w.typ)
		}
	}
}

// TestSDTFetchArgs: $argN in fetch-args is the note's argument: alone it
// takes the note's type (or the fetch-arg's) and its name, inside a
// dereference only its place; :string reads what it points at; no
// fetch-args (or a filter alone) fetch every argument; a $argN past the
// note's is refused.
func TestSDTFetchArgs(t *testing.T) {
	args := []SDTArg{{Fetch: "%bp", Type: "u64"}, {Fetch: "-80(%bx)", Type: "u64"}, {Fetch: "%ax", Type: "s32"}}
	for _, tc := range []struct {
		in, want []string
		err      string
	}{
		{in: nil, want: []string{"arg1=%bp:u64", "arg2=-80(%bx):u64", "arg3=%ax:s32"}},
		{in: []string{"if", "arg3", ">", "2"}, want: []string{"arg1=%bp:u64", "arg2=-80(%bx):u64", "arg3=%ax:s32", "if", "arg3", ">", "2"}},
		{in: []string{"$arg3", "n=$arg1:x64", "f=$arg2:string"}, want: []string{"arg3=%ax:s32", "n=%bp:x64", "f=+0(-80(%bx)):string"}},
		{in: []string{"x=+16($arg1):u32", "$comm"}, want: []string{"x=+16(%bp):u32", "$comm"}},
		{in: []string{"x=$arg4"}, err: "$arg4: the probe has 3 arguments"},
	} {
		got, err := SDTFetchArgs(tc.in, args)
		if tc.err != "" {
			if err == nil || err.Error() != tc.err {
				t.Errorf("%q: %v, want %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("%q: %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
}

// TestParseSDTSpec: sdt:[MOD:]PROVIDER:NAME, and usdt:, name perf's
// events; a location of another shape is bad input.
func TestParseSDTSpec(t *testing.T) {
	for _, tc := range []struct{ text, mod, prov, name, group, event string }{
		{"sdt:python:function__entry", "", "python", "function__entry", "sdt_python", "function__entry"},
		{"usdt:/usr/lib/libstdc++.so.6:libstdcxx:throw", "/usr/lib/libstdc++.so.6", "libstdcxx", "throw", "sdt_libstdcxx", "throw"},
		{"sdt:python:*", "", "python", "*", "sdt_python", "_"},
		{"usdt:/usr/bin/python3.11:line", "/usr/bin/python3.11", "*", "line", "sdt__", "line"},
	} {
		s, err := ParseSpec(tc.text)
		if err != nil || !s.Loc.SDT || s.Loc.Module != tc.mod || s.Loc.Provider != tc.prov || s.Loc.Name != tc.name || s.Group != tc.group || s.Event != tc.event || s.Kind != KindEntry {
			t.Errorf("%s: %+v, %v", tc.text, s, err)
		}
	}
	for _, bad := range []string{"sdt:python", "sdt::x:y", "sdt:a:b:c:d", "sdt:python:"} {
		if _, err := ParseSpec(bad); err == nil || !strings.Contains(err.Error(), "want sdt:[MOD:]PROVIDER:NAME") {
			t.Errorf("%s: %v", bad, err)
		}
	}
}
