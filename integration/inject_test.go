package integration

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Error injection (o: probes): a small request server (failsrv.c) gets
// failures from its C library and from its own function, and its error
// paths report each as the injected errno says; the calls the probes do
// not pick run untouched.

func failsrv(t *testing.T) string {
	return builtOnce(t, "failsrv", "testdata/inject/failsrv.c", "-O2", "-g", "-Wall")
}

// requestFiles makes files of 3 and 1000 bytes and returns their paths.
func requestFiles(t *testing.T) (small, big string) {
	dir := t.TempDir()
	small, big = filepath.Join(dir, "small"), filepath.Join(dir, "big")
	if err := os.WriteFile(small, []byte("abc"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(big, make([]byte, 1000), 0o644); err != nil {
		t.Fatal(err)
	}
	return small, big
}

// overrideEvents are the o: events of a text trace: "name: fields".
func overrideEvents(out string) []string {
	var evs []string
	for _, line := range strings.Split(out, "\n") {
		if ev, ok := parseEvent(line); ok && strings.HasPrefix(ev.name, "o_") {
			evs = append(evs, ev.name+":"+ev.rest)
		}
	}
	return evs
}

// serverLines is the server's answers: the lines that are not events or
// comments of the trace.
func serverLines(out string) string {
	var lines []string
	for _, line := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		if _, ok := parseEvent(line); ok || strings.HasPrefix(line, "#") {
			continue
		}
		lines = append(lines, line)
	}
	return strings.Join(lines, "\n")
}

func TestInjectErrors(t *testing.T) {
	t.Parallel()
	exe := failsrv(t)
	small, big := requestFiles(t)
	opens := fmt.Sprintf("open %s\nopen %s\nopen %s\nopen %s\n", small, big, small, big)
	ok := func(path string) string {
		if path == small {
			return fmt.Sprintf("open %s: 3 bytes", path)
		}
		return fmt.Sprintf("open %s: 1000 bytes", path)
	}
	denied := func(path string) string { return fmt.Sprintf("open %s: error: Permission denied", path) }
	event := func(path string) string {
		return fmt.Sprintf(`o_open_0: pathname="%s" flags=O_RDONLY retval=-1 errno=EACCES`, path)
	}

	for _, tc := range []struct {
		name   string
		args   []string
		stdin  string
		answer []string
		events []string
		code   int
	}{
		{
			name:   "times",
			args:   []string{"o:libc:open $retval=-1 errno=EACCES", "--fail-times", "2"},
			stdin:  opens,
			answer: []string{denied(small), denied(big), ok(small), ok(big), "served=2 failed=2"},
			events: []string{event(small), event(big)},
			code:   1,
		},
		{
			name:   "every",
			args:   []string{"o:libc:open $retval=-1 errno=EACCES", "--fail-every", "2"},
			stdin:  opens,
			answer: []string{ok(small), denied(big), ok(small), denied(big), "served=2 failed=2"},
			events: []string{event(big), event(big)},
			code:   1,
		},
		{
			// The filter picks calls by the function's parameters,
			// named as the manual names them (glibc's DWARF says
			// "bytes"); the C library's own small mallocs go on.
			name:  "filter",
			args:  []string{"o:libc:malloc $retval=0 errno=ENOMEM if size > 1048576"},
			stdin: "alloc 100\nalloc 5000000\nalloc 200\nalloc 3000000\n",
			answer: []string{"alloc 100: ok", "alloc 5000000: out of memory", "alloc 200: ok",
				"alloc 3000000: out of memory", "served=2 failed=2"},
			events: []string{"o_malloc_0: size=5000000 retval=0 errno=ENOMEM", "o_malloc_0: size=3000000 retval=0 errno=ENOMEM"},
			code:   1,
		},
		{
			// The program's own function, its parameters from DWARF
			// (-O2); no errno given, none written.
			name:   "own",
			args:   []string{"o:checksum $retval=7 if len == 3"},
			stdin:  "sum abc\nsum abcd\nsum xyz\n",
			answer: []string{"sum abc: 7", "sum abcd: 394", "sum xyz: 7", "served=3 failed=0"},
			events: []string{`o_checksum_0: text="abc" len=3 retval=7`, `o_checksum_0: text="xyz" len=3 retval=7`},
		},
		{
			// A return probe sees what the skipped call returned.
			name:   "return",
			args:   []string{"o:libc:open $retval=-1 errno=ENOENT", "--fail-times", "1", "r:libc:open ret=$retval:s32"},
			stdin:  fmt.Sprintf("open %s\nopen %s\n", small, small),
			answer: []string{fmt.Sprintf("open %s: error: No such file or directory", small), ok(small), "served=1 failed=1"},
			events: []string{fmt.Sprintf(`o_open_0: pathname="%s" flags=O_RDONLY retval=-1 errno=ENOENT`, small)},
			code:   1,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := runCmdStdin(t, nil, []byte(tc.stdin), probeBin, append(append([]string{"run"}, tc.args...), "--", exe)...)
			if r.code != tc.code {
				t.Fatalf("exit status %d, want %d:\n%v", r.code, tc.code, r)
			}
			if got, want := serverLines(r.stdout), strings.Join(tc.answer, "\n"); got != want {
				t.Errorf("the server answered\n%s\nwant\n%s", got, want)
			}
			if got, want := overrideEvents(r.stdout), tc.events; strings.Join(got, "\n") != strings.Join(want, "\n") {
				t.Errorf("events\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
			}
			if tc.name == "return" {
				var rets []string
				for _, line := range strings.Split(r.stdout, "\n") {
					if ev, ok := parseEvent(line); ok && ev.name == "r_open_0" {
						rets = append(rets, strings.TrimSpace(ev.rest))
					}
				}
				if want := "ret=-1 ret=3"; strings.Join(rets, " ") != want {
					t.Errorf("r_open_0 saw %q, want %q", rets, want)
				}
			}
		})
	}
}

// A probe whose filter never picks a call changes nothing: the server's
// answers are those of an untraced run, byte for byte.
func TestInjectNothingPicked(t *testing.T) {
	t.Parallel()
	exe := failsrv(t)
	small, big := requestFiles(t)
	stdin := []byte(fmt.Sprintf("open %s\nalloc 5000000\nsum hello\nopen %s\nopen /nonexistent\n", small, big))
	plain := runCmdStdin(t, nil, stdin, exe)
	traced := runCmdStdin(t, nil, stdin, probeBin, "run",
		"o:libc:malloc $retval=0 if size > 1000000000000", "o:libc:open $retval=-1 errno=EIO if flags == 12345",
		"o:checksum $retval=1 if len > 100", "--", exe)
	if plain.code != 1 || traced.code != plain.code {
		t.Fatalf("exit statuses: untraced %d, traced %d (want 1: one open fails):\n%v", plain.code, traced.code, traced)
	}
	if got := serverLines(traced.stdout); got != strings.TrimSuffix(plain.stdout, "\n") {
		t.Errorf("traced, the server answered\n%s\nuntraced\n%s", got, plain.stdout)
	}
	if evs := overrideEvents(traced.stdout); len(evs) != 0 {
		t.Errorf("events of calls no filter picked: %q", evs)
	}
}

// --fail-probability picks calls at random, the same ones in every run
// with the same --fail-seed.
func TestInjectProbability(t *testing.T) {
	t.Parallel()
	exe := failsrv(t)
	small, _ := requestFiles(t)
	stdin := []byte(strings.Repeat(fmt.Sprintf("open %s\n", small), 40))
	run := func(seed string) (answers string, failed int) {
		r := runCmdStdin(t, nil, stdin, probeBin, "run", "o:libc:open $retval=-1 errno=EINTR",
			"--fail-probability", "50", "--fail-seed", seed, "--", exe)
		answers = serverLines(r.stdout)
		failed = strings.Count(answers, "Interrupted system call")
		if evs := overrideEvents(r.stdout); len(evs) != failed {
			t.Errorf("seed %s: %d events, %d failures", seed, len(evs), failed)
		}
		if !strings.HasSuffix(answers, fmt.Sprintf("served=%d failed=%d", 40-failed, failed)) {
			t.Errorf("seed %s: totals do not match the answers:\n%s", seed, answers)
		}
		return answers, failed
	}
	a1, n1 := run("3")
	a2, _ := run("3")
	b, _ := run("4")
	if n1 == 0 || n1 == 40 {
		t.Errorf("50%%: %d of 40 calls failed", n1)
	}
	if a1 != a2 {
		t.Errorf("the same seed failed other calls:\n%s\n--\n%s", a1, a2)
	}
	if a1 == b {
		t.Errorf("seeds 3 and 4 failed the same 40 calls")
	}
}

// A Debian program: cat's read fails with EIO once, and cat says so and
// exits 1, as its error path does.
func TestInjectCat(t *testing.T) {
	t.Parallel()
	small, _ := requestFiles(t)
	cat, err := exec.LookPath("cat")
	if err != nil {
		t.Fatal(err)
	}
	r := probe(t, "run", "-o", filepath.Join(t.TempDir(), "trace"), "o:libc:read $retval=-1 errno=EIO", "--fail-times", "1", "--", cat, small)
	if want := fmt.Sprintf("%s: %s: Input/output error\n", cat, small); r.code != 1 || r.stdout != "" || r.stderr != want {
		t.Errorf("want exit status 1, no output and %q, got\n%v", want, r)
	}
	r = probe(t, "run", "-o", filepath.Join(t.TempDir(), "trace"), "o:libc:read $retval=-1 errno=EIO", "--fail-times", "0", "--", cat, small)
	if r.code != 0 || r.stdout != "abc" {
		t.Errorf("--fail-times 0: want cat's own output, got\n%v", r)
	}
}

// Attached to a running server: failures while attached, none after the
// detach, the server never restarted and traced by nobody.
func TestInjectAttach(t *testing.T) {
	t.Parallel()
	exe := failsrv(t)
	small, _ := requestFiles(t)
	srv := startPiped(t, nil, exe)
	ask := func(req string, answers int) {
		t.Helper()
		fmt.Fprintf(srv.in, "%s\n", req)
		deadline := time.Now().Add(20 * time.Second)
		for strings.Count(srv.stdout.String(), "\n") < answers {
			if time.Now().After(deadline) {
				t.Fatalf("no answer to %q; the server said:\n%s", req, srv.stdout.String())
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	ask("open "+small, 1)
	p := startProbe(t, "attach", "-v", strconv.Itoa(srv.pid()), "o:libc:open $retval=-1 errno=EMFILE", "--fail-times", "2")
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(p.stderr.String(), "o_open_0: stops the thread") {
		if time.Now().After(deadline) || p.exited() {
			t.Fatalf("probe did not say its probe went in:\n%s", p.stderr.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	for i := 2; i <= 4; i++ {
		ask("open "+small, i)
	}
	p.signal(t, os.Interrupt)
	if r := p.wait(t, 10*time.Second); r.code != 0 || len(overrideEvents(r.stdout)) != 2 {
		t.Fatalf("probe attach: want exit status 0 and 2 events, got\n%v", r)
	}
	waitUntraced(t, srv.pid(), 10*time.Second)
	ask("open "+small, 5)
	fmt.Fprintln(srv.in, "quit")
	r := srv.wait(t, 10*time.Second)
	want := strings.Join([]string{
		"open " + small + ": 3 bytes",
		"open " + small + ": error: Too many open files",
		"open " + small + ": error: Too many open files",
		"open " + small + ": 3 bytes",
		"open " + small + ": 3 bytes",
		"served=3 failed=2", ""}, "\n")
	if r.stdout != want || r.code != 1 {
		t.Errorf("the server: want exit status 1 and\n%s\ngot\n%v", want, r)
	}
}

func TestInjectBadInput(t *testing.T) {
	t.Parallel()
	exe, gotrace := failsrv(t), tracerBin(t, "gotrace") // (both built before the first run: the arm64 guest's fixtures)
	for _, tc := range []struct {
		args     []string
		contains []string
	}{
		{[]string{"o:checksum"}, []string{"o:", "$retval=VALUE"}},
		{[]string{"o:checksum $retval=x"}, []string{"$retval=x"}},
		{[]string{"o:checksum $retval=1 errno=EFOO"}, []string{"errno=EFOO", "unknown errno"}},
		{[]string{"o:checksum+4 $retval=1"}, []string{"checksum+4", "function's entry"}},
		{[]string{"o:sys_openat $retval=0 errno=EIO"}, []string{"sys_openat", "$retval=0 with errno=EIO"}},
		{[]string{"o:sys_openat"}, []string{"sys_openat", "needs errno=ERRNO or $retval=VALUE"}},
		{[]string{"o:checksum $retval=1 if nosuch > 1"}, []string{"nosuch"}},
		{[]string{"p:checksum", "--fail-times", "3"}, []string{"--fail-times", "no o: probe"}},
		{[]string{"o:checksum $retval=1", "--fail-probability", "150"}, []string{"--fail-probability 150"}},
		{[]string{"o:checksum $retval=1", "--fail-every", "0"}, []string{"--fail-every 0"}},
	} {
		r := runCmdStdin(t, nil, []byte("sum abc\n"), probeBin, append(append([]string{"run"}, tc.args...), "--", exe)...)
		badSpec{contains: tc.contains}.check(t, r)
	}
	// Go functions: refused, saying why.
	r := probe(t, "run", "o:main.work $retval=1", "--", gotrace)
	badSpec{contains: []string{"main.work", "Go functions are not supported"}}.check(t, r)
}

// Actions see the failed calls: => count counts them, as --fail-every
// picked them.
func TestInjectCount(t *testing.T) {
	t.Parallel()
	exe := failsrv(t)
	small, _ := requestFiles(t)
	r := runCmdStdin(t, nil, []byte(strings.Repeat("open "+small+"\n", 6)), probeBin, "run",
		"o:libc:open $retval=-1 errno=ECONNREFUSED => count", "--fail-every", "3", "--", exe)
	if r.code != 1 || !strings.Contains(r.stdout, "served=4 failed=2\n") || strings.Count(r.stdout, "error: Connection refused") != 2 {
		t.Fatalf("want 2 of 6 opens refused, got\n%v", r)
	}
	if want := "# count of probe/o_open_0: 2 hits, 1 key\ntotal        2 |"; !strings.Contains(r.stdout, want) {
		t.Errorf("want the count table %q, got\n%s", want, r.stdout)
	}
}

// goBuiltOnce builds the Go program in package dir (relative to the
// repository) into binDir/name, once per run.
func goBuiltOnce(t *testing.T, name, dir string) string {
	t.Helper()
	return builtOnceBy(t, name, func(exe string) error { return build(repoRoot, "go", "build", "-o", exe, "./"+dir) })
}

// o:sys_NAME is strace's --inject: the system call is not run, and the
// thread gets -errno at its exit. The C program's wrapper makes it -1
// and errno; a Go program, which has no C library, gets its os error; a
// return probe on the call sees the injected result.
func TestInjectSyscall(t *testing.T) {
	t.Parallel()
	exe, goopen := failsrv(t), goBuiltOnce(t, "goopen", "integration/testdata/inject/goopen")
	small, big := requestFiles(t)

	r := runCmdStdin(t, nil, []byte(fmt.Sprintf("open %s\nopen %s\nopen %s\n", small, big, small)), probeBin, "run",
		fmt.Sprintf(`o:sys_openat path=+0($arg2):string errno=EACCES if path == "%s"`, small), "r:sys_openat ret=$retval:s64", "--", exe)
	want := fmt.Sprintf("open %s: error: Permission denied\nopen %s: 1000 bytes\nopen %s: error: Permission denied\nserved=1 failed=2", small, big, small)
	if got := serverLines(r.stdout); r.code != 1 || got != want {
		t.Errorf("C: want exit status 1 and\n%s\ngot\n%v", want, r)
	}
	var evs []string
	for _, line := range strings.Split(r.stdout, "\n") {
		if ev, ok := parseEvent(line); ok && strings.Contains(ev.name, "sys_openat") {
			evs = append(evs, ev.name+strings.TrimRight(ev.rest, " "))
		}
	}
	// (The C library's own openat calls before main are not the test's.)
	tail := evs[max(0, len(evs)-5):]
	wantEvs := []string{
		fmt.Sprintf(`o_sys_openat_0 path="%s" retval=-1 errno=EACCES`, small), "r_sys_openat_0 ret=-13",
		"r_sys_openat_0 ret=3",
		fmt.Sprintf(`o_sys_openat_0 path="%s" retval=-1 errno=EACCES`, small), "r_sys_openat_0 ret=-13",
	}
	if strings.Join(tail, "\n") != strings.Join(wantEvs, "\n") {
		t.Errorf("C: events\n%s\nwant\n%s", strings.Join(tail, "\n"), strings.Join(wantEvs, "\n"))
	}

	r = runCmdStdin(t, nil, []byte(fmt.Sprintf("%s\n%s\n%s\n", small, big, small)), probeBin, "run", "-o", filepath.Join(t.TempDir(), "trace"),
		fmt.Sprintf(`o:sys_openat path=+0($arg2):string errno=ENOENT if path == "%s"`, big), "--", goopen)
	want = fmt.Sprintf("read %s: 3 bytes\nerror: open %s: no such file or directory\nread %s: 3 bytes\nfailed=1\n", small, big, small)
	if r.code != 0 || r.stdout != want {
		t.Errorf("Go: want\n%s\ngot\n%v", want, r)
	}
}

// A static program has no libc.so and no GOT slot for errno: its own TLS
// block holds it, where the TLS ABI places it.
func TestInjectStatic(t *testing.T) {
	t.Parallel()
	exe := builtOnce(t, "failsrv-static", "testdata/inject/failsrv.c", "-O2", "-g", "-static", "-Wall")
	small, _ := requestFiles(t)
	r := runCmdStdin(t, nil, []byte(fmt.Sprintf("open %s\nopen %s\n", small, small)), probeBin, "run",
		"o:open $retval=-1 errno=EACCES", "--fail-times", "1", "--", exe)
	want := fmt.Sprintf("open %s: error: Permission denied\nopen %s: 3 bytes\nserved=1 failed=1", small, small)
	if got := serverLines(r.stdout); r.code != 1 || got != want {
		t.Errorf("want exit status 1 and\n%s\ngot\n%v", want, r)
	}
}
