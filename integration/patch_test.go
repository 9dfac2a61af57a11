package integration

import (
	"bytes"
	"fmt"
	"os"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Live patching: patchsrv's compute() is replaced by a library's
// compute_v2 while the server runs, and put back.

type patchFiles struct{ srv, lib, libNoDWARF string }

func patchBins(t *testing.T) patchFiles {
	return patchFiles{
		srv:        builtOnce(t, "patchsrv", "testdata/patch/patchsrv.c", "-O2", "-g", "-pthread", "-Wall"),
		lib:        builtOnce(t, "libpatch.so", "testdata/patch/patch.c", "-O2", "-g", "-shared", "-fPIC", "-Wall"),
		libNoDWARF: builtOnce(t, "libpatch_nodw.so", "testdata/patch/patch.c", "-O2", "-shared", "-fPIC", "-Wall"),
	}
}

// startPatchServer starts patchsrv with args and waits for its first
// answer.
func startPatchServer(t *testing.T, args ...string) (patchFiles, *server, string) {
	f := patchBins(t)
	s := &server{piped: startPiped(t, nil, f.srv, args...)}
	s.compute(t, 1)
	return f, s, strconv.Itoa(s.pid())
}

// server is patchsrv running, with a way to ask it.
type server struct {
	*piped
	answers int
}

func (s *server) ask(t *testing.T, x int) {
	t.Helper()
	fmt.Fprintf(s.in, "compute %d\n", x)
	s.answers++
}

// answer waits for the last answer asked for and returns it.
func (s *server) answer(t *testing.T) string {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		lines := strings.Split(strings.TrimSuffix(s.stdout.String(), "\n"), "\n")
		if len(lines) >= s.answers && lines[0] != "" {
			return lines[s.answers-1]
		}
		if time.Now().After(deadline) || s.exited() {
			t.Fatalf("no answer %d; the server said:\n%s%s", s.answers, s.stdout.String(), s.stderr.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func (s *server) compute(t *testing.T, x int) string {
	t.Helper()
	s.ask(t, x)
	return s.answer(t)
}

// code reads n bytes of the server's memory at addr.
func (s *server) code(t *testing.T, addr uint64, n int) []byte {
	t.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/mem", s.pid()))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := make([]byte, n)
	if _, err := f.ReadAt(b, int64(addr)); err != nil {
		t.Fatalf("read %#x: %v", addr, err)
	}
	return b
}

var patchedRE = regexp.MustCompile(`^patched compute \((0x[0-9a-f]+)\) -> (\S+):compute_v2 \((0x[0-9a-f]+)\)\n$`)

func TestPatch(t *testing.T) {
	t.Parallel()
	f := patchBins(t)
	s := &server{piped: startPiped(t, nil, f.srv)}
	if a := s.compute(t, 5); a != "compute(5) = 10" {
		t.Fatalf("before the patch: %q", a)
	}
	pid := strconv.Itoa(s.pid())
	r := probe(t, "patch", pid, "compute", "--with", f.lib+":compute_v2")
	m := patchedRE.FindStringSubmatch(r.stdout)
	if r.code != 0 || m == nil || m[2] != f.lib || r.stderr != "" {
		t.Fatalf("probe patch: want exit status 0 and a line patched compute (ADDR) -> %s:compute_v2 (ADDR), got\n%v", f.lib, r)
	}
	addr, _ := strconv.ParseUint(m[1], 0, 64)
	// The patch stays, and nothing traces the server any more.
	waitUntraced(t, s.pid(), 10*time.Second)
	for x, want := range map[int]string{5: "compute(5) = 15", 7: "compute(7) = 21"} {
		if a := s.compute(t, x); a != want {
			t.Errorf("patched: %q, want %q", a, want)
		}
	}
	list := probe(t, "list", "--patches", pid)
	if want := strings.TrimPrefix(r.stdout, "patched "); list.code != 0 || list.stdout != want {
		t.Errorf("probe list --patches: want %q, got\n%v", want, list)
	}
	again := probe(t, "patch", pid, "compute", "--with", f.lib+":compute_v2")
	badSpec{contains: []string{"compute is already patched", "unpatch it first"}}.check(t, again)

	branch := 5 // jmp rel32
	if runtime.GOARCH == "arm64" {
		branch = 4 // b
	}
	patched := s.code(t, addr, branch)
	r = probe(t, "unpatch", pid, "compute")
	if want := fmt.Sprintf("unpatched compute: its %d bytes at %#x are the original again\n", branch, addr); r.code != 0 || r.stdout != want {
		t.Fatalf("probe unpatch: want %q, got\n%v", want, r)
	}
	if a := s.compute(t, 5); a != "compute(5) = 10" {
		t.Errorf("unpatched: %q, want compute(5) = 10", a)
	}
	// Byte for byte the program's own code again: what the ELF file has.
	orig := s.code(t, addr, 64)
	if bytes.Equal(patched, orig[:branch]) {
		t.Errorf("the patch's branch is still at %#x: % x", addr, patched)
	}
	if file := fileCode(t, f.srv, "compute", s.pid(), addr, 64); !bytes.Equal(orig, file) {
		t.Errorf("compute after unpatch:\n% x\nthe file's:\n% x", orig, file)
	}
	if list := probe(t, "list", "--patches", pid); list.code != 0 || list.stdout != "" {
		t.Errorf("probe list --patches after unpatch: want nothing, got\n%v", list)
	}
	// Patched again, the library already loaded: no second dlopen.
	if r := probe(t, "patch", pid, "compute", "--with", f.lib+":compute_v2"); r.code != 0 {
		t.Fatalf("patch again: %v", r)
	}
	if a := s.compute(t, 2); a != "compute(2) = 6" {
		t.Errorf("patched again: %q", a)
	}
	if n := strings.Count(readFile(t, fmt.Sprintf("/proc/%d/maps", s.pid())), f.lib); n == 0 {
		t.Errorf("%s is not mapped", f.lib)
	}
	// A probe killed with a probe in leaves its detour; the next attach
	// puts that back, not the patch, and keeps the patch's trampoline.
	pr := startBg(t, nil, probeBin, "attach", "-v", "-o", os.DevNull, pid, "p:scale x=%di")
	waitStderr(t, pr, "probe/p_scale_0: in-process", 30*time.Second)
	pr.cmd.Process.Kill()
	pr.wait(t, 10*time.Second)
	if r := probe(t, "attach", "--duration", "200ms", "-o", os.DevNull, pid, "p:scale x=%di"); r.code != 0 || !strings.Contains(r.stderr, "put back 1 places in its text that an earlier probe left patched") {
		t.Errorf("attach after a kill -9, patched: want the detour put back alone, got %v", r)
	}
	if a := s.compute(t, 2); a != "compute(2) = 6" {
		t.Errorf("patched, after a kill -9 and an attach: %q", a)
	}
	fmt.Fprintln(s.in, "quit")
	if r := s.wait(t, 10*time.Second); r.code != 0 {
		t.Errorf("the server: %v", r)
	}
}

// fileCode is n bytes of function fn as the file exe has them; the
// function is at addr in process pid.
func fileCode(t *testing.T, exe, fn string, pid int, addr uint64, n int) []byte {
	t.Helper()
	sym := funcSym(t, exe, fn)
	if bias := loadBias(t, pid, exe); sym.Value+bias != addr {
		t.Fatalf("%s is at %#x in pid %d, not at %#x", fn, sym.Value+bias, pid, addr)
	}
	return fileBytes(t, exe, sym.Value, n)
}

// A thread inside compute (sleeping in it) keeps the patch out: probe
// waits for it to leave, or, past --wait, refuses and says which thread.
func TestPatchWaitsForThreads(t *testing.T) {
	t.Parallel()
	f, s, pid := startPatchServer(t)
	// 3 s inside compute (PROBE_TIME_SCALE times more under TCG, where
	// the refused patch alone takes seconds: the one that waits must
	// still find the call under way).
	busyMs := 3000 * int(timeScale)
	s.ask(t, -busyMs)
	time.Sleep(200 * time.Millisecond)
	busy := regexp.MustCompile(`^probe: compute: thread ` + pid + ` has it on its stack \(compute\+0x[0-9a-f]+/0x[0-9a-f]+ \[patchsrv\]\); still so after 500ms \(--wait\)\n$`)
	refusedThenWaits(t, f, s, busy, fmt.Sprintf("compute(%d) = 0", -busyMs))
}

// refusedThenWaits checks that a patch of compute, while the server is
// busy with its last request, is refused after --wait 500ms with the
// error busy and leaves nothing behind, and that one that may wait 20s
// goes in once the request is answered (answer, the old code's, whole),
// and changes compute.
func refusedThenWaits(t *testing.T, f patchFiles, s *server, busy *regexp.Regexp, answer string) {
	t.Helper()
	pid := strconv.Itoa(s.pid())
	r := probe(t, "patch", pid, "compute", "--wait", "500ms", "--with", f.lib+":compute_v2")
	if r.code != 1 || !busy.MatchString(r.stderr) {
		t.Fatalf("a patch while the server is busy: want exit status 1 and %s, got\n%v", busy, r)
	}
	noPatchLeft(t, s)
	start := time.Now()
	r = probe(t, "patch", pid, "compute", "--wait", "20s", "--with", f.lib+":compute_v2")
	if r.code != 0 {
		t.Fatalf("a patch that may wait: %v", r)
	}
	if a := s.answer(t); a != answer {
		t.Errorf("the request it was busy with: %q, want %q (the old code, whole)", a, answer)
	}
	if waited := time.Since(start); waited < time.Second {
		t.Errorf("the patch went in after %v, while the server was still busy", waited)
	}
	if a := s.compute(t, 4); a != "compute(4) = 12" {
		t.Errorf("patched: %q", a)
	}
}

// noPatchLeft checks that a refused patch took out what it had put in:
// no tracer, no library, no marker.
func noPatchLeft(t *testing.T, s *server) {
	t.Helper()
	waitUntraced(t, s.pid(), 10*time.Second)
	if maps := readFile(t, fmt.Sprintf("/proc/%d/maps", s.pid())); strings.Contains(maps, "libpatch") || strings.Contains(maps, "probe-patches") {
		t.Errorf("a refused patch left the library or its marker mapped:\n%s", maps)
	}
}

// A thread stopped inside malloc cannot be made to call dlopen: with a
// program's own allocator (patchsrv built with OWN_MALLOC), dlopen's
// malloc would wait for ever on the lock the thread holds. probe waits
// until it has left, or, past --wait, refuses, says why, and leaves
// nothing behind.
func TestPatchLoaderBusy(t *testing.T) {
	t.Parallel()
	f := patchBins(t)
	srv := builtOnce(t, "patchsrv-mine", "testdata/patch/patchsrv.c", "-O2", "-g", "-pthread", "-Wall", "-DOWN_MALLOC")
	s := &server{piped: startPiped(t, nil, srv, "alone")}
	s.compute(t, 1)
	pid := strconv.Itoa(s.pid())
	fmt.Fprintf(s.in, "malloc %d\n", 3000*int(timeScale)) // as TestPatchWaitsForThreads's sleep
	s.answers++
	time.Sleep(200 * time.Millisecond)
	busy := regexp.MustCompile(`^probe: thread ` + pid + ` is in malloc \(malloc\+0x[0-9a-f]+/0x[0-9a-f]+ \[patchsrv-mine\]\), where a call of dlopen is not safe: it cannot load libpatch\.so now; still so after 500ms \(--wait\)\n$`)
	refusedThenWaits(t, f, s, busy, "malloc(16) = ok")
}

// A function inlined into a caller keeps its old code there: the patch
// is refused, saying where, unless --inlined; then the calls of its own
// copy (through a pointer) are the new function's, the inlined one's the
// old code's.
func TestPatchInlined(t *testing.T) {
	t.Parallel()
	f, s, pid := startPatchServer(t)
	r := probe(t, "patch", pid, "scale", "--with", f.lib+":compute_v2")
	want := regexp.MustCompile(`^probe: scale is also inlined at 1 place \(main\+0x[0-9a-f]+/0x[0-9a-f]+\): the callers there would keep the old code \(--inlined patches its entry all the same\)\n$`)
	if r.code != 2 || r.stdout != "" || !want.MatchString(r.stderr) {
		t.Fatalf("a patch of a function also inlined: want exit status 2 and %s, got\n%v", want, r)
	}
	noPatchLeft(t, s)
	r = probe(t, "patch", pid, "scale", "--inlined", "--with", f.lib+":compute_v2")
	note := regexp.MustCompile(`^probe: scale is also inlined at main\+0x[0-9a-f]+/0x[0-9a-f]+: the callers there keep the old code\n$`)
	if r.code != 0 || !strings.HasPrefix(r.stdout, "patched scale (") || !note.MatchString(r.stderr) {
		t.Fatalf("--inlined: want exit status 0, patched, and %s, got\n%v", note, r)
	}
	for _, c := range [][2]string{{"scale 4", "scale(4) = 5"}, {"scalep 4", "scalep(4) = 12"}} {
		fmt.Fprintf(s.in, "%s\n", c[0])
		s.answers++
		if a := s.answer(t); a != c[1] {
			t.Errorf("%s: %q, want %q", c[0], a, c[1])
		}
	}
}

func TestPatchBadInput(t *testing.T) {
	t.Parallel()
	f, s, pid := startPatchServer(t)
	for _, tc := range []struct {
		args     []string
		contains []string
	}{
		{[]string{"patch", pid, "compute", "--with", f.lib + ":compute_bad"}, []string{"compute(int32) int32", "compute_bad(int32, int32) int64", "called differently"}},
		{[]string{"patch", pid, "compute", "--with", f.libNoDWARF + ":compute_v2"}, []string{"compute_v2", "without DWARF"}},
		{[]string{"patch", pid, "compute", "--with", f.lib + ":nosuch"}, []string{"no function nosuch"}},
		{[]string{"patch", pid, "compute", "--with", "/nonexistent/lib.so:f"}, []string{"/nonexistent/lib.so"}},
		{[]string{"patch", pid, "compute+4", "--with", f.lib + ":compute_v2"}, []string{"compute+4"}},
		{[]string{"patch", pid, "nosuchfunc", "--with", f.lib + ":compute_v2"}, []string{"nosuchfunc"}},
		{[]string{"patch", pid, "compute", "--with", "compute_v2"}, []string{"--with", "LIB:NEWFUNC"}},
		{[]string{"patch", pid, "compute"}, []string{"usage: probe patch"}},
		{[]string{"patch", "x", "compute", "--with", f.lib + ":compute_v2"}, []string{`bad PID "x"`}},
		{[]string{"unpatch", pid, "compute"}, []string{"compute: not patched"}},
		{[]string{"list", "--patches"}, []string{"usage: probe list --patches PID"}},
	} {
		badSpec{contains: tc.contains}.check(t, probe(t, tc.args...))
	}
	// Nothing was loaded, nothing changed.
	if maps := readFile(t, fmt.Sprintf("/proc/%d/maps", s.pid())); strings.Contains(maps, "libpatch") || strings.Contains(maps, "probe-patches") {
		t.Errorf("bad input left the library or a marker mapped:\n%s", maps)
	}
	if a := s.compute(t, 5); a != "compute(5) = 10" {
		t.Errorf("after bad input: %q", a)
	}
}
