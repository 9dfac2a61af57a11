package symbols

import (
	"cmp"
	"math/rand"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"testing"

	"github.com/probedbg/probe/singlestep"
)

// intoC has a function, other, that jumps to target+1, past target's
// first instruction, and one, cond, whose jcc lands at target+4.
const intoC = `long target(long), other(long), cond(long);
__asm__(".text\n"
	".globl target\n.type target,@function\ntarget:\n"
	"	push %rbx\n"
	"	mov %rdi,%rbx\n"
	"	lea 1(%rbx,%rbx,2),%rax\n"
	"	pop %rbx\n"
	"	ret\n"
	".size target,.-target\n"
	".globl other\n.type other,@function\nother:\n"
	"	push %rbx\n"
	"	jmp target+1\n"
	".size other,.-other\n"
	".globl cond\n.type cond,@function\ncond:\n"
	"	push %rbx\n"
	"	mov %rdi,%rbx\n"
	"	test %rdi,%rdi\n"
	"	jns target+4\n"
	"	pop %rbx\n"
	"	ret\n"
	".size cond,.-cond\n");
int main(int argc, char **argv) { return target(argc) + other(argc) + cond(argc) == 12 ? 0 : 1; }
`

func buildInto(t *testing.T) string {
	t.Helper()
	needTools(t, "gcc")
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "into.c"), []byte(intoC), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "into")
	run(t, dir, "gcc", "-O2", "-o", out, "into.c")
	return out
}

// openBranches opens the module at path, closed when the test ends, and
// computes its branch targets.
func openBranches(t *testing.T, path string) (*Module, *BranchTargets) {
	t.Helper()
	m, err := OpenModule(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	bt, err := m.BranchTargets()
	if err != nil {
		t.Fatal(err)
	}
	return m, bt
}

// TestBranchTargetsInside: the branches of other and cond land inside
// target's first five bytes, and Inside says where from; nothing lands
// strictly inside the start of an ordinary function.
func TestBranchTargetsInside(t *testing.T) {
	m, bt := openBranches(t, buildInto(t))
	syms := map[string]Symbol{}
	for _, name := range []string{"target", "other", "cond", "main"} {
		s, ok := m.Lookup(name)
		if !ok {
			t.Fatalf("no symbol %s", name)
		}
		syms[name] = s
	}
	target := syms["target"].Addr
	for _, tc := range []struct {
		lo, hi uint64
		want   Landing
		ok     bool
	}{
		{target, target + 5, Landing{At: target + 1, From: syms["other"].Addr + 1}, true},
		{target + 1, target + 5, Landing{At: target + 4, From: syms["cond"].Addr + 7}, true},
		{target + 1, target + 4, Landing{}, false}, // ends excluded
		{syms["other"].Addr, syms["other"].Addr + 1, Landing{}, false},
	} {
		l, ok := bt.Inside(tc.lo, tc.hi)
		if l != tc.want || ok != tc.ok {
			t.Errorf("Inside(%#x, %#x) = %+v, %v; want %+v, %v", tc.lo, tc.hi, l, ok, tc.want, tc.ok)
		}
	}
	if l, ok := bt.Inside(syms["main"].Addr, syms["main"].Addr+5); ok {
		t.Errorf("something lands inside main's first bytes: %+v", l)
	}
}

// TestBranchTargetsEntries: an entry point inside the range is a landing
// too, branches first.
func TestBranchTargetsEntries(t *testing.T) {
	bt := &BranchTargets{branches: []singlestep.Branch{{From: 0x50, To: 0x103}}, entries: []uint64{0x100, 0x102, 0x200}}
	for _, tc := range []struct {
		lo, hi uint64
		want   Landing
	}{
		{0x100, 0x105, Landing{At: 0x103, From: 0x50}},
		{0x101, 0x103, Landing{At: 0x102, Entry: true}},
		{0xff, 0x101, Landing{At: 0x100, Entry: true}},
		{0x200, 0x205, Landing{}},
	} {
		if l, _ := bt.Inside(tc.lo, tc.hi); l != tc.want {
			t.Errorf("Inside(%#x, %#x) = %+v, want %+v", tc.lo, tc.hi, l, tc.want)
		}
	}
}

// objdumpBranchRE matches objdump's direct branches: "jmp 1139 <target+0x1>".
var objdumpBranchRE = regexp.MustCompile(`\b(?:j[a-z]+|call|loop[a-z]*|xbegin)\s+([0-9a-f]+) <`)

// TestBranchTargetsObjdump: every direct branch objdump sees in a
// function of a program, and of libc where it is found, is among the
// module's branches, from the same place to the same target.
func TestBranchTargetsObjdump(t *testing.T) {
	files := []string{buildInto(t)}
	for _, p := range []string{"/lib/x86_64-linux-gnu/libc.so.6", "/usr/lib64/libc.so.6", "/lib64/libc.so.6"} {
		if _, err := os.Stat(p); err == nil {
			files = append(files, p)
			break
		}
	}
	for _, path := range files {
		_, bt := openBranches(t, path)
		have := make(map[singlestep.Branch]bool, len(bt.branches))
		for _, b := range bt.branches {
			have[b] = true
		}
		seen := 0
		for _, insns := range disassemble(t, path) {
			for _, in := range insns {
				mm := objdumpBranchRE.FindStringSubmatch(in.text)
				if mm == nil {
					continue
				}
				to, _ := strconv.ParseUint(mm[1], 16, 64)
				seen++
				if b := (singlestep.Branch{From: in.addr, To: to}); !have[b] {
					t.Errorf("%s: objdump's %#x: %s is not among the branches", path, in.addr, in.text)
				}
			}
		}
		t.Logf("%s: %d branches objdump shows, %d found by the sweep, %d entry points", path, seen, len(bt.branches), len(bt.entries))
		if seen == 0 {
			t.Errorf("%s: objdump shows no branch", path)
		}
	}
}

// TestBranchTargetsShared: the modules opened on one file share its
// branch targets, computed once; a copy of the file has its own.
func TestBranchTargetsShared(t *testing.T) {
	path := buildInto(t)
	_, first := openBranches(t, path)
	_, second := openBranches(t, path)
	if first != second {
		t.Errorf("two modules of %s computed their branch targets each", path)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	cp := filepath.Join(t.TempDir(), "copy")
	if err := os.WriteFile(cp, data, 0o755); err != nil {
		t.Fatal(err)
	}
	_, bt := openBranches(t, cp)
	if bt == first || !slices.Equal(bt.branches, first.branches) || !slices.Equal(bt.entries, first.entries) {
		t.Errorf("the copy's branch targets: shared %v, equal %v", bt == first, slices.Equal(bt.branches, first.branches))
	}
}

// TestFDEStartsFromHeader: the starts read from .eh_frame_hdr's table are
// those of the FDEs delve's parser finds in .eh_frame.
func TestFDEStartsFromHeader(t *testing.T) {
	m, _ := openBranches(t, buildInto(t))
	fromHdr, err := m.ehFrameHdrStarts()
	if err != nil {
		t.Fatal(err)
	}
	var parsed []uint64
	for _, f := range m.parseCFI() {
		parsed = append(parsed, f.Begin())
	}
	slices.Sort(fromHdr)
	slices.Sort(parsed)
	if len(fromHdr) == 0 || !slices.Equal(fromHdr, parsed) {
		t.Errorf("FDE starts from .eh_frame_hdr %x, parsed %x", fromHdr, parsed)
	}
}

// TestSortByTarget: the radix sort orders branches by target as a
// comparison sort does, over targets that differ in one byte or in all.
func TestSortByTarget(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	for _, spread := range []uint64{0, 0xff, 0xffff_ffff, ^uint64(0)} {
		b := make([]singlestep.Branch, 5000)
		for i := range b {
			b[i] = singlestep.Branch{From: uint64(i), To: 0x7f00_0000_0000 + rng.Uint64()&spread}
		}
		want := slices.Clone(b)
		slices.SortStableFunc(want, func(x, y singlestep.Branch) int { return cmp.Compare(x.To, y.To) })
		sortByTarget(b)
		if !slices.Equal(b, want) {
			t.Errorf("spread %#x: not sorted by target, or not stably", spread)
		}
	}
}
