package integration

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
)

// The kprobe grammar on real tracees: every fetch form and type with the
// exact text ftrace would print, DWARF names, return values, filters.

var fetchVariants = []variant{o0pie, o2pie}

// fieldsOf returns the text after the location of each event named name.
func fieldsOf(evs []event, name string) []string {
	var out []string
	for _, e := range evs {
		if e.name == name {
			out = append(out, e.rest)
		}
	}
	return out
}

func wantFields(t *testing.T, evs []event, name string, want []string) {
	t.Helper()
	got := fieldsOf(evs, name)
	if len(got) != len(want) {
		t.Errorf("%s: %d events, want %d: %q", name, len(got), len(want), got)
		return
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("%s event %d:\n got %q\nwant %q", name, i, got[i], want[i])
		}
	}
}

func TestFetchForms(t *testing.T) {
	t.Parallel()
	for _, v := range fetchVariants {
		t.Run(v.String(), func(t *testing.T) {
			t.Parallel()
			path := bin("fetch", v)
			evs := traced(t, nil, []string{
				`p:t/h handle m=+0(+0(%di)):string len=+8(%di):s32 n=%si:u32 t0=+12(%di):char fl=+16(%di):b3@0/32 kd=+16(%di):b5@3/32 tag=+12(%di):x8[4] sub=%esi z=+0(%si):string`,
				`p:t/m many $arg7 $arg8:s64 @gcount:x64 @gname:string \0x10:u8 c=$comm fn=%ip:symbol ra=` + entryReturnFetch + `:symbol`,
				`r:t/neg neg $retval:s32`,
			}, path, "3")
			methods := []string{"GET", "POST", "PUT"}
			var h, m, neg []string
			for i := 0; i < 3; i++ {
				h = append(h, fmt.Sprintf(` m="%s" len=%d n=%d t0='a' fl=%d kd=%d tag={0x61,0x62,0x0,0x0} sub=0x%x z=(fault)`,
					methods[i], 10*i, i, i&7, (i*3)&31, i))
				m = append(m, fmt.Sprintf(` arg1=0x%x arg2=%d arg3=0x1122334455667788 arg4="global" arg5=16 c="%s" fn=many+0x0/0x%x ra=RA`,
					70+i, 80+i, commOf(path), funcSym(t, path, "many").Size))
				neg = append(neg, fmt.Sprintf(" arg1=%d", -i))
			}
			wantFields(t, evs, "h", h)
			wantFields(t, evs, "neg", neg)
			// The return address is somewhere in main: mask it.
			ra := regexp.MustCompile(` ra=main\+0x[0-9a-f]+/0x[0-9a-f]+$`)
			var masked []event
			for _, e := range evs {
				if e.name == "m" {
					if !ra.MatchString(e.rest) {
						t.Errorf("m: no ra=main+OFF/SIZE in %q", e.rest)
					}
					e.rest = ra.ReplaceAllString(e.rest, " ra=RA")
				}
				masked = append(masked, e)
			}
			wantFields(t, masked, "m", m)
		})
	}
}

func TestFetchDwarf(t *testing.T) {
	t.Parallel()
	for _, v := range fetchVariants {
		t.Run(v.String(), func(t *testing.T) {
			t.Parallel()
			path := bin("fetch", v)
			evs := traced(t, nil, []string{
				`p:handle r->method r->len n r->tag *r`,
				`r:handle n $retval:s32`,
				`p:fetch.c:46 i total`,
				`p:d/params handle $params`,
			}, path, "3")
			methods := []string{"GET", "POST", "PUT"}
			var h, r, line, params []string
			total := 0
			for i := 0; i < 3; i++ {
				h = append(h, fmt.Sprintf(` method="%s" len=%d n=%d tag="ab" r={method="%s",len=%d,tag="ab",flags=%d,kind=%d}`,
					methods[i], 10*i, i, methods[i], 10*i, i&7, (i*3)&31))
				r = append(r, fmt.Sprintf(" n=%d arg2=%d", i, 11*i))
				total += 11*i + 171 + 2*i // handle() and many() are added before line 46
				line = append(line, fmt.Sprintf(" i=%d total=%d", i, total))
				total -= i
				params = append(params, fmt.Sprintf(" r=PTR n=%d", i))
			}
			wantFields(t, evs, "p_handle_0", h)
			wantFields(t, evs, "r_handle_0", r)
			wantFields(t, evs, "p_fetch_L46", line)
			ptr := regexp.MustCompile(`^ r=0x[0-9a-f]+ `)
			var masked []event
			for _, e := range evs {
				if e.name == "params" {
					e.rest = ptr.ReplaceAllString(e.rest, " r=PTR ")
				}
				masked = append(masked, e)
			}
			wantFields(t, masked, "params", params)
			// DWARF names are read after the prologue, as perf probe does:
			// at -O0 that is past the stores of the arguments.
			for _, e := range evs {
				if e.name == "p_handle_0" && v.opt == "-O0" && e.off == 0 {
					t.Errorf("-O0 probe with DWARF names at the entry, before the prologue: %q", e.line)
					break
				}
			}
		})
	}
	t.Run("go", func(t *testing.T) {
		t.Parallel()
		evs := traced(t, nil, []string{`p:main.work i`, `r:main.work $retval:s64`}, goworkBin, "6")
		var p, r []string
		for i := 0; i < 6; i++ {
			p = append(p, fmt.Sprintf(" i=%d", i))
			r = append(r, fmt.Sprintf(" arg1=%d", i*3+i>>2))
		}
		wantFields(t, evs, "p_main_work_0", p)
		wantFields(t, evs, "r_main_work_0", r)
	})
}

// TestFilter keeps exactly the matching calls.
func TestFilter(t *testing.T) {
	t.Parallel()
	path := bin("fetch", o2pie)
	evs := traced(t, nil, []string{
		`p:f/range handle n if n >= 1 && n < 3`,
		`p:f/glob handle m=+0(+0(%di)):string if m ~ "P*"`,
		`r:f/neg neg $retval:s32 if arg1 < -3 || arg1 == 0`,
		`p:f/not many $arg7 if !(arg1 & 1)`,
	}, path, "6")
	wantFields(t, evs, "range", []string{" n=1", " n=2"})
	wantFields(t, evs, "glob", []string{` m="POST"`, ` m="PUT"`, ` m="POST"`, ` m="PUT"`})
	wantFields(t, evs, "neg", []string{" arg1=0", " arg1=-4", " arg1=-5"})
	wantFields(t, evs, "not", []string{" arg1=0x46", " arg1=0x48", " arg1=0x4a"})
}

func TestFetchBadInput(t *testing.T) {
	t.Parallel()
	path := bin("fetch", o0pie)
	for _, b := range []badSpec{
		{spec: `p:handle x=%xx`, contains: []string{"%xx", "register"}},
		{spec: `p:handle x=%di:u33`, contains: []string{"u33"}},
		{spec: `p:handle $retval`, contains: []string{"$retval"}},
		{spec: `p:handle cnt`, contains: []string{"cnt", "in scope: r, n"}},
		{spec: `p:handle x=%di:u8[65]`, contains: []string{"65"}},
		{spec: `p:fetch.c:1`, contains: []string{"fetch.c:1", "no code"}},
		{spec: `p:handle n->x`, contains: []string{"n->x"}},
		{spec: `p:handle x=+0(%di`, contains: []string{"+0(%di", ")"}},
		{spec: `p:handle n if y > 1`, contains: []string{"y", "fields: n"}},
		{spec: `r:handle+4`, contains: []string{"handle+0x4", "entry"}},
		{spec: `p:nofile.c:3`, contains: []string{"nofile.c"}},
	} {
		t.Run(strings.ReplaceAll(b.spec, "/", "_"), func(t *testing.T) {
			t.Parallel()
			r := probe(t, "run", b.spec, "--", path, "1")
			b.check(t, r)
		})
	}
}

// TestSameAddress: probes sharing an address all fire, each with its own
// fields; FUNC:RLINE is perf's line relative to the function's first.
func TestSameAddress(t *testing.T) {
	t.Parallel()
	path := bin("fetch", o0pie)
	evs := traced(t, nil, []string{
		`p:handle:2 n r->len`,
		`p:a/x handle n`,
		`p:a/y handle+0 x=%si:u8`,
		`p:a/z handle+0 x=%si:s16`,
	}, path, "2")
	wantFields(t, evs, "p_handle_L2", []string{" n=0 len=0", " n=1 len=10"})
	wantFields(t, evs, "x", []string{" n=0", " n=1"})
	wantFields(t, evs, "y", []string{" x=0", " x=1"})
	wantFields(t, evs, "z", []string{" x=0", " x=1"})
	where := map[string]string{}
	for _, e := range evs {
		if w, ok := where[e.name]; ok && w != e.loc {
			t.Errorf("%s at %s and %s", e.name, w, e.loc)
		}
		where[e.name] = e.loc
	}
	if where["x"] != where["p_handle_L2"] || where["y"] != where["z"] || where["x"] == where["y"] {
		t.Errorf("locations %v: want x with the line probe (after the prologue), y with z (the entry)", where)
	}
}
