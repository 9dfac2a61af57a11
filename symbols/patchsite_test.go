package symbols

import (
	"bufio"
	"bytes"
	"cmp"
	"debug/elf"
	"encoding/hex"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// progFuncs are the functions defined in progC and otherC: the only ones
// a -pg or -fpatchable-function-entry build instruments (crt and libc
// code is not compiled with these flags).
var progFuncs = []string{"helper", "work", "worker", "twin", "dupe", "main", "call_twin"}

// disInsn is one instruction of objdump -d -w.
type disInsn struct {
	addr uint64
	raw  []byte
	text string
}

var (
	disHeaderRE = regexp.MustCompile(`^([0-9a-f]+) <(.+)>:$`)
	disInsnRE   = regexp.MustCompile(`^\s*([0-9a-f]+):\t([0-9a-f ]+)\t(.*)$`)
	// objdump names the target of a call, direct or through the GOT:
	// "call 401060 <mcount@plt>", "call *0x2e2c(%rip) # 403fe0 <mcount@GLIBC_2.2.5>",
	// "addr32 call 43ae50 <_mcount>".
	disMcountCallRE = regexp.MustCompile(`\bcall\b.*<(mcount|_mcount|__fentry__)[@>]`)
)

// disassemble returns the instructions of each function objdump shows,
// by the function's address.
func disassemble(t *testing.T, path string) map[uint64][]disInsn {
	t.Helper()
	needTools(t, "objdump")
	funcs := make(map[uint64][]disInsn)
	var cur uint64
	sc := bufio.NewScanner(strings.NewReader(run(t, "", "objdump", "-d", "-w", path)))
	for sc.Scan() {
		line := sc.Text()
		if m := disHeaderRE.FindStringSubmatch(line); m != nil {
			cur, _ = strconv.ParseUint(m[1], 16, 64)
			continue
		}
		m := disInsnRE.FindStringSubmatch(line)
		if m == nil || cur == 0 {
			continue
		}
		addr, _ := strconv.ParseUint(m[1], 16, 64)
		raw, err := hex.DecodeString(strings.ReplaceAll(m[2], " ", ""))
		if err != nil {
			t.Fatalf("objdump line %q: %v", line, err)
		}
		funcs[cur] = append(funcs[cur], disInsn{addr, raw, strings.TrimSpace(m[3])})
	}
	return funcs
}

// progFuncSymbols returns the .symtab functions of progFuncs, by address.
func progFuncSymbols(t *testing.T, path string) []elf.Symbol {
	t.Helper()
	f, err := elf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	syms, err := f.Symbols()
	if err != nil {
		t.Fatal(err)
	}
	var out []elf.Symbol
	for _, s := range syms {
		if elf.ST_TYPE(s.Info) == elf.STT_FUNC && s.Section != elf.SHN_UNDEF && slices.Contains(progFuncs, s.Name) {
			out = append(out, s)
		}
	}
	slices.SortFunc(out, func(a, b elf.Symbol) int { return cmp.Compare(a.Value, b.Value) })
	if len(out) != len(progFuncs)+1 { // twin is there twice
		t.Fatalf("%s: functions of the test program: %v", path, out)
	}
	return out
}

// wantProfilingSites finds, with objdump, the -pg site of each function
// of the test program: an fentry nop first thing (after endbr64), or the
// first call of mcount or __fentry__.
func wantProfilingSites(t *testing.T, path string) []PatchSite {
	t.Helper()
	dis := disassemble(t, path)
	var want []PatchSite
	for _, fn := range progFuncSymbols(t, path) {
		insns := dis[fn.Value]
		if len(insns) > 0 && strings.HasPrefix(insns[0].text, "endbr64") {
			insns = insns[1:]
		}
		site := PatchSite{Func: fn.Name}
		switch {
		case len(insns) > 0 && bytes.Equal(insns[0].raw, []byte{0x0f, 0x1f, 0x44, 0x00, 0x00}):
			site.Addr, site.Kind = insns[0].addr, FentryNop
		default:
			for _, in := range insns {
				if disMcountCallRE.MatchString(in.text) {
					site.Addr, site.Kind = in.addr, McountCall
					break
				}
			}
		}
		if site.Kind == 0 {
			t.Fatalf("%s: objdump shows no fentry nop or mcount call in %s at %#x: %+v", path, fn.Name, fn.Value, insns)
		}
		site.Offset = int64(site.Addr - fn.Value)
		want = append(want, site)
	}
	return want
}

// wantPatchableSites computes the -fpatchable-function-entry=n,before
// sites of the test program's functions from their symbols, and checks
// that there are nops: before of them ahead of the symbol, the rest at the
// entry, after an endbr64 under -fcf-protection.
func wantPatchableSites(t *testing.T, path string, n, before int) []PatchSite {
	t.Helper()
	m := openTestModule(t, path)
	var want []PatchSite
	for _, fn := range progFuncSymbols(t, path) {
		addr := fn.Value - uint64(before)
		code, err := m.ReadCode(addr, uint64(n+len(endbr64)))
		if err != nil {
			t.Fatal(err)
		}
		if entry := code[before:]; bytes.HasPrefix(entry, endbr64) {
			code = append(code[:before], entry[len(endbr64):]...)
		}
		if !bytes.Equal(code[:n], bytes.Repeat([]byte{0x90}, n)) {
			t.Fatalf("%s: the bytes at %s-%d are % x, not %d nops", path, fn.Name, before, code, n)
		}
		want = append(want, PatchSite{Addr: addr, Kind: PatchableNops, Func: fn.Name, Offset: -int64(before)})
	}
	return want
}

func TestPatchSites(t *testing.T) {
	const (
		nopie = "-no-pie -fno-pic"
		pie   = "-fPIE -pie"
	)
	tests := []struct {
		name  string
		flags string
		// section is the section the sites are recorded in, "" when
		// they must be found by looking at the code.
		section   string
		patchable []int // N, M of -fpatchable-function-entry
	}{
		{"fentry-nop", "-pg -mfentry -mnop-mcount " + nopie, "", nil},
		{"fentry-nop-recorded", "-pg -mfentry -mnop-mcount -mrecord-mcount " + nopie, mcountLocSection, nil},
		{"fentry-plt", "-pg -mfentry " + nopie, "", nil},
		{"fentry-got-pie", "-pg -mfentry " + pie, "", nil},
		{"fentry-recorded-pie", "-pg -mfentry -mrecord-mcount " + pie, mcountLocSection, nil},
		{"mcount-plt", "-pg " + nopie, "", nil},
		{"mcount-got", "-pg -no-pie", "", nil},
		{"mcount-pie", "-pg " + pie, "", nil},
		{"mcount-recorded", "-pg -mrecord-mcount " + nopie, mcountLocSection, nil},
		{"mcount-static", "-pg -static", "", nil},
		{"mcount-O2", "-O2 -pg " + nopie, "", nil},
		{"mcount-cet", "-pg -fcf-protection " + nopie, "", nil},
		{"fentry-nop-cet", "-pg -mfentry -mnop-mcount -fcf-protection " + nopie, "", nil},
		{"fentry-O2-pie", "-O2 -pg -mfentry " + pie, "", nil},
		{"patchable", "-fpatchable-function-entry=5 " + pie, patchableSection, []int{5, 0}},
		{"patchable-before", "-fpatchable-function-entry=5,2 " + pie, patchableSection, []int{5, 2}},
		{"patchable-before-nopie", "-fpatchable-function-entry=3,1 " + nopie, patchableSection, []int{3, 1}},
		// Under CET the nops go around the endbr64 at the symbol.
		{"patchable-before-cet", "-fpatchable-function-entry=5,2 -fcf-protection " + pie, patchableSection, []int{5, 2}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			path := buildProg(t, t.TempDir(), "prog", strings.Fields(tc.flags)...)
			m := openTestModule(t, path)
			for _, name := range []string{mcountLocSection, patchableSection} {
				if has := m.elf.Section(name) != nil; has != (name == tc.section) {
					t.Fatalf("section %s present: %v; test assumes otherwise", name, has)
				}
			}
			var want []PatchSite
			if tc.patchable != nil {
				want = wantPatchableSites(t, path, tc.patchable[0], tc.patchable[1])
			} else {
				want = wantProfilingSites(t, path)
			}
			if got := m.PatchSites(); !slices.Equal(got, want) {
				t.Errorf("PatchSites:\n got %+v\nwant %+v", got, want)
			}
		})
	}
}

// TestPatchSitesFromRelocations zeroes the recorded addresses in a PIE, as
// linkers may leave them, so that only the RELATIVE relocations of
// .rela.dyn tell them.
func TestPatchSitesFromRelocations(t *testing.T) {
	for _, tc := range []struct{ name, flags, section string }{
		{"mcount_loc", "-pg -mfentry -mrecord-mcount", mcountLocSection},
		{"patchable", "-fpatchable-function-entry=5,2", patchableSection},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			path := buildProg(t, dir, "prog", append(strings.Fields(tc.flags), "-fPIE", "-pie")...)
			want := openTestModule(t, path).PatchSites()
			if len(want) != len(progFuncs)+1 {
				t.Fatalf("PatchSites of the unmodified file: %+v", want)
			}

			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			f, err := elf.NewFile(bytes.NewReader(data))
			if err != nil {
				t.Fatal(err)
			}
			sec := f.Section(tc.section)
			clear(data[sec.Offset : sec.Offset+sec.Size])
			zeroed := filepath.Join(dir, "zeroed")
			if err := os.WriteFile(zeroed, data, 0o755); err != nil {
				t.Fatal(err)
			}
			if got := openTestModule(t, zeroed).PatchSites(); !slices.Equal(got, want) {
				t.Errorf("PatchSites with %s zeroed:\n got %+v\nwant %+v", tc.section, got, want)
			}
		})
	}
}

// TestPatchSitesNone: plain builds have none, and neither has libc, which
// defines mcount for others without being built with -pg.
func TestPatchSitesNone(t *testing.T) {
	prog := buildProg(t, t.TempDir(), "prog")
	libc := strings.TrimSpace(run(t, "", "gcc", "-print-file-name=libc.so.6"))
	if !filepath.IsAbs(libc) {
		t.Fatalf("gcc does not know where libc.so.6 is (%q)", libc)
	}
	paths := []string{prog, libc}
	for _, path := range paths {
		m := openTestModule(t, path)
		if got := m.PatchSites(); len(got) != 0 {
			t.Errorf("%s: PatchSites = %+v, want none", path, got[:min(len(got), 5)])
		}
	}
}

func TestPatchKindString(t *testing.T) {
	for k, want := range map[PatchKind]string{McountCall: "mcount", FentryNop: "fentry-nop", PatchableNops: "patchable", 0: "PatchKind(0)"} {
		if got := k.String(); got != want {
			t.Errorf("PatchKind(%d).String() = %q, want %q", int(k), got, want)
		}
	}
}
