package singlestep

import (
	"debug/elf"
	"os"
	"slices"
	"testing"

	"golang.org/x/arch/x86/x86asm"
)

// TestQuickDecodeForms: the forms quickDecode measures itself, each as
// x86asm measures it, and those it leaves to x86asm.
func TestQuickDecodeForms(t *testing.T) {
	tests := []struct {
		name   string
		code   string
		len    int   // 0: left to x86asm
		branch bool  // a direct branch, displacement rel
		rel    int64 //
	}{
		{name: "push rbp", code: "55", len: 1},
		{name: "mov rsp,rbp", code: "48 89 e5", len: 3},
		{name: "sub imm8", code: "48 83 ec 10", len: 4},
		{name: "sub imm32", code: "48 81 ec 00 01 00 00", len: 7},
		{name: "16-bit add imm16", code: "66 81 c1 34 12", len: 5},
		{name: "REX.W wins over 66", code: "66 48 81 c1 34 12 00 00", len: 8},
		{name: "movabs imm64", code: "48 b8 01 02 03 04 05 06 07 08", len: 10},
		{name: "mov imm16", code: "66 b8 34 12", len: 4},
		{name: "mov imm32", code: "b8 01 00 00 00", len: 5},
		{name: "rip-relative load", code: "48 8b 05 10 20 00 00", len: 7},
		{name: "SIB without base", code: "8b 04 25 00 10 00 00", len: 7},
		{name: "SIB disp8", code: "48 8b 44 24 08", len: 5},
		{name: "cs nopw padding", code: "66 2e 0f 1f 84 00 00 00 00 00", len: 10},
		{name: "data16 cs nopw", code: "66 66 2e 0f 1f 84 00 00 00 00 00", len: 11},
		{name: "endbr64", code: "f3 0f 1e fa", len: 4},
		{name: "test imm8", code: "f6 c1 01", len: 3},
		{name: "not r/m8", code: "f6 d1", len: 2},
		{name: "test imm32", code: "f7 c1 00 01 00 00", len: 6},
		{name: "test imm16", code: "66 f7 c1 00 01", len: 5},
		{name: "neg", code: "48 f7 d8", len: 3},
		{name: "enter", code: "c8 10 00 00", len: 4},
		{name: "ret imm16", code: "c2 08 00", len: 3},
		{name: "rep movsb", code: "f3 a4", len: 2},
		{name: "pshufd imm8", code: "66 0f 70 c1 1b", len: 5},
		{name: "pshufb (0f 38)", code: "66 0f 38 00 c1", len: 5},
		{name: "palignr (0f 3a)", code: "66 0f 3a 0f c1 08", len: 6},
		{name: "shld imm8", code: "0f a4 c2 04", len: 4},
		{name: "movzbl", code: "0f b6 07", len: 3},
		{name: "bswap", code: "0f c8", len: 2},
		{name: "cpuid", code: "0f a2", len: 2},
		{name: "xgetbv", code: "0f 01 d0", len: 3},
		{name: "rdpkru (unknown to x86asm)", code: "0f 01 ee", len: 3},
		{name: "sgdt", code: "0f 01 04 24", len: 4},
		{name: "jmp rel8", code: "eb fe", len: 2, branch: true, rel: -2},
		{name: "jne rel8", code: "75 10", len: 2, branch: true, rel: 16},
		{name: "jmp rel32", code: "e9 00 01 00 00", len: 5, branch: true, rel: 256},
		{name: "call rel32", code: "e8 fb ff ff ff", len: 5, branch: true, rel: -5},
		{name: "je rel32", code: "0f 84 80 00 00 00", len: 6, branch: true, rel: 128},
		{name: "loop", code: "e2 f0", len: 2, branch: true, rel: -16},
		{name: "jrcxz", code: "e3 05", len: 2, branch: true, rel: 5},
		// For x86asm: prefixed branches, xbegin, VEX, EVEX, system groups.
		{name: "bnd jmp", code: "f2 e9 00 01 00 00"},
		{name: "hinted jcc", code: "3e 74 10"},
		{name: "xbegin", code: "c7 f8 10 00 00 00"},
		{name: "vmovdqu (VEX)", code: "c5 fe 6f 06"},
		{name: "vmovdqu64 (EVEX)", code: "62 e1 fe 48 6f 06"},
		{name: "lock cmpxchg", code: "f0 48 0f b1 11"},
		{name: "movabs moffs", code: "48 a1 00 00 00 00 00 00 00 00"},
		{name: "invalid in 64-bit mode", code: "06"},
		{name: "two REX", code: "48 48 89 e5"},
		{name: "truncated imm", code: "48 81 ec 00 01"},
		{name: "jmp *%rax", code: "ff e0"},
		{name: "jmp *8(%rax)", code: "ff 60 08"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code := hx(t, tc.code)
			n, rel, branch, ok := quickDecode(code)
			if tc.len == 0 {
				if ok {
					t.Fatalf("quickDecode(% x) = %d, %v, %d: want it left to x86asm", code, n, branch, rel)
				}
				return
			}
			if !ok || n != tc.len || branch != tc.branch || rel != tc.rel {
				t.Fatalf("quickDecode(% x) = %d, %d, %v, %v; want %d, %d, %v", code, n, rel, branch, ok, tc.len, tc.rel, tc.branch)
			}
			agreeWithX86asm(t, code, 0)
		})
	}
}

// TestBranchDecode: what FunctionBranches (for codegen.PlanDetour) and
// the sweep ask of an instruction.
func TestBranchDecode(t *testing.T) {
	tests := []struct {
		name             string
		code             string
		len              int
		rel              int64
		direct, indirect bool
	}{
		{name: "call rel32", code: "e8 10 00 00 00", len: 5, rel: 16, direct: true},
		{name: "bnd jmp", code: "f2 e9 00 01 00 00", len: 6, rel: 256, direct: true},
		{name: "xbegin", code: "c7 f8 10 00 00 00", len: 6, rel: 16, direct: true},
		{name: "jmp *%rax", code: "ff e0", len: 2, indirect: true},
		{name: "notrack jmp *%rax", code: "3e ff e0", len: 3, indirect: true},
		{name: "jmp *table(,%rax,8)", code: "ff 24 c5 00 10 00 00", len: 7, indirect: true},
		{name: "call *%rax", code: "ff d0", len: 2},
		{name: "vmovdqu", code: "c5 fe 6f 06", len: 4},
		{name: "mov", code: "48 89 e5", len: 3},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			n, rel, direct, indirect, err := branchDecode(hx(t, tc.code))
			if err != nil || n != tc.len || rel != tc.rel || direct != tc.direct || indirect != tc.indirect {
				t.Fatalf("branchDecode = %d, %d, direct %v, indirect %v, %v; want %d, %d, %v, %v", n, rel, direct, indirect, err, tc.len, tc.rel, tc.direct, tc.indirect)
			}
		})
	}
	if _, _, _, _, err := branchDecode(hx(t, "06")); err == nil {
		t.Errorf("branchDecode(06): no error")
	}
}

// agreeWithX86asm checks quickDecode against x86asm at code[off:] where
// both decode, and reports whether quickDecode did.
func agreeWithX86asm(t testing.TB, code []byte, at uint64) (quick bool) {
	t.Helper()
	n, rel, branch, ok := quickDecode(code)
	if !ok {
		return false
	}
	inst, err := decodeInst(code)
	if err != nil {
		return true // x86asm does not know it: nothing to compare
	}
	r, isRel := inst.Args[0].(x86asm.Rel)
	if n != inst.Len || branch != isRel || branch && rel != int64(r) {
		t.Fatalf("%#x: % x: quickDecode says length %d, branch %v %d; x86asm: %v, length %d", at, code[:min(len(code), 15)], n, branch, rel, inst, inst.Len)
	}
	return true
}

// TestQuickDecodeAgrees: over the code of real programs (this test's
// binary; libc where it is found), decoded from start to end, quickDecode
// measures every instruction it takes as x86asm does, and takes most.
func TestQuickDecodeAgrees(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	files := []string{self}
	for _, p := range []string{"/lib/x86_64-linux-gnu/libc.so.6", "/usr/lib64/libc.so.6", "/lib64/libc.so.6"} {
		if _, err := os.Stat(p); err == nil {
			files = append(files, p)
			break
		}
	}
	for _, path := range files {
		f, err := elf.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		var insns, quick int
		for _, s := range f.Sections {
			if s.Type != elf.SHT_PROGBITS || s.Flags&elf.SHF_EXECINSTR == 0 {
				continue
			}
			code, err := s.Data()
			if err != nil {
				t.Fatal(err)
			}
			for off := 0; off < len(code); {
				inst, err := decodeInst(code[off:])
				if err != nil {
					off++
					continue
				}
				insns++
				if agreeWithX86asm(t, code[off:], s.Addr+uint64(off)) {
					quick++
				}
				off += inst.Len
			}
		}
		f.Close()
		t.Logf("%s: %d instructions, %d measured by quickDecode", path, insns, quick)
		if quick < insns*9/10 {
			t.Errorf("%s: quickDecode measured %d of %d instructions, want 90%%", path, quick, insns)
		}
	}
}

// FuzzQuickDecode: on any bytes, quickDecode measures as x86asm does
// wherever both decode.
func FuzzQuickDecode(f *testing.F) {
	for _, s := range []string{"55", "48 89 e5", "66 2e 0f 1f 84 00 00 00 00 00", "48 b8 01 02 03 04 05 06 07 08",
		"f7 c1 00 01 00 00", "66 0f 3a 0f c1 08", "0f 84 80 00 00 00", "e3 05", "c8 10 00 00", "8b 04 25 00 10 00 00"} {
		f.Add(hx(f, s))
	}
	f.Fuzz(func(t *testing.T, code []byte) {
		agreeWithX86asm(t, code, 0)
	})
}

// TestSweepBranches: the sweep finds every kind of direct branch, where
// it is and where it goes; goes on after bytes that do not decode; starts
// again at each entry point, so that data before a function cannot hide
// its branches; and decodes from an entry on past the next one until the
// two decodings meet, so that an entry inside an instruction hides
// nothing either.
func TestSweepBranches(t *testing.T) {
	const at = 0x1000
	tests := []struct {
		name    string
		code    string
		entries []uint64 // offsets
		want    []Branch // offsets
	}{
		{
			name: "every form",
			code: "eb 00 75 fe e9 00 00 00 00 e8 f2 ff ff ff 0f 84 02 00 00 00 e2 fe e3 fe c7 f8 00 00 00 00 c3",
			want: []Branch{{0, 2}, {2, 2}, {4, 9}, {9, 0}, {14, 22}, {20, 20}, {22, 22}, {24, 30}},
		},
		{
			name: "undecodable bytes skipped",
			code: "06 07 eb 00 c3",
			want: []Branch{{2, 4}},
		},
		{
			// mov $imm64 swallows the jmp without the entry at 3.
			name:    "data before an entry",
			code:    "48 b8 00 eb 01 00 00 00 00 00 c3",
			entries: []uint64{3},
			want:    []Branch{{3, 6}},
		},
		{
			// The entry at 1 is inside a mov $imm32: decoded from 1,
			// the bytes are a jmp; from 0, the mov and then the jne
			// at 5, which the decoding from 1 does not see (it reads
			// 00 00 75 01 as add and add).
			name:    "entry inside an instruction",
			code:    "b8 eb 10 00 00 75 01 c3 c3",
			entries: []uint64{1},
			want:    []Branch{{1, 19}, {5, 8}},
		},
		{
			name: "no branch",
			code: "55 48 89 e5 5d c3",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var entries []uint64
			for _, e := range tc.entries {
				entries = append(entries, at+e)
			}
			got := SweepBranches(hx(t, tc.code), at, entries)
			var want []Branch
			for _, b := range tc.want {
				want = append(want, Branch{From: at + b.From, To: at + b.To})
			}
			byFrom := func(a, b Branch) int { return int(a.From) - int(b.From) }
			slices.SortFunc(got, byFrom)
			if !slices.Equal(got, want) {
				t.Fatalf("branches %x, want %x", got, want)
			}
		})
	}
}
