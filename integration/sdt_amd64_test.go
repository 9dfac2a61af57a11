package integration

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
)

// TestSDTIndexed: a note's operand that reads an array's element,
// base + index * scale (gcc's -8@(%rdi,%rdx,8) for a[i+j]), is $argN
// like any other: every hit's three arguments are the program's
// values, launched and recorded. (An x86-64 operand: arm64's notes
// write theirs otherwise.)
func TestSDTIndexed(t *testing.T) {
	t.Parallel()
	exe := builtOnce(t, "sdt_idx", filepath.Join("testdata", "sdt", "sdtidx.c"), "-O2", "-g", sdtHeader)
	list := mustProbe(t, "list", exe, "sdt:*")
	if !strings.Contains(list.stdout, ",%") {
		t.Fatalf("probe list: no indexed operand in the note, nothing to test:\n%s", list.stdout)
	}
	const n = 40
	var want []string
	sum := 0
	for i := 0; i < n; i++ {
		a, b := i%32, i*7%32
		want = append(want, fmt.Sprintf("idx arg1=%d arg2=%d arg3=%d", 3*a+1, -b, 3*(a+b)+1))
		sum += 3*a + 1 - b
	}
	r := mustProbe(t, "run", "sdt:demo:idx", "--", exe, fmt.Sprint(n))
	if got := sdtHits(r.stdout); strings.Join(got, "\n") != strings.Join(want, "\n") || !strings.Contains(r.stdout, fmt.Sprintf("sum=%d\n", sum)) {
		t.Errorf("sdt:demo:idx:\n%s\nwant the hits\n%s\nand sum=%d", r.stdout, strings.Join(want, "\n"), sum)
	}
	rec := filepath.Join(t.TempDir(), "idx.rec")
	mustProbe(t, "record", "-o", rec, "sdt:demo:idx", "--", exe, fmt.Sprint(n))
	if got := sdtHits(mustProbe(t, "report", rec).stdout); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("recorded and reported:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
