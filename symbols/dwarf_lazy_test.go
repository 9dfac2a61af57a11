//go:build amd64

package symbols

import "testing"

// TestDebugLazy: Debug finds the DWARF but reads none of it; the first
// method that needs it does.
func TestDebugLazy(t *testing.T) {
	s, d := dwarfBinary(t, buildDwarfC(t, "-O0"))
	d.mu.Lock()
	loaded := d.loaded || d.bi != nil || d.dw != nil
	d.mu.Unlock()
	if loaded {
		t.Fatal("Debug() read the DWARF; it should wait for a method that needs it")
	}
	_, sym, err := s.Lookup("main")
	if err != nil {
		t.Fatal(err)
	}
	if name, entry, ok := d.FuncAt(sym.Addr + s.Main().Bias + 1); !ok || name != "main" || entry != sym.Addr+s.Main().Bias {
		t.Errorf("FuncAt(main+1) = %q, %#x, %v; want main, %#x", name, entry, ok, sym.Addr+s.Main().Bias)
	}
}

// TestDelveDWARFShared: the standard library's view of the DWARF is
// delve's own copy, not a second one read from the file; if a delve
// upgrade moves Image.dwarf, delveDWARF must follow (or the DWARF is
// decompressed and kept twice).
func TestDelveDWARFShared(t *testing.T) {
	_, d := dwarfBinary(t, buildDwarfC(t, "-O0"))
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.load(); err != nil {
		t.Fatal(err)
	}
	if got := delveDWARF(d.bi.Images[0]); got == nil || got != d.dw {
		t.Errorf("delveDWARF = %p, DebugInfo.dw = %p: want delve's DWARF, shared", got, d.dw)
	}
}

// TestStructFieldOffset: a field's offset from the DWARF of a Go and of a
// C program (DWARF 5, whose attributes index .debug_str_offsets and
// .debug_addr). want -1: not found; 0: any offset past the start.
func TestStructFieldOffset(t *testing.T) {
	goBin, cBin := buildDwarfGo(t), buildDwarfC(t, "-O0")
	for _, tc := range []struct {
		bin        string
		typ, field string
		want       int64
	}{
		{goBin, "main.Point", "Name", 16},
		{goBin, "runtime.g", "goid", 0},
		{cBin, "req", "tag", 12},
		{cBin, "req", "nosuch", -1},
	} {
		m, err := OpenModule(tc.bin)
		if err != nil {
			t.Fatal(err)
		}
		got, err := m.StructFieldOffset(tc.typ, tc.field)
		m.Close()
		switch {
		case tc.want < 0:
			if err == nil {
				t.Errorf("%s.%s: offset %d, want an error", tc.typ, tc.field, got)
			}
		case err != nil:
			t.Errorf("%s.%s: %v", tc.typ, tc.field, err)
		case tc.want == 0 && got <= 0, tc.want > 0 && got != tc.want:
			t.Errorf("%s.%s: offset %d, want %d", tc.typ, tc.field, got, tc.want)
		}
	}
}
