package symbols

import (
	"bytes"
	"encoding/binary"
	"slices"
	"testing"

	"github.com/go-delve/delve/pkg/dwarf/frame"
)

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

// TestWithoutRAState: arm64's DW_CFA_AARCH64_negate_ra_state becomes a
// nop, and a byte of the same value inside an operand stays.
func TestWithoutRAState(t *testing.T) {
	in := []byte{
		0x2d,       // negate_ra_state (paciasp)
		0x0e, 0x2d, // def_cfa_offset 45
		0x9d, 0x06, // offset x29 at cfa-48
		0x0f, 0x02, 0x2d, 0x2d, // def_cfa_expression of 2 bytes
		0x44,             // advance_loc 4
		0x2d,             // negate_ra_state (autiasp)
		0x11, 0x1e, 0x7d, // offset_extended_sf x30, -3
	}
	want := []byte{0x00, 0x0e, 0x2d, 0x9d, 0x06, 0x0f, 0x02, 0x2d, 0x2d, 0x44, 0x00, 0x11, 0x1e, 0x7d}
	got := withoutRAState(in)
	if !bytes.Equal(got, want) {
		t.Errorf("got % x\nwant % x", got, want)
	}
	if in[0] != 0x2d {
		t.Errorf("the input was changed: % x", in)
	}
}

// TestWithoutBKey: a CIE's augmentation "zRB" (gcc's .cfi_b_key_frame)
// becomes "zRS", which delve's parser takes; FDEs, and bytes 'B'
// elsewhere, stay as they are, in a copy.
func TestWithoutBKey(t *testing.T) {
	cie := []byte{
		0x14, 0, 0, 0, // length 20
		0, 0, 0, 0, // CIE id
		1,                // version
		'z', 'R', 'B', 0, // augmentation
		0x04,       // code alignment 4
		0x78,       // data alignment -8
		0x1e,       // return address register x30
		0x01, 0x1b, // augmentation data: pcrel sdata4
		0x0c, 0x1f, 0x00, // def_cfa sp, 0
		0x00, 0x00, 0x00, // padding: nops
	}
	fde := []byte{
		0x10, 0, 0, 0, // length 16
		0x1c, 0, 0, 0, // CIE pointer
		'B', 0, 0, 0, // pc begin (a 'B' byte that is not an augmentation)
		0x10, 0, 0, 0, // pc range
		0x00, 0x00, 0x00, 0x00, // instructions: nops
	}
	in := append(append(append([]byte{}, cie...), fde...), 0, 0, 0, 0)
	got := withoutBKey(in, binary.LittleEndian)
	want := slices.Clone(in)
	want[11] = 'S'
	if !bytes.Equal(got, want) {
		t.Errorf("got % x\nwant % x", got, want)
	}
	if in[11] != 'B' {
		t.Errorf("the input was changed: % x", in)
	}
	if _, err := frame.Parse(got, binary.LittleEndian, 0, 8, 0x1000); err != nil {
		t.Errorf("delve's parser: %v", err)
	}
	if _, err := frame.Parse(in, binary.LittleEndian, 0, 8, 0x1000); err == nil {
		t.Errorf("delve's parser takes augmentation B now: withoutBKey can go")
	}
	plain := append(slices.Clone(in[:11]), 0, 0)
	if got := withoutBKey(plain, binary.LittleEndian); &got[0] != &plain[0] {
		t.Errorf("a copy made with no B")
	}
}
