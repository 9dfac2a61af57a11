package integration

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Tests of probes on libraries loaded after attach: testdata/dlopen's
// host dlopens libplugin.so, calls init() N times, dlcloses it, takes the
// page init() was on, loads the library again elsewhere and calls init()
// M times; at the end it checks that nothing wrote to that page.

const (
	dlRound1 = 3
	dlRound2 = 2
)

// dlopenHost builds the host and libplugin.so side by side; it returns
// the host and the library's path.
func dlopenHost(t *testing.T, v variant) (host, lib string) {
	t.Helper()
	dir := t.TempDir()
	src, _ := filepath.Abs(filepath.Join("testdata", "dlopen"))
	lib = filepath.Join(dir, "libplugin.so")
	if err := build(dir, "gcc", v.opt, "-g", "-Wall", "-shared", "-fPIC", "-o", lib, filepath.Join(src, "plugin.c")); err != nil {
		t.Fatal(err)
	}
	host = filepath.Join(dir, "host")
	if err := build(dir, "gcc", append(v.flags(), "-o", host, filepath.Join(src, "host.c"), "-ldl")...); err != nil {
		t.Fatal(err)
	}
	return host, lib
}

// dlopenWant is the host's output for N and M calls, traced or not.
func dlopenWant() string {
	var b strings.Builder
	b.WriteString("ready\n")
	for round, calls := range []int{dlRound1, dlRound2} {
		for i := 0; i < calls; i++ {
			fmt.Fprintf(&b, "round %d: init(%d) = %d\n", round+1, i, 2*i+1)
		}
	}
	b.WriteString("second load at another place: yes\nround 2 done\npage intact\n")
	return b.String()
}

// checkInitEvents checks the entry and return events of init() over both
// loads: every call, with its argument and result, in order.
func checkInitEvents(t *testing.T, evs []event, returns bool) {
	t.Helper()
	var got, want []string
	for _, e := range evs {
		got = append(got, e.name+e.rest)
	}
	for _, calls := range []int{dlRound1, dlRound2} {
		for i := 0; i < calls; i++ {
			want = append(want, fmt.Sprintf("p_init_0 x=%d", i))
			if returns {
				want = append(want, fmt.Sprintf("r_init_0 arg1=%d", 2*i+1))
			}
		}
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("events:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	for _, e := range evs {
		if e.retFunc == "" && e.sym != "init" || e.retFunc != "" && e.retFunc != "init" {
			t.Errorf("event %q is not at init", e.line)
		}
	}
}

// TestDlopenPendingRun: entry and return probes on a library the program
// loads later are pending, fire N+M times across a dlclose and a second
// dlopen at another address, and leave the program's output unchanged
// (the page where the library was stays as the program wrote it).
func TestDlopenPendingRun(t *testing.T) {
	t.Parallel()
	for _, v := range []variant{o0pie, o2nopie} {
		t.Run(v.String(), func(t *testing.T) {
			t.Parallel()
			host, lib := dlopenHost(t, v)
			cmd := []string{host, lib, fmt.Sprint(dlRound1), fmt.Sprint(dlRound2)}
			untraced := runCmd(t, nil, cmd[0], cmd[1:]...)
			if untraced.code != 0 || untraced.stdout != dlopenWant() {
				t.Fatalf("untraced host:\n%v\nwant stdout:\n%s", untraced, dlopenWant())
			}
			ev := filepath.Join(t.TempDir(), "events")
			args := append([]string{"run", "-o", ev, `p:libplugin:init x=$arg1:s32`, `r:libplugin:init $retval:s32`, "--"}, cmd...)
			got := probe(t, args...)
			wantErr := "probe: p_init_0 pending until libplugin is loaded\nprobe: r_init_0 pending until libplugin is loaded\n"
			if got.code != 0 || got.stdout != untraced.stdout || got.stderr != wantErr {
				t.Fatalf("probe %q:\n%v\nwant stdout as untraced and stderr:\n%s", args, got, wantErr)
			}
			data, err := os.ReadFile(ev)
			if err != nil {
				t.Fatal(err)
			}
			header, evs, other := splitOutput(string(data))
			if len(other) != 0 || len(header) != 2 {
				t.Errorf("header %q, other lines %q: want the two header lines only", header, other)
			}
			checkInitEvents(t, evs, true)
		})
	}
}

// dlHost is a running host (testdata/dlopen/host.c), its stdout and
// stderr together, waiting at "ready" for its first "go".
type dlHost struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	out   *syncBuf
	done  chan error
}

func startHost(t *testing.T, host, lib string, args ...string) *dlHost {
	t.Helper()
	if len(args) == 0 {
		args = []string{fmt.Sprint(dlRound1), fmt.Sprint(dlRound2)}
	}
	h := &dlHost{cmd: exec.Command(host, append([]string{lib}, args...)...), out: &syncBuf{}, done: make(chan error, 1)}
	var err error
	if h.stdin, err = h.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	h.cmd.Stdout, h.cmd.Stderr = h.out, h.out
	if err := h.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { h.done <- h.cmd.Wait() }()
	t.Cleanup(func() { h.cmd.Process.Kill(); <-h.done })
	waitFor(t, "host", h.out.String, "ready\n")
	return h
}

// finish waits for the host to end, which it must with the output of an
// untraced run.
func (h *dlHost) finish(t *testing.T) {
	t.Helper()
	h.finishWith(t, dlopenWant())
}

// finishWith waits for the host (any program started by startHost, args
// after the library's) to end, with exit status 0 and output want.
func (h *dlHost) finishWith(t *testing.T, want string) {
	t.Helper()
	select {
	case err := <-h.done:
		h.done <- err
		if err != nil {
			t.Errorf("host: %v", err)
		}
	case <-time.After(cmdTimeout):
		t.Fatalf("host did not finish; output:\n%s", h.out.String())
	}
	if h.out.String() != want {
		t.Errorf("host output:\n%s\nwant:\n%s", h.out.String(), want)
	}
}

// TestDlopenPendingAttach: attached to a running host before it loads the
// library, the pending probe fires N+M times; probe detaches while the
// page where the first load's init() was belongs to the host, and the
// host finds that page as it wrote it.
func TestDlopenPendingAttach(t *testing.T) {
	t.Parallel()
	host, lib := dlopenHost(t, o2pie)
	h := startHost(t, host, lib)

	ev := filepath.Join(t.TempDir(), "events")
	p := startProbe(t, "attach", "-o", ev, fmt.Sprint(h.cmd.Process.Pid), `p:libplugin:init x=$arg1:s32`)
	waitFor(t, "probe's stderr", p.stderr.String, "probe: p_init_0 pending until libplugin is loaded\n")
	io.WriteString(h.stdin, "go\n")
	waitFor(t, "host", h.out.String, "round 2 done\n")
	p.signal(t, syscall.SIGINT)
	if r := p.wait(t, cmdTimeout); r.code != 0 {
		t.Fatalf("probe: %v", r)
	}
	io.WriteString(h.stdin, "go\n")
	h.stdin.Close()
	h.finish(t)
	checkInitEvents(t, eventsIn(t, ev), false)
}

// TestDlopenBadInput: a library found nowhere the dynamic linker looks,
// and a symbol the library's file does not have, are refused with exit
// status 2 and the bad token; the host then runs as untraced.
func TestDlopenBadInput(t *testing.T) {
	t.Parallel()
	host, lib := dlopenHost(t, o2pie)
	h := startHost(t, host, lib)
	pid := fmt.Sprint(h.cmd.Process.Pid)
	for _, tc := range []struct{ spec, want string }{
		{"p:libnosuch:init", `probe: unknown library "libnosuch"`},
		{"p:libplugin:nosuch", `probe: unknown symbol "nosuch"`},
		{"p:libplugin:inti", `probe: unknown symbol "inti" (did you mean: init?)`},
		{"r:libplugin:init+0x1", "probe: init+0x1 is not an instruction boundary"},
		{"p:libplugin:init $retval", "$retval is only available in a return probe"},
	} {
		r := probe(t, "attach", pid, tc.spec)
		if r.code != 2 || !strings.Contains(r.stderr, tc.want) || strings.Count(r.stderr, "\n") != 1 || r.stdout != "" {
			t.Errorf("probe attach PID %q: %v\nwant exit 2 and one line with %q", tc.spec, r, tc.want)
		}
	}
	io.WriteString(h.stdin, "go\ngo\n")
	h.stdin.Close()
	h.finish(t)
}

// TestDlopenNeverLoaded: a pending probe whose library never comes is
// named in the trace's summary; it is not an error.
func TestDlopenNeverLoaded(t *testing.T) {
	t.Parallel()
	host, lib := dlopenHost(t, o2pie)
	// The host loads another copy of the library: libplugin2 waits in vain.
	lib2 := filepath.Join(filepath.Dir(lib), "libplugin2.so")
	data, err := os.ReadFile(lib)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(lib2, data, 0o755); err != nil {
		t.Fatal(err)
	}
	r := probe(t, "run", "p:libplugin2:version", "--", host, lib, "1", "1")
	if r.code != 0 || r.stderr != "probe: p_version_0 pending until libplugin2 is loaded\n" ||
		!strings.Contains(r.stdout, "# p_version_0 was never installed: libplugin2 was not loaded\n") {
		t.Errorf("probe run: %v\nwant the pending line on stderr and the never-installed note", r)
	}
}

// waitFor waits until read() contains s.
func waitFor(t *testing.T, what string, read func() string, s string) {
	t.Helper()
	deadline := time.Now().Add(cmdTimeout)
	for !strings.Contains(read(), s) {
		if time.Now().After(deadline) {
			t.Fatalf("%s did not print %q within %v; so far:\n%s", what, s, cmdTimeout, read())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// An o: probe on a library loaded later: pending, its filter over the
// library's DWARF parameters checked on the file before, and it fails
// the calls it picks in both loads of the library.
func TestDlopenPendingOverride(t *testing.T) {
	t.Parallel()
	host, lib := dlopenHost(t, o0pie)
	r := probe(t, "run", "-o", filepath.Join(t.TempDir(), "events"), `o:libplugin:init $retval=99 if x == 1`, "--", host, lib, fmt.Sprint(dlRound1), fmt.Sprint(dlRound2))
	want := strings.NewReplacer("init(1) = 3", "init(1) = 99").Replace(dlopenWant())
	if wantErr := "probe: o_init_0 pending until libplugin is loaded\n"; r.code != 0 || r.stdout != want || r.stderr != wantErr {
		t.Fatalf("want stdout\n%s\nand stderr %q, got\n%v", want, wantErr, r)
	}
	bad := probe(t, "run", `o:libplugin:init $retval=99 if nosuch == 1`, "--", host, lib, "1", "1")
	badSpec{contains: []string{"nosuch"}}.check(t, bad)
}

// TestFunctionTracerDlopen: `--filter 'MOD:GLOB'` on a library the
// program loads after the attach waits for it, as a probe on it does,
// and traces its functions from its dlopen on, in the tracee where they
// take a jump: pghost's 3 calls of pglib_work and every one of
// pglib_fib's calls that the library counts, nested, and the text the
// file's after the detach. A glob that matches nothing in the library's
// file is bad input. (Built -pg too on x86-64: past mcount's call, or
// __fentry__'s.) On host.c, which unloads its library and loads it
// again elsewhere: every call of both loads, the page the first was on
// untouched.
func TestFunctionTracerDlopen(t *testing.T) {
	t.Parallel()
	kinds := []struct{ name, flags string }{{"plain", ""}}
	if runtime.GOARCH == "amd64" {
		kinds = append(kinds, struct{ name, flags string }{"pg", "-pg"}, struct{ name, flags string }{"fentry", "-pg -mfentry"})
	}
	for _, kind := range kinds {
		t.Run(kind.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			host, lib, untraced, calls := pglibHost(t, dir, kind.flags)
			h := startHost(t, host, lib, "3")
			pid := strconv.Itoa(h.cmd.Process.Pid)
			if r := probe(t, "attach", pid, "--tracer", "function_graph", "--filter", "libpglib:nosuch*"); r.code != 2 || r.stderr != "probe: --filter \"libpglib:nosuch*\" matches no function in libpglib.so\n" {
				t.Errorf("a glob matching nothing in the library's file: %v\nwant exit 2 and one line", r)
			}
			out := filepath.Join(dir, "graph")
			p := startBg(t, []string{"PROBE_DEBUG_JUMPS=1"}, probeBin, "attach", "-o", out, pid, "--tracer", "function_graph", "--filter", "libpglib:*")
			r := loadUnder(t, h, p, "probe: function tracer: libpglib's functions pending until it is loaded\n", untraced.stdout)
			if runtime.GOARCH == "amd64" && !strings.Contains(r.stderr, "probe: 2 sites jump-optimised") {
				t.Errorf("want both functions in the tracee, jump-optimised after the dlopen: %s", r.stderr)
			}
			data, err := os.ReadFile(out)
			if err != nil {
				t.Fatal(err)
			}
			got, depth, maxDepth := map[string]int{}, 0, 0
			for _, line := range strings.Split(string(data), "\n") {
				f := strings.Split(line, "|")
				if strings.HasPrefix(line, "#") || len(f) != 3 {
					continue
				}
				fn := strings.TrimSpace(f[2])
				switch {
				case fn == "}":
					depth--
				case strings.HasSuffix(fn, "() {"):
					got[strings.TrimSuffix(fn, "() {")]++
					depth++
					maxDepth = max(maxDepth, depth)
				case strings.HasSuffix(fn, "();"):
					got[strings.TrimSuffix(fn, "();")]++
				default:
					t.Errorf("line %q", line)
				}
				if depth < 0 {
					t.Fatalf("a return without its call at %q", line)
				}
			}
			if want := map[string]int{"pglib_work": 3, "pglib_fib": calls}; !mapsEqual(got, want) || depth != 0 || maxDepth != 15 {
				t.Errorf("calls %v, nesting %d at the end, %d deep; want %v (the program's count), 0, 15", got, depth, maxDepth, want)
			}
		})
	}
	t.Run("reload", func(t *testing.T) {
		t.Parallel()
		host, lib := dlopenHost(t, o2pie)
		out := filepath.Join(t.TempDir(), "graph")
		r := probe(t, "run", "-o", out, "--tracer", "function", "--filter", "libplugin:init", "--", host, lib, fmt.Sprint(dlRound1), fmt.Sprint(dlRound2))
		if r.code != 0 || r.stdout != dlopenWant() || r.stderr != "probe: function tracer: libplugin's functions pending until it is loaded\n" {
			t.Fatalf("probe run: %v\nwant stdout as untraced and the pending line", r)
		}
		data, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		if n := strings.Count(string(data), ": init <-round_of"); n != dlRound1+dlRound2 {
			t.Errorf("%d calls of init, want %d:\n%s", n, dlRound1+dlRound2, data)
		}
		// A library that never comes (a copy the host does not load).
		if err := os.Link(lib, filepath.Join(filepath.Dir(lib), "libplugin2.so")); err != nil {
			t.Fatal(err)
		}
		r = probe(t, "run", "--tracer", "function", "--filter", "libplugin2:init", "--", host, lib, "1", "1")
		if r.code != 0 || !strings.HasSuffix(r.stdout, "page intact\n# no function of libplugin2 was traced: it was not loaded\n") {
			t.Errorf("probe run: %v\nwant the never-loaded note", r)
		}
	})
}

// atoi is s's number; s must be one.
func atoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// pglibHost builds testdata/fentry's pghost and its libpglib.so (with
// flags too) side by side in dir (where probe looks for a library named
// alone), and runs them once untraced: its output, and how many times
// pglib_fib ran.
func pglibHost(t *testing.T, dir, flags string) (host, lib string, untraced result, calls int) {
	t.Helper()
	src, _ := filepath.Abs(filepath.Join("testdata", "fentry"))
	lib = filepath.Join(dir, "libpglib.so")
	host = filepath.Join(dir, "pghost")
	if err := build(dir, "gcc", append([]string{"-O2", "-g", "-fPIC", "-shared", "-fno-optimize-sibling-calls", "-o", lib, filepath.Join(src, "pglib.c")}, strings.Fields(flags)...)...); err != nil {
		t.Fatal(err)
	}
	if err := build(dir, "gcc", "-O2", "-g", "-o", host, filepath.Join(src, "pghost.c"), "-ldl"); err != nil {
		t.Fatal(err)
	}
	untraced = runCmd(t, nil, host, lib, "3")
	m := regexp.MustCompile(`^ready\nsum=1830 calls=(\d+) ok\nloaded\n$`).FindStringSubmatch(untraced.stdout)
	if untraced.code != 0 || m == nil {
		t.Fatalf("untraced: %v", untraced)
	}
	return host, lib, untraced, atoi(t, m[1])
}

// loadUnder has pghost h load its library while probe p, attached, waits
// for it (pending: its line on p's stderr), interrupts p, and lets h end,
// as untraced (want: its output): p's result, after a check of its exit
// status and of the text, the files' again after the detach.
func loadUnder(t *testing.T, h *dlHost, p *bg, pending, want string) result {
	t.Helper()
	waitFor(t, "probe's stderr", p.stderr.String, pending)
	io.WriteString(h.stdin, "go\n")
	waitFor(t, "host", h.out.String, "loaded\n")
	p.signal(t, syscall.SIGINT)
	r := p.wait(t, cmdTimeout)
	if r.code != 0 {
		t.Fatalf("probe: %v", r)
	}
	if patched := textPatched(h.cmd.Process.Pid); patched != "none" {
		t.Errorf("after the detach the text differs from the file: %s", patched)
	}
	io.WriteString(h.stdin, "go\n")
	h.stdin.Close()
	h.finishWith(t, want)
	return r
}
