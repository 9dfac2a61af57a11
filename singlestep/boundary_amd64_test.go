package singlestep

import (
	"errors"
	"slices"
	"testing"

	"golang.org/x/arch/x86/x86asm"
)

// A gcc -O0 function with CET: int work(int x) { return x + 1; }
const gccWork = "f3 0f 1e fa" + // 0  endbr64
	"55" + //                       4  push %rbp
	"48 89 e5" + //                 5  mov %rsp,%rbp
	"48 83 ec 10" + //              8  sub $0x10,%rsp
	"89 7d fc" + //                 12 mov %edi,-0x4(%rbp)
	"8b 45 fc" + //                 15 mov -0x4(%rbp),%eax
	"83 c0 01" + //                 18 add $0x1,%eax
	"c9" + //                       21 leave
	"c3" //                         22 ret

const workAddr = 0x401126

var gccWorkOffsets = []uint64{0, 4, 5, 8, 12, 15, 18, 21, 22}

func TestBoundaries(t *testing.T) {
	abs := func(offs ...uint64) []uint64 {
		var out []uint64
		for _, o := range offs {
			out = append(out, workAddr+o)
		}
		return out
	}
	tests := []struct {
		name    string
		code    string
		want    []uint64
		errAt   uint64 // address of the DecodeError, 0 for none
		errKind error
	}{
		{"gcc prologue", gccWork, abs(gccWorkOffsets...), 0, nil},
		{"nop padding and int3", "c3 66 2e 0f 1f 84 00 00 00 00 00 0f 1f 00 cc", abs(0, 1, 11, 14), 0, nil},
		{"avx and endbr", "f3 0f 1e fa c5 fd 6f c1 c5 f8 77 c3", abs(0, 4, 8, 11), 0, nil},
		{"empty", "", nil, 0, nil},
		{"invalid opcode part way", "55 48 89 e5 06 c3", abs(0, 1), workAddr + 4, x86asm.ErrUnrecognized},
		{"ends inside call", "55 e8 00 00", abs(0), workAddr + 1, x86asm.ErrTruncated},
		{"ends inside endbr", "55 f3 0f 1e", abs(0), workAddr + 1, x86asm.ErrTruncated},
		{"unknown after prefix", "55 f3 0f 1e c8", abs(0), workAddr + 1, x86asm.ErrUnrecognized},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Boundaries(hx(t, tt.code), workAddr)
			if !slices.Equal(got, tt.want) {
				t.Errorf("boundaries = %#x, want %#x", got, tt.want)
			}
			if tt.errAt == 0 {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				return
			}
			var de *DecodeError
			if !errors.As(err, &de) {
				t.Fatalf("error = %v, want *DecodeError", err)
			}
			if de.Addr != tt.errAt || !errors.Is(err, tt.errKind) {
				t.Errorf("error = %v (at %#x), want %v at %#x", err, de.Addr, tt.errKind, tt.errAt)
			}
		})
	}
}

func TestCheckBoundary(t *testing.T) {
	code := hx(t, gccWork)
	for _, off := range gccWorkOffsets {
		if err := CheckBoundary(code, workAddr, workAddr+off); err != nil {
			t.Errorf("offset %d: %v", off, err)
		}
	}
	tests := []struct {
		name       string
		off        uint64
		prev, next uint64
	}{
		{"inside endbr64", 1, 0, 4},
		{"inside endbr64 end", 3, 0, 4},
		{"inside mov rbp", 6, 5, 8},
		{"inside sub rsp", 10, 8, 12},
		{"inside add", 20, 18, 21},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := CheckBoundary(code, workAddr, workAddr+tt.off)
			var nb *NotBoundaryError
			if !errors.As(err, &nb) {
				t.Fatalf("error = %v, want *NotBoundaryError", err)
			}
			want := NotBoundaryError{Addr: workAddr + tt.off, Prev: workAddr + tt.prev, Next: workAddr + tt.next}
			if *nb != want {
				t.Errorf("got %+v, want %+v", *nb, want)
			}
		})
	}

	err := CheckBoundary(code, workAddr, workAddr+6)
	if want := "0x40112c is not an instruction boundary (nearest: 0x40112b, 0x40112e)"; err == nil || err.Error() != want {
		t.Errorf("message = %v, want %q", err, want)
	}

	var out *OutsideCodeError
	for _, addr := range []uint64{workAddr - 1, workAddr + uint64(len(code)), workAddr + 100} {
		if err := CheckBoundary(code, workAddr, addr); !errors.As(err, &out) {
			t.Errorf("%#x: error = %v, want *OutsideCodeError", addr, err)
		}
	}

	// Undecodable bytes after the probe do not matter; before it they do.
	bad := hx(t, "55 48 89 e5 06 c3")
	if err := CheckBoundary(bad, workAddr, workAddr+1); err != nil {
		t.Errorf("probe before bad bytes: %v", err)
	}
	if err := CheckBoundary(bad, workAddr, workAddr+2); !errors.As(err, new(*NotBoundaryError)) {
		t.Errorf("probe inside mov before bad bytes: %v, want *NotBoundaryError", err)
	}
	var de *DecodeError
	if err := CheckBoundary(bad, workAddr, workAddr+5); !errors.As(err, &de) || de.Addr != workAddr+4 {
		t.Errorf("probe after bad bytes: %v, want *DecodeError at %#x", err, workAddr+4)
	}
}
