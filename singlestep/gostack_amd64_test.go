package singlestep

import "testing"

func TestGoStackCheckEnd(t *testing.T) {
	for _, tc := range []struct {
		name string
		code []byte
		want int
	}{
		// cmp 0x10(%r14),%rsp; jbe; push %rbp
		{"small frame", []byte{0x49, 0x3b, 0x66, 0x10, 0x76, 0x60, 0x55}, 6},
		// lea -0x9c38(%rsp),%r12; cmp 0x10(%r14),%r12; jbe rel32; push %rbp
		{"big frame", []byte{0x4c, 0x8d, 0xa4, 0x24, 0xc8, 0x63, 0xff, 0xff, 0x4d, 0x3b, 0x66, 0x10, 0x0f, 0x86, 0x10, 0x00, 0x00, 0x00, 0x55}, 18},
		// lea (%rax,%rax,2),%rax; ret: a leaf without a check
		{"leaf", []byte{0x48, 0x8d, 0x04, 0x40, 0xc3}, 0},
		// jbe with no check before it
		{"jbe alone", []byte{0x76, 0x02, 0x90, 0x90}, 0},
	} {
		if got := GoStackCheckEnd(tc.code); got != tc.want {
			t.Errorf("%s: got %d, want %d", tc.name, got, tc.want)
		}
	}
}
