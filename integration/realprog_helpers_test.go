package integration

import (
	"debug/elf"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"
)

// Helpers for the tests of programs from Debian's packages
// (realprog_test.go): they are fed their input in phases through a pipe,
// so that a test knows what a program did while probe was attached.

// debianProgram returns the resolved path of /usr/bin/name. A missing
// program fails the test: CI (.ci/run) installs them.
func debianProgram(t *testing.T, name, pkg string) string {
	t.Helper()
	p, err := filepath.EvalSymlinks("/usr/bin/" + name)
	if err != nil {
		t.Fatalf("%s is needed (apt-get install %s): %v", name, pkg, err)
	}
	return p
}

// libraryOf returns the resolved path of the library soname that exe
// loads, as ldd finds it.
func libraryOf(t *testing.T, exe, soname string) string {
	t.Helper()
	out, err := exec.Command("ldd", exe).Output()
	if err != nil {
		t.Fatalf("ldd %s: %v", exe, err)
	}
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) >= 3 && f[0] == soname && f[1] == "=>" {
			p, err := filepath.EvalSymlinks(f[2])
			if err != nil {
				t.Fatal(err)
			}
			return p
		}
	}
	t.Fatalf("ldd %s: no %s in\n%s", exe, soname, out)
	return ""
}

// feed writes data to the process's stdin; it returns once the pipe took
// all of it.
func (f *piped) feed(t *testing.T, data []byte) {
	t.Helper()
	if _, err := f.in.Write(data); err != nil {
		t.Fatalf("write to the stdin of %s: %v\n%v", f.desc, err, f.res)
	}
}

// waitIdle waits until the process has read everything written to its
// stdin and its main thread sits in read(0, ...) waiting for more: all
// the work that input asked for is done.
func (f *piped) waitIdle(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(cmdTimeout)
	for {
		if f.exited() {
			t.Fatalf("%s exited while the test was feeding it:\n%v", f.desc, f.res)
		}
		if pipeEmpty(t, f.in) && idleThreads(f.pid()) {
			// Twice, a little apart: a worker woken in between is seen.
			time.Sleep(20 * time.Millisecond)
			if pipeEmpty(t, f.in) && idleThreads(f.pid()) {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not come back to read its stdin within %v (pipe empty: %v):\n%s",
				f.desc, cmdTimeout, pipeEmpty(t, f.in), syscallsReport(f.pid()))
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// pipeEmpty reports whether no byte written to w waits to be read.
func pipeEmpty(t *testing.T, w *os.File) bool {
	t.Helper()
	var n int32
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, w.Fd(), syscall.TIOCINQ, uintptr(unsafe.Pointer(&n))); e != 0 {
		t.Fatalf("FIONREAD: %v", e)
	}
	return n == 0
}

// idleThreads reports whether the main thread of pid waits for input,
// in read(0, ...) or in poll (xz makes its stdin non-blocking and polls
// it), and every other thread is blocked in a system call too (a worker
// waiting for work), from /proc/PID/task/TID/syscall: x86-64's read is
// 0 ("0 0x0 ..." for fd 0), poll is 7, and a poll that a ptrace stop
// interrupted goes on as restart_syscall, 219; "running" is a thread not
// in a system call.
func idleThreads(pid int) bool {
	tids, err := taskIDs(pid)
	if err != nil {
		return false
	}
	for _, tid := range tids {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/syscall", pid, tid))
		if err != nil {
			return false
		}
		s := string(b)
		waiting := strings.HasPrefix(s, "0 0x0 ") || strings.HasPrefix(s, "7 ") || strings.HasPrefix(s, "219 ")
		if tid == pid && !waiting || strings.HasPrefix(s, "running") {
			return false
		}
	}
	return true
}

// syscallsReport says what each thread of pid is doing.
func syscallsReport(pid int) string {
	var b strings.Builder
	tids, _ := taskIDs(pid)
	for _, tid := range tids {
		sc, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/syscall", pid, tid))
		st, _ := taskState(pid, tid)
		tp, _ := tracerPid(pid, tid)
		fmt.Fprintf(&b, "  tid %d: state %c, tracer %d, syscall %s", tid, st, tp, sc)
	}
	return b.String()
}

// codeByte reads the first byte of function fn of the ELF file path in
// the memory of pid.
func codeByte(t *testing.T, pid int, path, fn string) byte {
	t.Helper()
	addr := loadBias(t, pid, path) + funcSym(t, path, fn).Value
	mem, err := os.Open(fmt.Sprintf("/proc/%d/mem", pid))
	if err != nil {
		t.Fatal(err)
	}
	defer mem.Close()
	b := make([]byte, 1)
	if _, err := mem.ReadAt(b, int64(addr)); err != nil {
		t.Fatalf("read %s in pid %d: %v", fn, pid, err)
	}
	return b[0]
}

// fileByte is the first byte of function fn in the ELF file path.
func fileByte(t *testing.T, path, fn string) byte {
	t.Helper()
	f, err := elf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sym := funcSym(t, path, fn)
	for _, p := range f.Progs {
		if p.Type == elf.PT_LOAD && p.Vaddr <= sym.Value && sym.Value < p.Vaddr+p.Filesz {
			b := make([]byte, 1)
			if _, err := p.ReadAt(b, int64(sym.Value-p.Vaddr)); err != nil {
				t.Fatal(err)
			}
			return b[0]
		}
	}
	t.Fatalf("%s: %s is in no PT_LOAD segment", path, fn)
	return 0
}

// waitProbed waits until probe has put its breakpoint (an int3, or the
// jmp of a jump-optimised probe) at the entry of function fn of path in
// pid: the probes given with it are installed.
func waitProbed(t *testing.T, p *bg, pid int, path, fn string) {
	t.Helper()
	deadline := time.Now().Add(cmdTimeout)
	orig := fileByte(t, path, fn)
	for b := codeByte(t, pid, path, fn); b == orig || b != 0xcc && b != 0xe9; b = codeByte(t, pid, path, fn) {
		if p.exited() {
			t.Fatalf("probe exited before probing %s:\n%v", fn, p.res)
		}
		if time.Now().After(deadline) {
			t.Fatalf("no breakpoint at %s in pid %d after %v", fn, pid, cmdTimeout)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// attachSession is one "probe attach" to a fed process, for one phase of
// its input.
type attachSession struct {
	events string // the -o file
	res    result
}

// attachFor attaches probe with args to f, waits until fn of path is
// probed, feeds input, waits until the process has done that work, then
// ends probe with SIGINT and checks that it exited 0, quietly, and that
// fn's first byte is the file's again.
func attachFor(t *testing.T, f *piped, path, fn string, input []byte, args ...string) attachSession {
	t.Helper()
	f.waitIdle(t)
	ev := filepath.Join(t.TempDir(), "events")
	p := startProbe(t, append([]string{"attach", "-o", ev, strconv.Itoa(f.pid())}, args...)...)
	waitProbed(t, p, f.pid(), path, fn)
	f.feed(t, input)
	f.waitIdle(t)
	p.signal(t, os.Interrupt)
	r := p.wait(t, cmdTimeout)
	if r.code != 0 || r.stderr != "" {
		t.Fatalf("probe attach, then SIGINT: want exit 0 and nothing on stderr, got\n%v", r)
	}
	if got, want := codeByte(t, f.pid(), path, fn), fileByte(t, path, fn); got != want {
		t.Errorf("after the detach %s starts with %#x, the file has %#x", fn, got, want)
	}
	for _, tid := range mustTaskIDs(t, f.pid()) {
		if tp, err := tracerPid(f.pid(), tid); err != nil || tp != 0 {
			t.Errorf("after the detach thread %d is traced by %d (%v)", tid, tp, err)
		}
	}
	return attachSession{events: ev, res: r}
}

func mustTaskIDs(t *testing.T, pid int) []int {
	t.Helper()
	tids, err := taskIDs(pid)
	if err != nil {
		t.Fatal(err)
	}
	return tids
}

// finishFed closes the stdin of f and checks it exits 0 with stdout
// byte-identical to want and nothing on stderr.
func finishFed(t *testing.T, f *piped, want string) {
	t.Helper()
	f.in.Close()
	r := f.wait(t, cmdTimeout)
	if r.code != 0 || r.stderr != "" {
		t.Fatalf("%s: want exit 0 and no stderr, got\n%v", f.desc, r)
	}
	sameOutput(t, f.desc+" (attached twice)", r.stdout, want)
}

// sameOutput fails unless got is byte-identical to the untraced want.
func sameOutput(t *testing.T, what, got, want string) {
	t.Helper()
	if got == want {
		return
	}
	i := 0
	for i < len(got) && i < len(want) && got[i] == want[i] {
		i++
	}
	t.Errorf("%s: output differs from the untraced run at byte %d of %d (untraced: %d bytes)\ntraced:   %q\nuntraced: %q",
		what, i, len(got), len(want), excerpt(got, i), excerpt(want, i))
}

func excerpt(s string, i int) string {
	return s[max(0, i-40):min(len(s), i+40)]
}

// ---------------------------------------------------------------------
// Reading what probe printed.

var (
	countLineRE = regexp.MustCompile(`(?m)^# count of (\S+): (\d+) hits`)
	histLineRE  = regexp.MustCompile(`(?m)^# hist:\S+ of (\S+) \([^)]*\): (\d+) values, sum (-?\d+)`)
)

// actionTotals reads the "# count of EVENT: N hits" and "# hist:F of
// EVENT (...): N values, sum S" lines of an events file: hits by event,
// and sums by event.
func actionTotals(t *testing.T, path string) (hits map[string]int, sums map[string]int64) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	hits, sums = map[string]int{}, map[string]int64{}
	for _, m := range countLineRE.FindAllStringSubmatch(string(data), -1) {
		hits[m[1]], _ = strconv.Atoi(m[2])
	}
	for _, m := range histLineRE.FindAllStringSubmatch(string(data), -1) {
		hits["hist "+m[1]], _ = strconv.Atoi(m[2])
		sums[m[1]], _ = strconv.ParseInt(m[3], 10, 64)
	}
	if len(hits) == 0 {
		t.Fatalf("%s: no count or hist lines:\n%s", path, limit(string(data)))
	}
	return hits, sums
}

// graphSummary is what a function_graph trace says.
type graphSummary struct {
	calls   map[string]int // by function: leaves and opened calls
	threads map[int]bool
	lines   int
}

var graphCallRE = regexp.MustCompile(`^\s*\d+\)\s+(.+)-(\d+)\s+\|[^|]*\|\s+(.*)$`)

// readGraph parses a function_graph trace and checks that it is whole:
// on every thread each "f() {" has its "}", no return is lost, no line
// is garbled and nothing was lost.
func readGraph(t *testing.T, path string) graphSummary {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	g := graphSummary{calls: map[string]int{}, threads: map[int]bool{}}
	open := map[int]int{}
	bad := 0
	for _, line := range strings.Split(strings.TrimSuffix(string(data), "\n"), "\n") {
		switch {
		case strings.HasPrefix(line, "#"):
			if strings.Contains(line, "lost") {
				t.Errorf("%s: %s", path, line)
			}
			continue
		case line == "" || strings.HasPrefix(line, " ---") || strings.Contains(line, " => "):
			continue // a switch of thread, as ftrace marks it
		}
		m := graphCallRE.FindStringSubmatch(line)
		if m == nil {
			if bad++; bad <= 5 {
				t.Errorf("%s: not a function_graph line: %q", path, line)
			}
			continue
		}
		tid, _ := strconv.Atoi(m[2])
		g.threads[tid] = true
		g.lines++
		call := strings.TrimSpace(m[3])
		switch {
		case strings.HasSuffix(call, "() {"):
			open[tid]++
			g.calls[strings.TrimSuffix(call, "() {")]++
		case strings.HasSuffix(call, "();"):
			g.calls[strings.TrimSuffix(call, "();")]++
		case strings.HasPrefix(call, "}"):
			if strings.Contains(call, "lost") {
				t.Errorf("%s: %q", path, line)
			}
			if open[tid]--; open[tid] < 0 {
				t.Errorf("%s: a } with no call open on thread %d: %q", path, tid, line)
				open[tid] = 0
			}
		default:
			if bad++; bad <= 5 {
				t.Errorf("%s: not a call or a return: %q", path, line)
			}
		}
	}
	for tid, n := range open {
		if n != 0 {
			t.Errorf("%s: thread %d has %d calls never closed", path, tid, n)
		}
	}
	if g.lines == 0 {
		t.Fatalf("%s: no function_graph lines:\n%s", path, limit(string(data)))
	}
	return g
}

// wantHits checks that event ev was hit exactly n times.
func wantHits(t *testing.T, what string, hits map[string]int, ev string, n int) {
	t.Helper()
	if got, ok := hits[ev]; !ok || got != n {
		t.Errorf("%s: %s hit %d times (reported: %v), want %d", what, ev, got, ok, n)
	}
}

// sameHits checks that events a and b were hit equally often, and more
// than min times: every call entered returned.
func sameHits(t *testing.T, what string, hits map[string]int, a, b string, min int) {
	t.Helper()
	if hits[a] != hits[b] || hits[a] < min {
		t.Errorf("%s: %s hit %d times, %s %d times; want equal and at least %d", what, a, hits[a], b, hits[b], min)
	}
}
