package integration

import (
	"bufio"
	"bytes"
	"debug/elf"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The function tracer on a program of 12,000 functions (bench/bigc),
// where its breakpoints and their removal are written in batches: every
// call is traced exactly once, the program's output is unchanged, and
// after a detach its code is byte for byte the file's again.

const bigFuncs = 12000

var bigProg struct {
	once sync.Once
	path string
	err  error
}

// bigBin returns the program, generated and compiled (its parts in
// parallel) on first use.
func bigBin(t *testing.T) string {
	t.Helper()
	bigProg.once.Do(func() {
		start := time.Now()
		bigProg.path, bigProg.err = buildBig(filepath.Join(binDir, "big"))
		t.Logf("generated and compiled %d functions in %v", bigFuncs, time.Since(start).Round(time.Millisecond))
	})
	if bigProg.err != nil {
		t.Fatalf("building the big program: %v", bigProg.err)
	}
	return bigProg.path
}

func buildBig(dir string) (string, error) {
	if err := build(repoRoot, "go", "run", "./bench/bigc", "-n", strconv.Itoa(bigFuncs), "-parts", "4", dir); err != nil {
		return "", err
	}
	srcs, err := filepath.Glob(filepath.Join(dir, "*.c"))
	if err != nil {
		return "", err
	}
	errs := make(chan error, len(srcs))
	for _, src := range srcs {
		go func() { errs <- build(dir, "gcc", "-O0", "-g", "-c", src) }()
	}
	for range srcs {
		if e := <-errs; e != nil {
			err = e
		}
	}
	if err != nil {
		return "", err
	}
	objs, err := filepath.Glob(filepath.Join(dir, "*.o"))
	if err != nil {
		return "", err
	}
	exe := filepath.Join(dir, "big")
	return exe, build(dir, "gcc", append([]string{"-o", exe}, objs...)...)
}

var bigFuncRE = regexp.MustCompile(`^f\d{5}$`)

// wantBigCalls is what one run of the program's calls shows under the
// function tracer: each function once, called by main.
func wantBigCalls() map[string]int {
	want := map[string]int{}
	for i := range bigFuncs {
		want[fmt.Sprintf("f%05d <-main", i)] = 1
	}
	return want
}

// funcCalls counts the lines of a function trace by "FUNC <-CALLER".
func funcCalls(t *testing.T, lines []string) map[string]int {
	t.Helper()
	if len(lines) == 0 || !strings.HasPrefix(lines[0], "#           TASK-PID") {
		t.Fatalf("function trace does not start with the column header: %q", lines[:min(len(lines), 3)])
	}
	got := map[string]int{}
	for _, l := range lines[1:] {
		m := funcLineRE.FindStringSubmatch(l)
		if m == nil {
			t.Fatalf("not a function tracer line: %q", l)
		}
		got[m[6]+" <-"+m[7]]++
	}
	return got
}

// TestBigFunctionTracer: probe run with the function tracer, then with
// function_graph, on every function of the big program.
func TestBigFunctionTracer(t *testing.T) {
	t.Parallel()
	exe := bigBin(t)
	t.Run("function", func(t *testing.T) {
		t.Parallel()
		tf, _ := runTraced(t, []string{"--tracer", "function"}, exe)
		got := funcCalls(t, tf.section(t, "function"))
		want := wantBigCalls()
		if n := got["main <-__libc_start_call_main"]; n != 1 {
			t.Errorf("main traced %d times, want once", n)
		}
		delete(got, "main <-__libc_start_call_main")
		if !mapsEqual(got, want) {
			t.Errorf("%d distinct lines by \"FUNC <-CALLER\", want %d, one per function:%s", len(got), len(want), mapDiff(got, want))
		}
		tf.wantNotes(t, 0, false)
	})
	t.Run("function_graph", func(t *testing.T) {
		t.Parallel()
		tf, _ := runTraced(t, []string{"--tracer", "function_graph"}, exe)
		// Every function's record stub and hook finds room in the
		// out-of-line pages: an area's last slots, too few for one,
		// kept thousands of them on the int3 before.
		r := probe(t, "run", "-v", "-o", os.DevNull, "--tracer", "function_graph", "--", exe)
		if line := fmt.Sprintf("probe: function tracer: %d functions in-process\n", bigFuncs+1); r.code != 0 || !strings.Contains(r.stderr, line) {
			t.Errorf("probe run -v: %v\nwant exit 0 and %q", r, line)
		}
		want := []string{"main() {"}
		for i := range bigFuncs {
			want = append(want, fmt.Sprintf("  f%05d();", i))
		}
		want = append(want, "}")
		wantGraph(t, "function_graph", rendered(graphOfOneThread(t, tf)), want)
		tf.wantNotes(t, 0, false)
	})
}

// mapDiff describes a few of the keys whose counts differ.
func mapDiff(got, want map[string]int) string {
	var b strings.Builder
	n := 0
	for k, w := range want {
		if got[k] != w && n < 5 {
			fmt.Fprintf(&b, "\n  %q: %d lines, want %d", k, got[k], w)
			n++
		}
	}
	for k, g := range got {
		if _, ok := want[k]; !ok && n < 10 {
			fmt.Fprintf(&b, "\n  %q: %d lines, want none", k, g)
			n++
		}
	}
	return b.String()
}

// TestBigAttachDetach: attach the function tracer to the big program
// waiting between two rounds of calls; every entry gets its breakpoint,
// the round is traced exactly, and after the detach the code in memory
// is the file's again and the second round gives the same result.
func TestBigAttachDetach(t *testing.T) {
	t.Parallel()
	exe := bigBin(t)
	code := readText(t, exe)

	cmd := exec.Command(exe, "2")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := false
	defer func() {
		if !exited {
			cmd.Process.Kill()
			cmd.Wait()
		}
	}()
	lines := make(chan string, 4)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	next := func(what string) string {
		t.Helper()
		select {
		case l := <-lines:
			return l
		case <-time.After(cmdTimeout):
			t.Fatalf("big did not print %s within %v", what, cmdTimeout)
		}
		return ""
	}
	if l := next("ready"); l != "ready" {
		t.Fatalf("big printed %q, want ready", l)
	}
	pid := cmd.Process.Pid

	ev := filepath.Join(t.TempDir(), "trace")
	p := startProbe(t, "attach", "-o", ev, "--tracer", "function", strconv.Itoa(pid))
	// Attached and installed once every entry is a breakpoint.
	deadline := time.Now().Add(cmdTimeout)
	for {
		mem := code.live(t, pid)
		patched, err := code.patchedEntries(mem)
		if err != nil {
			t.Fatal(err)
		}
		if patched == bigFuncs {
			break
		}
		if p.exited() || time.Now().After(deadline) {
			p.signal(t, syscall.SIGINT)
			t.Fatalf("%d of %d function entries patched\n%v", patched, bigFuncs, p.wait(t, cmdTimeout))
		}
		time.Sleep(10 * time.Millisecond)
	}
	io.WriteString(stdin, "go\n")
	round1 := next("round 1")
	p.signal(t, syscall.SIGINT)
	if r := p.wait(t, cmdTimeout); r.code != 0 || r.stderr != "" {
		t.Fatalf("probe attach: want exit 0 and no stderr, got\n%v", r)
	}
	if mem := code.live(t, pid); !bytes.Equal(mem, code.file) {
		i := 0
		for mem[i] == code.file[i] {
			i++
		}
		t.Errorf("after detach, code at %#x is %#x, the file's is %#x", code.addr+uint64(i), mem[i], code.file[i])
	}
	io.WriteString(stdin, "go\n")
	round2 := next("round 2")
	stdin.Close()
	err = cmd.Wait()
	exited = true
	if err != nil {
		t.Errorf("big: %v", err)
	}
	sum1, _ := strings.CutPrefix(round1, "round 1 ")
	sum2, _ := strings.CutPrefix(round2, "round 2 ")
	if !strings.HasPrefix(round1, "round 1 checksum=") || sum1 != sum2 {
		t.Errorf("big printed %q then %q, want the same checksum in both rounds", round1, round2)
	}

	tf := readTrace(t, ev)
	got := funcCalls(t, tf.section(t, "function"))
	if want := wantBigCalls(); !mapsEqual(got, want) {
		t.Errorf("%d distinct lines by \"FUNC <-CALLER\", want %d, one per function:%s", len(got), len(want), mapDiff(got, want))
	}
	tf.wantNotes(t, 0, false)
}

// textImage is a program's .text as in the file, and where its functions
// start.
type textImage struct {
	path    string
	pie     bool
	addr    uint64 // link address
	file    []byte
	entries map[uint64]string // link address -> function
}

func readText(t *testing.T, exe string) *textImage {
	t.Helper()
	f, err := elf.Open(exe)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	text := f.Section(".text")
	data, err := text.Data()
	if err != nil {
		t.Fatal(err)
	}
	syms, err := f.Symbols()
	if err != nil {
		t.Fatal(err)
	}
	img := &textImage{path: exe, pie: f.Type == elf.ET_DYN, addr: text.Addr, file: data, entries: map[uint64]string{}}
	for _, s := range syms {
		if elf.ST_TYPE(s.Info) == elf.STT_FUNC && s.Size > 0 && s.Value >= text.Addr && s.Value < text.Addr+text.Size {
			img.entries[s.Value] = s.Name
		}
	}
	return img
}

// live reads the program's .text from the memory of pid.
func (img *textImage) live(t *testing.T, pid int) []byte {
	t.Helper()
	bias := uint64(0)
	if img.pie {
		bias = loadBase(t, pid, img.path)
	}
	mem, err := os.Open(fmt.Sprintf("/proc/%d/mem", pid))
	if err != nil {
		t.Fatal(err)
	}
	defer mem.Close()
	b := make([]byte, len(img.file))
	if _, err := mem.ReadAt(b, int64(img.addr+bias)); err != nil {
		t.Fatalf("read the code of pid %d: %v", pid, err)
	}
	return b
}

// patchedEntries counts the big program's functions whose first byte is
// a breakpoint in mem, or whose first 5 are a jmp (to a detour: the
// entries are jump-optimised once every breakpoint is in, and that can
// come before a look sees them all), and fails if any other byte differs
// from the file: probe patches function entries and nothing else.
func (img *textImage) patchedEntries(mem []byte) (int, error) {
	n := 0
	for i := 0; i < len(mem); i++ {
		if mem[i] == img.file[i] {
			continue
		}
		fn, entry := img.entries[img.addr+uint64(i)]
		switch {
		case entry && mem[i] == 0xcc:
		case entry && mem[i] == 0xe9 && i+5 <= len(mem):
			i += 4 // (its rel32)
		case !entry:
			return 0, fmt.Errorf("code at %#x is %#x, the file's is %#x, and it is not a function's entry", img.addr+uint64(i), mem[i], img.file[i])
		default:
			return 0, fmt.Errorf("%s's entry at %#x is %#x, the file's is %#x: neither a breakpoint nor a jmp", fn, img.addr+uint64(i), mem[i], img.file[i])
		}
		if bigFuncRE.MatchString(fn) {
			n++
		}
	}
	return n, nil
}

// loadBase returns where pid maps the start of file path.
func loadBase(t *testing.T, pid int, path string) uint64 {
	t.Helper()
	maps := readFile(t, fmt.Sprintf("/proc/%d/maps", pid))
	for _, l := range strings.Split(maps, "\n") {
		f := strings.Fields(l)
		if len(f) >= 6 && f[5] == path && f[2] == "00000000" {
			lo, _, _ := strings.Cut(f[0], "-")
			base, err := strconv.ParseUint(lo, 16, 64)
			if err != nil {
				t.Fatal(err)
			}
			return base
		}
	}
	t.Fatalf("pid %d does not map %s:\n%s", pid, path, maps)
	return 0
}
