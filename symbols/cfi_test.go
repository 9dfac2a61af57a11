package symbols

import "testing"

func TestCallerRule(t *testing.T) {
	path := buildProg(t, t.TempDir(), "prog", "-O2", "-fomit-frame-pointer", "-no-pie", "-fno-pie")
	mod, err := OpenModule(path)
	if err != nil {
		t.Fatal(err)
	}
	defer mod.Close()
	m := &Mapped{Module: mod, Name: "prog"}
	work, ok := mod.Lookup("work")
	if !ok {
		t.Fatal("no work")
	}
	// At a function's first instruction the return address is at [rsp]:
	// CFA = rsp+8, return address at CFA-8.
	r, ok := m.CallerRule(work.Addr)
	if want := (CallerRule{CFAOffset: 8, RetOffset: -8}); !ok || r != want {
		t.Errorf("CallerRule(work) = %+v, %v; want %+v", r, ok, want)
	}
	start, ok := mod.Lookup("_start")
	if !ok {
		t.Fatal("no _start")
	}
	// glibc's _start marks the return address undefined: the outermost frame.
	if r, ok := m.CallerRule(start.Addr + 1); !ok || !r.Outermost {
		t.Errorf("CallerRule(_start+1) = %+v, %v; want the outermost frame", r, ok)
	}
	if r, ok := m.CallerRule(0x10); ok {
		t.Errorf("CallerRule(0x10) = %+v; want no rule outside any FDE", r)
	}
}
