package singlestep

import (
	"bytes"
	"testing"

	"golang.org/x/arch/x86/x86asm"
)

// TestLayoutAgreesWithDecoder runs every opcode of the legacy maps (with
// common prefixes) and of the VEX maps, followed by a rip-relative ModRM,
// through both x86asm and parseLayout: they must agree on whether there is
// a rip-relative displacement and where it is. This checks the ModRM
// tables, which XOL relies on to find the displacement.
func TestLayoutAgreesWithDecoder(t *testing.T) {
	tail := []byte{0x05, 0x10, 0x20, 0x00, 0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77}
	type form struct{ lead []byte }
	var forms []form
	for _, p := range [][]byte{{}, {0x66}, {0xf2}, {0xf3}, {0x48}, {0x66, 0x48}} {
		for _, esc := range [][]byte{{}, {0x0f}, {0x0f, 0x38}, {0x0f, 0x3a}} {
			forms = append(forms, form{append(append([]byte(nil), p...), esc...)})
		}
	}
	// VEX2 with each pp, VEX3 maps 0f38/0f3a with each pp and W0/W1.
	for pp := byte(0); pp < 4; pp++ {
		forms = append(forms, form{[]byte{0xc5, 0xf8 | pp}})
		for _, m := range []byte{0xe1, 0xe2, 0xe3} {
			forms = append(forms, form{[]byte{0xc4, m, 0x78 | pp}}, form{[]byte{0xc4, m, 0xf8 | pp}})
		}
	}
	checked, rip := 0, 0
	for _, f := range forms {
		for op := 0; op < 256; op++ {
			c := byte(op)
			if len(f.lead) == 0 || bytes.Equal(f.lead, []byte{0x66}) || bytes.Equal(f.lead, []byte{0x48}) ||
				bytes.Equal(f.lead, []byte{0xf2}) || bytes.Equal(f.lead, []byte{0xf3}) || bytes.Equal(f.lead, []byte{0x66, 0x48}) {
				// Bytes that are not opcodes of the one-byte map.
				if c == 0x0f || c == 0xc4 || c == 0xc5 || c == 0x62 || c&0xf0 == 0x40 || isLegacyPrefix(c) {
					continue
				}
			}
			if bytes.HasSuffix(f.lead, []byte{0x0f}) && (c == 0x38 || c == 0x3a) {
				continue
			}
			code := append(append(append([]byte(nil), f.lead...), c), tail...)
			inst, err := x86asm.Decode(code, 64)
			if err != nil || inst.Op == 0 {
				continue
			}
			if inst.Op == x86asm.VZEROUPPER || inst.Op == x86asm.VZEROALL {
				continue // x86asm overcounts these; see decodeX86
			}
			l, err := parseLayout(code[:inst.Len])
			if err != nil {
				t.Errorf("% x (%v): parseLayout: %v", code[:inst.Len], inst, err)
				continue
			}
			wantOff := -1
			for _, a := range inst.Args {
				m, ok := a.(x86asm.Mem)
				if !ok {
					continue
				}
				if m.Base == x86asm.RIP {
					wantOff = inst.PCRelOff
				}
				// x86asm shows VEX rip-relative operands as absolute.
				if l.vex != 0 && m.Base == 0 && m.Index == 0 && m.Disp == 0x2010 {
					wantOff = len(f.lead) + 2
				}
			}
			checked++
			if wantOff >= 0 {
				rip++
			}
			if l.ripDispOff != wantOff {
				t.Errorf("% x (%v): layout puts the rip-relative disp32 at %d, decoder at %d", code[:inst.Len], inst, l.ripDispOff, wantOff)
			}
		}
	}
	t.Logf("checked %d encodings, %d rip-relative", checked, rip)
	if checked < 3000 || rip < 1500 {
		t.Errorf("too few encodings checked: %d (%d rip-relative)", checked, rip)
	}
}
