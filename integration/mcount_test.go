package integration

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestMcountList checks the tracing-site column of probe list on the
// mcount tracee built with each kind of compiler-made site, for the binary
// on disk and for a running process. The expected columns are worked out
// from the file's bytes and objdump's disassembly, not from probe.
func TestMcountList(t *testing.T) {
	t.Parallel()
	src, err := filepath.Abs(filepath.Join("testdata", "mcount.c"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		flags string
		// column returns the fifth column of function fn's line.
		column func(t *testing.T, exe, fn string) string
	}{
		{"fentry-nop", "-pg -mfentry -mnop-mcount -fno-pic -no-pie", fentryNopColumn},
		{"fentry-nop-recorded", "-pg -mfentry -mnop-mcount -mrecord-mcount -fno-pic -no-pie", fentryNopColumn},
		{"mcount", "-pg -no-pie", mcountColumn},
		{"patchable", "-fpatchable-function-entry=5,2 -fPIE -pie", patchableColumn(5, 2)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			exe := filepath.Join(t.TempDir(), "mcount_"+tc.name)
			args := append([]string{"-O0", "-g", "-Wall", "-o", exe, src}, strings.Fields(tc.flags)...)
			if err := build(filepath.Dir(exe), "gcc", args...); err != nil {
				t.Fatal(err)
			}
			mod := filepath.Base(exe)
			line := func(bias uint64, fn string) string {
				sym := funcSym(t, exe, fn)
				l := listEntry(bias+sym.Value, sym.Size, mod, fn)
				if fn == "_start" { // crt code: not compiled with the flags
					return l + " no-return-hook"
				}
				return l + " " + tc.column(t, exe, fn)
			}

			r := probe(t, "list", exe)
			if r.code != 0 || r.stderr != "" {
				t.Fatalf("probe list %s: want exit status 0, got\n%v", exe, r)
			}
			for _, fn := range []string{"_start", "helper", "work", "main"} {
				if want := line(0, fn); !strings.Contains("\n"+r.stdout, "\n"+want+"\n") {
					t.Errorf("probe list %s: no line %q in\n%s", exe, want, limit(r.stdout))
				}
			}
			r = probe(t, "list", exe, "wor*")
			if want := line(0, "work") + "\n"; r.code != 0 || r.stdout != want || r.stderr != "" {
				t.Errorf("probe list %s 'wor*': want exit status 0 and stdout %q, got\n%v", exe, want, r)
			}

			p := startBg(t, nil, exe)
			p.waitStdout(t, "ready", 10*time.Second)
			pid := strconv.Itoa(p.pid())
			r = probe(t, "list", pid, "work")
			if want := line(loadBias(t, p.pid(), exe), "work") + "\n"; r.code != 0 || r.stdout != want || r.stderr != "" {
				t.Errorf("probe list %s work: want exit status 0 and stdout %q, got\n%v", pid, want, r)
			}
		})
	}
}

// fileBytes returns n bytes of the ELF file path at link address vaddr.
func fileBytes(t *testing.T, path string, vaddr uint64, n int) []byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := make([]byte, n)
	if _, err := f.ReadAt(b, int64(fileOffset(t, path, vaddr))); err != nil {
		t.Fatalf("%s: read %d bytes at %#x: %v", path, n, vaddr, err)
	}
	return b
}

// fentryNopColumn: -mnop-mcount puts nopl 0x0(%rax,%rax,1) first thing,
// after an endbr64 under -fcf-protection.
func fentryNopColumn(t *testing.T, exe, fn string) string {
	t.Helper()
	code := fileBytes(t, exe, funcSym(t, exe, fn).Value, 9)
	off := 0
	if bytes.HasPrefix(code, []byte{0xf3, 0x0f, 0x1e, 0xfa}) {
		off = 4
	}
	if nop := []byte{0x0f, 0x1f, 0x44, 0x00, 0x00}; !bytes.Equal(code[off:off+5], nop) {
		t.Fatalf("%s: %s starts with % x, not the fentry nop % x", exe, fn, code, nop)
	}
	return fmt.Sprintf("fentry-nop@+0x%x", off)
}

// patchableColumn: -fpatchable-function-entry=n,before puts n one-byte
// nops at the entry, before of them ahead of the symbol.
func patchableColumn(n, before int) func(t *testing.T, exe, fn string) string {
	return func(t *testing.T, exe, fn string) string {
		t.Helper()
		code := fileBytes(t, exe, funcSym(t, exe, fn).Value-uint64(before), n)
		if !bytes.Equal(code, bytes.Repeat([]byte{0x90}, n)) {
			t.Fatalf("%s: the %d bytes at %s-%d are % x, not nops", exe, n, fn, before, code)
		}
		if before > 0 {
			return fmt.Sprintf("patchable@-0x%x", before)
		}
		return "patchable@+0x0"
	}
}

// objdumpMcountRE matches objdump's line for a call of mcount, direct
// ("call 401060 <mcount@plt>") or through the GOT
// ("call *0x2e2c(%rip)  # 403fe0 <mcount@GLIBC_2.2.5>").
var objdumpMcountRE = regexp.MustCompile(`^\s*([0-9a-f]+):\s.*\bcall\b.*<_?mcount[@>]`)

// mcountColumn: -pg calls mcount after the frame set-up; objdump says
// where.
func mcountColumn(t *testing.T, exe, fn string) string {
	t.Helper()
	sym := funcSym(t, exe, fn)
	out, err := exec.Command("objdump", "-d", "--disassemble="+fn, exe).Output()
	if err != nil {
		t.Fatalf("objdump %s: %v", exe, err)
	}
	for _, l := range strings.Split(string(out), "\n") {
		if m := objdumpMcountRE.FindStringSubmatch(l); m != nil {
			addr, _ := strconv.ParseUint(m[1], 16, 64)
			return fmt.Sprintf("mcount@+0x%x", addr-sym.Value)
		}
	}
	t.Fatalf("objdump %s: no call of mcount in %s:\n%s", exe, fn, out)
	return ""
}
