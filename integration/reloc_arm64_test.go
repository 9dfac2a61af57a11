//go:build arm64

package integration

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
)

// TestRelocatedEntries: functions whose first instruction depends on
// where it runs (adrp, adr, the literal loads, b, bl, cbz, tbnz, b.lt
// on the caller's flags: reloc_arm64.S) record in the tracee, their
// first instruction run from the detour rebuilt with absolute values:
// the program computes what it computes untraced, and every call's
// argument is recorded, in order. b.lt also proves the stub and the
// routine leave NZCV alone.
func TestRelocatedEntries(t *testing.T) {
	t.Parallel()
	asm, _ := filepath.Abs(filepath.Join("testdata", "inprocess", "reloc_arm64.S"))
	exe := builtOnce(t, "reloc", filepath.Join("testdata", "inprocess", "reloc.c"), "-O2", asm)
	const n = 1000
	base := runCmd(t, nil, exe, fmt.Sprint(n))
	fns := []string{"f_adrp", "f_adr", "f_ldr", "f_ldrw", "f_ldrsw", "f_b", "f_bl", "f_cbz", "f_tbnz", "f_blt"}
	args := []string{"run", "-v", "-o", filepath.Join(t.TempDir(), "trace")}
	for _, f := range fns {
		args = append(args, "p:"+f+" a=%x0")
	}
	r := probe(t, append(args, "--", exe, fmt.Sprint(n))...)
	if r.code != 0 || r.stdout != base.stdout {
		t.Fatalf("probe run: want exit 0 and the untraced output %q; got %v", base.stdout, r)
	}
	for _, f := range fns {
		if want := "probe: probe/p_" + f + "_0: in-process\n"; !strings.Contains(r.stderr, want) {
			t.Errorf("no %q in\n%s", want, r.stderr)
		}
	}
	next := map[string]int{}
	for _, e := range traceEvents(readFile(t, args[3])) {
		f := strings.TrimSuffix(strings.TrimPrefix(e.name, "p_"), "_0")
		if want := fmt.Sprintf("a=0x%x", next[f]%10); strings.TrimSpace(e.rest) != want {
			t.Fatalf("%s's call %d: %q, want %q", f, next[f], e.rest, want)
		}
		next[f]++
	}
	for _, f := range fns {
		if next[f] != n {
			t.Errorf("%s: %d calls recorded, want %d", f, next[f], n)
		}
	}
}
