//go:build amd64

package symbols

import (
	"bufio"
	"debug/dwarf"
	"debug/elf"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/probedbg/probe/tracee"
	"golang.org/x/sys/unix"
)

// dwarfTestC is the C tracee. Lines are referred to by the markers in
// their comments (see lineOf), never by number.
const dwarfTestC = `#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct req {
	const char *method;
	int len;
	char tag[4];
};

enum mode { IDLE, BUSY = 5 };

int counter = 5;
int arr[4] = {10, 20, 30, 40};
enum mode gmode = BUSY;

__attribute__((noinline)) int handle(struct req *r, int n)
{
	int total = 0;
	char *buf = malloc(16);
	strcpy(buf, r->method);
	/* a comment: no code here */
	for (int i = 0; i < n; i++) {
		total += r->len + arr[i % 4]; /* LOOP */
	}
	counter += total; /* AFTER */
	free(buf);
	return total;
}

__attribute__((noinline)) int work(int x)
{
	int y = x * 2;
	return y + counter;
}

__attribute__((noinline)) int moded(enum mode m, int k)
{
	return (int)m * k + counter; /* MODED */
}

__attribute__((noinline)) int one(int a, int b) { return a * b + 1; } /* ONE */

__attribute__((always_inline)) static inline int twice(int v)
{
	int w = v + v; /* TWICE */
	return w;
}

int main(int argc, char **argv)
{
	struct req r = { "GET", 42, "abc" };
	int s = 0;
	for (int i = 0; i < 2; i++)
		s += handle(&r, 3 + argc) + work(i) + moded(BUSY, argc) + one(argc, 3) + twice(argc);
	printf("%d\n", s);
	return 0;
}
`

// dwarfTestGo is the Go tracee.
const dwarfTestGo = `package main

import (
	"fmt"
	"os"
)

type Point struct {
	X, Y int
	Name string
}

var counter = 11

// xs is passed on the stack (the integer registers run out); its cap is
// used so that the compiler's DWARF describes all of it.
//
//go:noinline
func work(n int, s string, p Point, pp *Point, xs []int) int {
	return n + len(s) + p.X + p.Y + len(p.Name) + pp.X + xs[1] + cap(xs) + counter
}

func main() {
	total := 0
	q := &Point{5, 6, "pp"}
	for i := 0; i < 2; i++ {
		total += work(7+i, "hello", Point{3, 4, "pt"}, q, []int{1, 2, 3})
	}
	fmt.Println(total)
	os.Exit(0)
}
`

// lineOf returns the 1-based line of src containing marker.
func dwarfLineOf(t *testing.T, src, marker string) int {
	t.Helper()
	for i, l := range strings.Split(src, "\n") {
		if strings.Contains(l, marker) {
			return i + 1
		}
	}
	t.Fatalf("no line with %q", marker)
	return 0
}

// buildDwarfC compiles dwarfTestC as dir/fn.c with the given -O level
// (PIE, as Debian's gcc makes by default).
func buildDwarfC(t *testing.T, opt string) string {
	t.Helper()
	needTools(t, "gcc")
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "fn.c"), []byte(dwarfTestC), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "fn"+opt)
	run(t, dir, "gcc", opt, "-g", "-fPIE", "-pie", "-o", out, "fn.c")
	return out
}

func buildDwarfGo(t *testing.T) string {
	t.Helper()
	goTool := filepath.Join(runtime.GOROOT(), "bin", "go")
	dir := t.TempDir()
	for name, text := range map[string]string{
		"main.go": dwarfTestGo,
		"go.mod":  "module gotracee\n\ngo 1.21\n",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	out := filepath.Join(dir, "gotracee")
	cmd := exec.Command(goTool, "build", "-o", out, ".")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, b)
	}
	return out
}

func dwarfBinary(t *testing.T, path string) (*Space, *DebugInfo) {
	t.Helper()
	s, err := LoadBinary(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	d, err := s.Main().Debug()
	if err != nil {
		t.Fatal(err)
	}
	return s, d
}

// dwarfLineRow is one row of the line table, read with the standard library
// (independent of delve).
type dwarfLineRow struct {
	addr uint64
	line int
	stmt bool
	file string
}

func dwarfLineTable(t *testing.T, path string) []dwarfLineRow {
	t.Helper()
	f, err := elf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	dw, err := f.DWARF()
	if err != nil {
		t.Fatal(err)
	}
	var rows []dwarfLineRow
	r := dw.Reader()
	for {
		cu, err := r.Next()
		if err != nil {
			t.Fatal(err)
		}
		if cu == nil {
			break
		}
		if cu.Tag != dwarf.TagCompileUnit {
			r.SkipChildren()
			continue
		}
		lr, err := dw.LineReader(cu)
		if err != nil {
			t.Fatal(err)
		}
		r.SkipChildren()
		if lr == nil {
			continue
		}
		var e dwarf.LineEntry
		for lr.Next(&e) == nil {
			if e.EndSequence {
				continue
			}
			rows = append(rows, dwarfLineRow{e.Address, e.Line, e.IsStmt, e.File.Name})
		}
	}
	return rows
}

// funcRanges maps each DWARF subprogram with code to its [low, high).
func dwarfFuncRanges(t *testing.T, path string) map[string][2]uint64 {
	t.Helper()
	f, err := elf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	dw, err := f.DWARF()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][2]uint64{}
	r := dw.Reader()
	for {
		e, err := r.Next()
		if err != nil {
			t.Fatal(err)
		}
		if e == nil {
			break
		}
		if e.Tag != dwarf.TagSubprogram {
			continue
		}
		name, _ := e.Val(dwarf.AttrName).(string)
		rs, _ := dw.Ranges(e)
		if name != "" && len(rs) > 0 {
			out[name] = rs[0]
		}
	}
	return out
}

func dwarfFuncOf(fr map[string][2]uint64, addr uint64) string {
	for name, r := range fr {
		if addr >= r[0] && addr < r[1] {
			return name
		}
	}
	return ""
}

func TestDwarfLineAddrs(t *testing.T) {
	for _, opt := range []string{"-O0", "-O2"} {
		t.Run(opt, func(t *testing.T) {
			path := buildDwarfC(t, opt)
			_, d := dwarfBinary(t, path)
			rows := dwarfLineTable(t, path)
			fr := dwarfFuncRanges(t, path)

			for _, marker := range []string{"LOOP", "AFTER", "int y = x * 2;"} {
				line := dwarfLineOf(t, dwarfTestC, marker)
				got, err := d.LineAddrs("fn.c", line)
				if err != nil {
					t.Fatalf("LineAddrs(fn.c, %d): %v", line, err)
				}
				// Every function with an is_stmt row on the line gets one
				// address, the lowest is_stmt row of the line in it.
				want := map[string]uint64{}
				for _, r := range rows {
					if r.line == line && r.stmt && filepath.Base(r.file) == "fn.c" {
						fn := dwarfFuncOf(fr, r.addr)
						if a, ok := want[fn]; !ok || r.addr < a {
							want[fn] = r.addr
						}
					}
				}
				if len(want) == 0 {
					t.Fatalf("line %d: the line table has no is_stmt row", line)
				}
				var wantAddrs []uint64
				for _, a := range want {
					wantAddrs = append(wantAddrs, a)
				}
				slices.Sort(wantAddrs)
				if !slices.Equal(got, wantAddrs) {
					t.Errorf("LineAddrs(fn.c, %d) = %#x, want %#x (line table)", line, got, wantAddrs)
				}
				// Suffix and full-path forms name the same file.
				full, err := d.LineAddrs(filepath.Join(filepath.Dir(path), "fn.c"), line)
				if err != nil || !slices.Equal(full, got) {
					t.Errorf("LineAddrs(full path, %d) = %#x, %v; want %#x", line, full, err, got)
				}
			}

			// A comment line has no code: the error names the nearest lines
			// that do, as the line table says.
			line := dwarfLineOf(t, dwarfTestC, "a comment: no code here")
			_, err := d.LineAddrs("fn.c", line)
			if err == nil {
				t.Fatalf("LineAddrs on a comment line: no error")
			}
			below, above := 0, 0
			for _, r := range rows {
				if !r.stmt {
					continue
				}
				if r.line < line && r.line > below {
					below = r.line
				}
				if r.line > line && (above == 0 || r.line < above) {
					above = r.line
				}
			}
			wantMsg := fmt.Sprintf("no code at fn.c:%d (nearest lines with code: %d, %d)", line, below, above)
			if err.Error() != wantMsg {
				t.Errorf("error = %q, want %q", err, wantMsg)
			}
			if _, err := d.LineAddrs("nope.c", 3); err == nil || !strings.Contains(err.Error(), "nope.c") {
				t.Errorf("unknown file: err = %v", err)
			}

			// A function that exists only inlined: FUNC:RLINE counts from
			// its declaration and finds the line in the inlined copy.
			twiceLine := dwarfLineOf(t, dwarfTestC, "TWICE")
			twiceDecl := dwarfLineOf(t, dwarfTestC, "static inline int twice(int v)")
			inl, err := d.FuncLineAddrs("twice", twiceLine-twiceDecl)
			if err != nil {
				t.Fatal(err)
			}
			lineAddrs, err := d.LineAddrs("fn.c", twiceLine)
			if err != nil || len(inl) == 0 || !slices.Equal(inl, lineAddrs) {
				t.Errorf("FuncLineAddrs(twice, %d) = %#x; LineAddrs(fn.c, %d) = %#x, %v", twiceLine-twiceDecl, inl, twiceLine, lineAddrs, err)
			}
			for _, a := range inl {
				if name, _, _ := d.FuncAt(a); name != "main" {
					t.Errorf("inlined twice at %#x is in %q, want main", a, name)
				}
			}
		})
	}
}

func TestDwarfFuncLineAddrs(t *testing.T) {
	path := buildDwarfC(t, "-O0")
	s, d := dwarfBinary(t, path)
	decl := dwarfLineOf(t, dwarfTestC, "int handle(struct req *r, int n)")
	loop := dwarfLineOf(t, dwarfTestC, "LOOP")
	got, err := d.FuncLineAddrs("handle", loop-decl)
	if err != nil {
		t.Fatal(err)
	}
	want, err := d.LineAddrs("fn.c", loop)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, want) {
		t.Errorf("FuncLineAddrs(handle, %d) = %#x, want %#x", loop-decl, got, want)
	}
	sym, ok := s.Main().Lookup("handle")
	if !ok {
		t.Fatal("no symbol handle")
	}
	got, err = d.FuncLineAddrs("handle", 0)
	if err != nil || !slices.Equal(got, []uint64{sym.Addr}) {
		t.Errorf("FuncLineAddrs(handle, 0) = %#x, %v; want [%#x]", got, err, sym.Addr)
	}
	comment := dwarfLineOf(t, dwarfTestC, "a comment: no code here")
	_, err = d.FuncLineAddrs("handle", comment-decl)
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("no code at fn.c:%d", comment)) {
		t.Errorf("FuncLineAddrs on a comment: err = %v", err)
	}
	// Lines of another function are not lines of handle.
	workLine := dwarfLineOf(t, dwarfTestC, "int y = x * 2;")
	if got, err := d.FuncLineAddrs("handle", workLine-decl); err == nil {
		t.Errorf("FuncLineAddrs(handle, %d) = %#x, want an error (that line is in work)", workLine-decl, got)
	}
	if _, err := d.FuncLineAddrs("nosuch", 1); err == nil {
		t.Error("FuncLineAddrs(nosuch): no error")
	}
}

// objdumpFunc returns the instructions of fn as (address, text) pairs.
func dwarfObjdump(t *testing.T, path, fn string) []struct {
	addr uint64
	text string
} {
	t.Helper()
	needTools(t, "objdump")
	out := run(t, "", "objdump", "-d", "--no-show-raw-insn", "--disassemble="+fn, path)
	var insns []struct {
		addr uint64
		text string
	}
	re := regexp.MustCompile(`^\s*([0-9a-f]+):\s+(.*)$`)
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		m := re.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		a, _ := strconv.ParseUint(m[1], 16, 64)
		insns = append(insns, struct {
			addr uint64
			text string
		}{a, strings.Join(strings.Fields(m[2]), " ")})
	}
	if len(insns) == 0 {
		t.Fatalf("objdump found no %s in %s", fn, path)
	}
	return insns
}

func TestDwarfAfterPrologue(t *testing.T) {
	path := buildDwarfC(t, "-O0")
	s, d := dwarfBinary(t, path)
	// The -O0 prologue: endbr64, push %rbp, mov %rsp,%rbp, sub $N,%rsp,
	// and the stores of argument registers into the frame.
	prologue := regexp.MustCompile(`^(endbr64|push %rbp|mov %rsp,%rbp|sub \$0x[0-9a-f]+,%rsp|mov %(r[sd]i|e[sd]i|r[0-9]+d?|[re][cd]x),-0x[0-9a-f]+\(%rbp\))$`)
	for _, fn := range []string{"work", "handle", "one"} {
		insns := dwarfObjdump(t, path, fn)
		want := uint64(0)
		for _, in := range insns {
			if !prologue.MatchString(in.text) {
				want = in.addr
				break
			}
		}
		sym, _ := s.Main().Lookup(fn)
		got, err := d.AfterPrologue(sym.Addr)
		if err != nil {
			t.Fatal(err)
		}
		if got != want || got == sym.Addr {
			t.Errorf("AfterPrologue(%s) = %#x, want %#x (first instruction after the prologue; entry %#x)", fn, got, want, sym.Addr)
		}
		if name, entry, ok := d.FuncAt(got); !ok || name != fn || entry != sym.Addr {
			t.Errorf("FuncAt(%#x) = %q, %#x, %v", got, name, entry, ok)
		}
		if fn == "one" {
			// A probe on the line of a one-line function goes after the
			// prologue, as gdb puts a breakpoint there.
			addrs, err := d.LineAddrs("fn.c", dwarfLineOf(t, dwarfTestC, "ONE"))
			if err != nil || !slices.Equal(addrs, []uint64{want}) {
				t.Errorf("LineAddrs(ONE) = %#x, %v; want [%#x]", addrs, err, want)
			}
		}
	}
	if _, _, ok := d.FuncAt(1); ok {
		t.Error("FuncAt(1) found a function")
	}
	params, err := d.Params(s.Main().Bias + mustLookup(t, s.Main().Module, "handle").Addr)
	if err != nil || !slices.Equal(params, []string{"r", "n"}) {
		t.Errorf("Params(handle) = %q, %v", params, err)
	}
}

// dwarfStopper runs a tracee under ptrace and stops it at addresses.
type dwarfStopper struct {
	t *testing.T
	p *tracee.Process
}

func dwarfLaunch(t *testing.T, argv ...string) *dwarfStopper {
	t.Helper()
	runtime.LockOSThread() // for the rest of this test's goroutine
	devnull, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { devnull.Close() })
	p, err := tracee.Launch(argv, []string{"GOMAXPROCS=1", "GODEBUG=asyncpreemptoff=1"}, []*os.File{devnull, devnull, os.Stderr})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		unix.Kill(p.Pid, unix.SIGKILL)
		for p.Alive() {
			if _, err := p.Wait(); err != nil {
				break
			}
		}
		p.Close()
	})
	if err := p.RunToEntry(); err != nil {
		t.Fatal(err)
	}
	return &dwarfStopper{t, p}
}

// runTo puts an int3 at addr, runs the process until a thread hits it,
// restores the byte and returns the thread's registers with rip = addr.
func (s *dwarfStopper) runTo(addr uint64) (int, unix.PtraceRegs) {
	t := s.t
	t.Helper()
	var orig [1]byte
	if _, err := s.p.ReadAt(orig[:], int64(addr)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.p.WriteAt([]byte{0xcc}, int64(addr)); err != nil {
		t.Fatal(err)
	}
	defer s.p.WriteAt(orig[:], int64(addr))
	for _, th := range s.p.Threads() {
		if th.Stopped {
			if err := s.p.Cont(th.Tid, 0); err != nil {
				t.Fatal(err)
			}
		}
	}
	for {
		ev, err := s.p.Wait()
		if err != nil {
			t.Fatal(err)
		}
		switch ev.Kind {
		case tracee.EventExit:
			if ev.Tid == s.p.Pid {
				t.Fatalf("tracee exited before reaching %#x", addr)
			}
			continue
		case tracee.EventTrap:
			var regs unix.PtraceRegs
			if err := s.p.GetRegs(ev.Tid, &regs); err != nil {
				t.Fatal(err)
			}
			if regs.Rip == addr+1 {
				regs.Rip = addr
				if err := s.p.SetRegs(ev.Tid, &regs); err != nil {
					t.Fatal(err)
				}
				return ev.Tid, regs
			}
			s.p.Cont(ev.Tid, int(unix.SIGTRAP))
		case tracee.EventSignal:
			s.p.Cont(ev.Tid, ev.Sig)
		case tracee.EventGroupStop:
			s.p.Listen(ev.Tid)
		default:
			s.p.Cont(ev.Tid, 0)
		}
	}
}

func dwarfMainDebug(t *testing.T, pid int) (*Space, *DebugInfo) {
	t.Helper()
	sp, err := LoadProcess(pid)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sp.Close() })
	d, err := sp.Main().Debug()
	if err != nil {
		t.Fatal(err)
	}
	return sp, d
}

// readVar compiles and reads expr at pc.
func dwarfRead(t *testing.T, d *DebugInfo, pc uint64, expr string, regs *unix.PtraceRegs, p *tracee.Process) (uint64, string, string) {
	t.Helper()
	v, err := d.Var(pc, expr)
	if err != nil {
		t.Fatalf("Var(%#x, %q): %v", pc, expr, err)
	}
	raw, text, err := v.Read(regs, p)
	if err != nil {
		t.Fatalf("Read(%q): %v", expr, err)
	}
	return raw, text, v.Type()
}

func TestDwarfVarsLiveC(t *testing.T) {
	for _, opt := range []string{"-O0", "-O2"} {
		t.Run(opt, func(t *testing.T) {
			path := buildDwarfC(t, opt)
			st := dwarfLaunch(t, path)
			sp, d := dwarfMainDebug(t, st.p.Pid)
			main := sp.Main()
			if !main.PIE || main.Bias == 0 {
				t.Fatalf("test program not placed with a bias (PIE %v, bias %#x)", main.PIE, main.Bias)
			}
			entry := mustLookup(t, sp.Main().Module, "handle").Addr + main.Bias
			after, err := d.AfterPrologue(entry)
			if err != nil {
				t.Fatal(err)
			}

			// At the entry, the ABI registers hold the arguments; at -O2 the
			// location lists say so too.
			_, regs := st.runTo(entry)
			rdi, esi := regs.Rdi, uint32(regs.Rsi)
			if esi != 4 {
				t.Fatalf("handle called with n=%d in esi, want 4", esi)
			}
			if opt == "-O2" {
				if _, text, _ := dwarfRead(t, d, entry, "n", &regs, st.p); text != "4" {
					t.Errorf("at entry: n = %s, want 4", text)
				}
				if _, text, _ := dwarfRead(t, d, entry, "r->method", &regs, st.p); text != `"GET"` {
					t.Errorf("at entry: r->method = %s, want \"GET\"", text)
				}
			}

			if after != entry {
				_, regs = st.runTo(after)
			}
			for _, c := range []struct {
				expr, text, typ string
				raw             uint64
			}{
				{"n", "4", "int", 4},
				{"r->len", "42", "int", 42},
				{"r.len", "42", "int", 42},
				{"(*r).len", "42", "int", 42},
				{"r->method", `"GET"`, "const char *", 0},
				{"*r->method", "'G'", "const char", 'G'},
				{"r->method[2]", "'T'", "const char", 'T'},
				{"r->tag", `"abc"`, "char [4]", 0},
				{"r->tag[1]", "'b'", "char", 'b'},
				{"*r", fmt.Sprintf(`{method="GET",len=42,tag="abc"}`), "struct req", 0},
				{"r", fmt.Sprintf("0x%x", rdi), "struct req *", rdi},
				{"arr[1]", "20", "int", 20},
				{"arr", "{10,20,30,40}", "int [4]", 0},
				{"counter", "", "int", 0},
				{"gmode", "BUSY", "enum mode", 5},
			} {
				raw, text, typ := dwarfRead(t, d, after, c.expr, &regs, st.p)
				if c.text != "" && text != c.text {
					t.Errorf("%s = %s, want %s", c.expr, text, c.text)
				}
				if typ != c.typ {
					t.Errorf("type of %s = %q, want %q", c.expr, typ, c.typ)
				}
				if c.raw != 0 && raw != c.raw {
					t.Errorf("raw %s = %#x, want %#x", c.expr, raw, c.raw)
				}
				if c.expr == "r->method" {
					// raw of a char * is the pointer: the string is there.
					b := make([]byte, 4)
					if _, err := st.p.ReadAt(b, int64(raw)); err != nil || string(b) != "GET\x00" {
						t.Errorf("raw r->method = %#x points at %q, %v", raw, b, err)
					}
				}
			}

			// Reading is cheap enough for a probe hit.
			v, err := d.Var(after, "r->method")
			if err != nil {
				t.Fatal(err)
			}
			const reads = 200
			start := time.Now()
			for range reads {
				if _, _, err := v.Read(&regs, st.p); err != nil {
					t.Fatal(err)
				}
			}
			t.Logf("Read(r->method): %v each", time.Since(start)/reads)

			// Not in scope: the error lists what is. Locals of handle are in
			// scope in the whole function, as perf probe sees them; i lives
			// in the loop's block only.
			_, err = d.Var(after, "cnt")
			wantErr := fmt.Sprintf(`no variable "cnt" at fn.c:%d (in scope: r, n, total, buf)`, dwarfLineOf(t, dwarfTestC, "int total = 0;"))
			if opt == "-O2" {
				wantErr = `no variable "cnt" at fn.c:` // -O2 places the prologue on another line
			}
			if err == nil || !strings.HasPrefix(err.Error(), wantErr) || !strings.HasSuffix(err.Error(), "(in scope: r, n, total, buf)") {
				t.Errorf("Var(cnt): %v, want %q", err, wantErr)
			}
			for _, bad := range []string{"r->nope", "n->x", "arr[9]", "*n", "r + 1"} {
				if _, err := d.Var(after, bad); err == nil {
					t.Errorf("Var(%q): no error", bad)
				}
			}
			if _, err := d.Var(after, "r->nope"); err == nil || !strings.Contains(err.Error(), "members: method, len, tag") {
				t.Errorf("Var(r->nope): %v", err)
			}

			// A local with a value, after the loop: total = 4*42 + 10+20+30+40.
			afterLoop, err := d.LineAddrs("fn.c", dwarfLineOf(t, dwarfTestC, "AFTER"))
			if err != nil {
				t.Fatal(err)
			}
			_, regs = st.runTo(afterLoop[0])
			// At -O2 gcc 12 ends total's location list right there (its value
			// is still in a register but the DWARF no longer says so).
			if _, text, _ := dwarfRead(t, d, afterLoop[0], "total", &regs, st.p); text != "268" && (opt == "-O0" || text != "<optimized out>") {
				t.Errorf("total after the loop = %s, want 268", text)
			}

			// An enum parameter.
			moded, err := d.FuncLineAddrs("moded", 2)
			if err != nil {
				t.Fatal(err)
			}
			_, regs = st.runTo(moded[0])
			if raw, text, typ := dwarfRead(t, d, moded[0], "m", &regs, st.p); text != "BUSY" || raw != 5 || typ != "enum mode" {
				t.Errorf("m = %s (raw %d, %s), want BUSY (5, enum mode)", text, raw, typ)
			}

			// A one-line function, probed by its line.
			oneAddrs, err := d.LineAddrs("fn.c", dwarfLineOf(t, dwarfTestC, "ONE"))
			if err != nil {
				t.Fatal(err)
			}
			_, regs = st.runTo(oneAddrs[0])
			if _, text, _ := dwarfRead(t, d, oneAddrs[0], "a", &regs, st.p); text != "1" {
				t.Errorf("one: a = %s, want 1", text)
			}
			if _, text, _ := dwarfRead(t, d, oneAddrs[0], "b", &regs, st.p); text != "3" {
				t.Errorf("one: b = %s, want 3", text)
			}

			// A fault is a value, not an error.
			v, err = d.Var(after, "r->len")
			if err != nil {
				t.Fatal(err)
			}
			bad := regs
			bad.Rdi, bad.Rbx, bad.Rbp, bad.Rsp = 8, 8, 8, 8
			if _, text, err := v.Read(&bad, st.p); err != nil || text != "(fault)" {
				t.Errorf("r->len with a wild r: %q, %v; want (fault)", text, err)
			}

			// Parameters, also of -O2 code (where gcc may describe them
			// through an abstract origin).
			if params, err := d.Params(after); err != nil || !slices.Equal(params, []string{"r", "n"}) {
				t.Errorf("Params(handle) = %q, %v", params, err)
			}

			// Shared libraries are placed at their bias: where a library has
			// DWARF here (libc6-dbg installed), its functions are found at
			// their runtime addresses.
			for _, m := range sp.Mapped[1:] {
				ld, err := m.Debug()
				if errors.Is(err, ErrNoDebugInfo) {
					continue
				}
				if err != nil {
					t.Errorf("%s: Debug() = %v", m.Name, err)
					continue
				}
				sym, ok := m.Lookup("malloc")
				if !ok {
					continue
				}
				if _, e, ok := ld.FuncAt(sym.Addr + m.Bias + 1); !ok || e != sym.Addr+m.Bias {
					t.Errorf("%s: FuncAt(malloc+1) entry %#x %v, want %#x", m.Name, e, ok, sym.Addr+m.Bias)
				}
			}
		})
	}
}

func TestDwarfNoDebugInfo(t *testing.T) {
	needTools(t, "gcc")
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "fn.c"), []byte(dwarfTestC), 0o644); err != nil {
		t.Fatal(err)
	}
	run(t, dir, "gcc", "-O2", "-o", "nodebug", "fn.c")
	s, err := LoadBinary(filepath.Join(dir, "nodebug"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for range 2 { // and again, from the cache
		if _, err := s.Main().Debug(); !errors.Is(err, ErrNoDebugInfo) {
			t.Fatalf("Debug() = %v, want ErrNoDebugInfo", err)
		}
	}
	if _, ok := s.Main().Lookup("handle"); !ok {
		t.Error("ELF symbols must still work")
	}
}

// A live process whose libraries have no DWARF (no debug files in the
// debug directories): Debug() says so, and the main program still has it.
func TestDwarfNoDebugInfoLive(t *testing.T) {
	path := buildDwarfC(t, "-O0")
	setDebugDirs(t, t.TempDir())
	st := dwarfLaunch(t, path)
	sp, _ := dwarfMainDebug(t, st.p.Pid)
	seen := 0
	for _, m := range sp.Mapped[1:] {
		if fileHasDWARF(m.Path) {
			continue
		}
		seen++
		if _, err := m.Debug(); !errors.Is(err, ErrNoDebugInfo) {
			t.Errorf("%s: Debug() = %v, want ErrNoDebugInfo", m.Name, err)
		}
	}
	if seen == 0 {
		t.Fatal("no library without DWARF in the process")
	}
}

func TestDwarfVarsLiveGo(t *testing.T) {
	path := buildDwarfGo(t)
	st := dwarfLaunch(t, path)
	sp, d := dwarfMainDebug(t, st.p.Pid)
	sym, ok := sp.Main().Lookup("main.work")
	if !ok {
		t.Fatal("no main.work")
	}
	entry := sym.Addr + sp.Main().Bias
	name, e, ok := d.FuncAt(entry + 1)
	if !ok || name != "main.work" || e != entry {
		t.Errorf("FuncAt = %q %#x %v", name, e, ok)
	}
	params, err := d.Params(entry)
	if err != nil || !slices.Equal(params, []string{"n", "s", "p", "pp", "xs"}) {
		t.Errorf("Params(main.work) = %q, %v", params, err)
	}
	after, err := d.AfterPrologue(entry)
	if err != nil {
		t.Fatal(err)
	}
	if after == entry {
		t.Errorf("AfterPrologue(main.work) = entry; Go functions check the stack first")
	}
	for _, pc := range []uint64{entry, after} {
		_, regs := st.runTo(pc)
		if regs.Rax != 7 {
			t.Fatalf("work called with rax=%d, want 7", regs.Rax)
		}
		for _, c := range []struct{ expr, text, typ string }{
			{"n", "7", "int"},
			{"s", `"hello"`, "string"},
			{"p.X", "3", "int"},
			{"p.Name", `"pt"`, "string"},
			{"p", `{X=3,Y=4,Name="pt"}`, "main.Point"},
			{"pp.Y", "6", "int"},
			{"pp->Name", `"pp"`, "string"},
			{"*pp", `{X=5,Y=6,Name="pp"}`, "main.Point"},
			{"xs", "{1,2,3}", "[]int"},
			{"xs[2]", "3", "int"},
			{"counter", "11", "int"},
		} {
			_, text, typ := dwarfRead(t, d, pc, c.expr, &regs, st.p)
			if text != c.text || typ != c.typ {
				t.Errorf("at %#x: %s = %s (%s), want %s (%s)", pc, c.expr, text, typ, c.text, c.typ)
			}
		}
	}
	line := dwarfLineOf(t, dwarfTestGo, "return n + len(s)")
	if addrs, err := d.LineAddrs("main.go", line); err != nil || len(addrs) != 1 {
		t.Errorf("LineAddrs(main.go, %d) = %#x, %v", line, addrs, err)
	}
}
