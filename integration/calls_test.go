package integration

import (
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
)

// callLines is an ltrace-style trace's lines, the pids written N, the
// addresses 0xADDR, the padding before " = " one space, and the C
// library's start-up and exit plumbing (__libc_start_main,
// __cxa_finalize) left out.
func callLines(out string) []string {
	pid := regexp.MustCompile(`^\[pid \d+\] `)
	addr := regexp.MustCompile(`0x[0-9a-f]{5,}`)
	pad := regexp.MustCompile(`\s+= `)
	var lines []string
	for _, l := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		if !pid.MatchString(l) || strings.Contains(l, "__libc_start_main") || strings.Contains(l, "__cxa_finalize") {
			continue
		}
		l = pid.ReplaceAllString(l, "[pid N] ")
		lines = append(lines, pad.ReplaceAllString(addr.ReplaceAllString(l, "0xADDR"), " = "))
	}
	return lines
}

// TestCalls: --calls shows the program's calls into the C library as
// ltrace does, arguments and results typed (open's flags by name, its
// mode in octal, strings as text), in the order made, the libraries'
// own calls among themselves left out (qsort's qsort_r), stopping the
// threads or recording in-process alike; -c tallies them, a -1 an error
// where the function's -1 is one (open's, not atoi's).
func TestCalls(t *testing.T) {
	t.Parallel()
	exe := tracerBin(t, "libcalls")
	want := []string{
		"[pid N] malloc(272) = 0xADDR",
		"[pid N] open(\"/dev/null\", O_WRONLY|O_CLOEXEC) = 3", // no O_CREAT: no mode passed
		"[pid N] write(3, 0xADDR, 5) = 5",
		"[pid N] close(3) = 0",
		"[pid N] open(\"/nonexistent-dir/x\", O_RDWR|O_CREAT, 0640) = -1 ENOENT (No such file or directory)", // errno as the call left it
		"[pid N] atoi(\"-1\") = -1", // a number: no errno, though errno is ENOENT
		"[pid N] qsort(0xADDR, 3, 4, 0xADDR) = <void>",
		"[pid N] strlen(\"hello\") = 5",                                       // the IFUNC's name, not its implementation's
		"[pid N] printf(\"%zd %d %d %d %d %zu\\n\", 5, -1, -1, 2, 3, 5) = 14", // the arguments as the format says
		"[pid N] free(0xADDR) = <void>",
	}
	// All of libc once, in-process; then the functions called, by name:
	// stopping, every call inside libc would stop too. On arm64, where
	// every probe stops, by name both times (all of libc there takes a
	// minute under TCG, its DWARF read and its calls stopped).
	called := "libc:malloc,libc:open,libc:write,libc:close,libc:atoi,libc:qsort,libc:strlen,libc:printf,libc:free"
	for _, engine := range [][]string{nil, {"--no-inprocess"}} {
		glob := "libc:*"
		if engine != nil || runtime.GOARCH == "arm64" {
			glob = called
		}
		r := mustProbe(t, append(append([]string{"run", "-v"}, engine...), "--calls", glob, "--", exe)...)
		if glob == "libc:*" {
			// What the program imports from libc, and nothing else of
			// its ~3,500 functions (issue 39): __libc_start_main,
			// __cxa_finalize and the nine above.
			if n := hookedFunctions(t, r.stderr); n != 11 {
				t.Errorf("%d functions hooked for libc:*, want the 11 the program imports:\n%s", n, r.stderr)
			}
		}
		out := strings.Replace(r.stdout, "5 -1 -1 2 3 5\n", "", 1)
		if !strings.Contains(r.stdout, "5 -1 -1 2 3 5\n") {
			t.Errorf("%v: the program's own output is missing:\n%s", engine, r.stdout)
		}
		if got := callLines(out); strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("%v: calls\n%s\nwant\n%s", engine, strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	}

	// Left out with "!", as ltrace -e '!free' and set_ftrace_filter's
	// "!": beside what is selected, or alone (all the rest).
	without := func(names ...string) []string {
		return slices.DeleteFunc(slices.Clone(want), func(l string) bool {
			return slices.ContainsFunc(names, func(n string) bool { return strings.HasPrefix(l, "[pid N] "+n+"(") })
		})
	}
	for _, c := range []struct {
		calls string
		want  []string
	}{
		{called + ",libc:!free,!libc:malloc", without("free", "malloc")},
		{"libc:!strlen", without("strlen")},
	} {
		if runtime.GOARCH == "arm64" && !strings.HasPrefix(c.calls, called) {
			continue // (all of libc's imports: their DWARF read, a minute under TCG)
		}
		r := mustProbe(t, "run", "--calls", c.calls, "--", exe)
		if got := callLines(strings.Replace(r.stdout, "5 -1 -1 2 3 5\n", "", 1)); strings.Join(got, "\n") != strings.Join(c.want, "\n") {
			t.Errorf("--calls %q:\n%s\nwant\n%s", c.calls, strings.Join(got, "\n"), strings.Join(c.want, "\n"))
		}
	}

	r := mustProbe(t, "run", "--calls", called, "-c", "--", exe)
	rows := map[string][2]int{}
	row := regexp.MustCompile(`(?m)^ *[0-9.]+ +[0-9.]+ +\d+ +(\d+) +(\d+) (\S+)$`)
	for _, m := range row.FindAllStringSubmatch(r.stdout, -1) {
		calls, _ := strconv.Atoi(m[1])
		errs, _ := strconv.Atoi(m[2])
		rows[m[3]] = [2]int{calls, errs}
	}
	for fn, want := range map[string][2]int{"open": {2, 1}, "atoi": {1, 0}, "malloc": {1, 0}, "write": {1, 0}, "close": {1, 0}, "qsort": {1, 0}, "free": {1, 0}} {
		if rows[fn] != want {
			t.Errorf("-c: %s %v (calls, errors), want %v\n%s", fn, rows[fn], want, r.stdout)
		}
	}
	if strings.Contains(r.stdout, "malloc(272)") || !strings.Contains(r.stdout, "% time     seconds  usecs/call     calls    errors function\n") {
		t.Errorf("-c: want the table alone:\n%s", r.stdout)
	}
	if all := mustProbe(t, "run", "--calls", "libc:*", "-c", "--", exe).stdout; strings.Contains(all, "__libc_start_main") || !strings.Contains(all, " qsort\n") {
		t.Errorf("-c of libc:*: want qsort's row and none for __libc_start_main, which never returns (as ltrace -c):\n%s", all)
	}
	// Recorded, then reported: the same lines.
	rec := filepath.Join(t.TempDir(), "calls.bin")
	mustProbe(t, "record", "-o", rec, "--calls", called, "--", exe)
	if got := callLines(mustProbe(t, "report", rec).stdout); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("report of a recording:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if rep := mustProbe(t, "report", "-c", rec).stdout; !regexp.MustCompile(`(?m) 2 +1 open$`).MatchString(rep) {
		t.Errorf("report -c: no open row of 2 calls, 1 error:\n%s", rep)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--calls", called, "--tracer", "function"}, "probe: --calls: "},
		{[]string{"--calls", ""}, `probe: --calls "": `},
		{[]string{"--calls", "libc:nosuch*"}, `probe: --calls "libc:nosuch*" matches no function`},
		{[]string{"--calls", called, "-c", "--format", "json"}, "--format json"},
		{[]string{"--calls", "libc:!nosuch*"}, `probe: --calls "libc:!nosuch*" matches no function`},
		{[]string{"--calls", "!libc:!free"}, `probe: --calls "!libc:!free": one '!' at most`},
		{[]string{"--calls", "libc:!"}, `probe: --calls "libc:!": no function named`},
		{[]string{"-T", "p:main"}, `probe: -T needs --calls`},
		{[]string{"--calls", called, "-n", "-1"}, `probe: -n -1: want from 0 to 64`},
		{[]string{"--calls", called, "-s", "-2"}, `probe: -s -2: want a length of at least 1 byte`},
		{[]string{"--tracer", "function", "--notrace", "!main"}, `probe: --notrace "!main": '!' leaves functions out of --filter or --calls only`},
	} {
		if bad := probe(t, append(append([]string{"run"}, c.args...), "--", exe)...); bad.code != 2 || strings.Count(bad.stderr, "\n") != 1 ||
			!strings.Contains(bad.stderr, c.want) || bad.stdout != "" {
			t.Errorf("%q: want exit 2 and one line with %q: %v", c.args, c.want, bad)
		}
	}
}

// A NULL result is a failure where the prototype says so, and shows its
// errno as a -1 does; -c counts it an error.
func TestCallsNullErrno(t *testing.T) {
	t.Parallel()
	exe := builtOnce(t, "nullerr", "testdata/tracers/nullerr.c", "-O0", "-g")
	want := []string{
		`[pid N] fopen("/nonexistent/x", "r") = 0x0 ENOENT (No such file or directory)`,
		"[pid N] malloc(4611686018427387904) = 0x0 ENOMEM (Cannot allocate memory)",
	}
	for _, engine := range [][]string{nil, {"--no-inprocess"}} {
		r := mustProbe(t, append(append([]string{"run"}, engine...), "--calls", "libc:fopen,libc:malloc", "--", exe)...)
		if got := callLines(r.stdout); strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("%v: calls\n%s\nwant\n%s", engine, strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	}
	r := mustProbe(t, "run", "--calls", "libc:fopen", "-c", "--", exe)
	if !regexp.MustCompile(`(?m)^ *[0-9.]+ +[0-9.]+ +\d+ +1 +1 fopen$`).MatchString(r.stdout) {
		t.Errorf("-c: want fopen with 1 call, 1 error:\n%s", r.stdout)
	}
}

// A printf-like function's arguments after its format, as the format
// says: strings, chars, doubles, widths from '*', integers and doubles
// past the argument registers (on the stack). They are read at a stop,
// in-process or not.
func TestCallsVarargs(t *testing.T) {
	t.Parallel()
	exe := builtOnce(t, "varargs", "testdata/tracers/varargs.c", "-O0", "-g")
	want := []string{
		`[pid N] printf("%s=%d %5.2f %c %lu %x %hhd%%\n", "k", -3, 2.5, 'z', 7, 0xff, 44) = 22`,
		`[pid N] snprintf(0xADDR, 64, "%*d|%.3s|%g", 4, 42, "abcdef", -0.125) = 15`,
		`[pid N] fprintf(0xADDR, "%s %p\n", "  42|abc|-0.125", 0x1234) = 23`,
		`[pid N] printf("%d %d %d %d %d %d %d %d\n", 1, 2, 3, 4, 5, 6, 7, 8) = 16`,
		`[pid N] printf("%g %g %g %g %g %g %g %g %g %g\n", 1, 2, 3, 4, 5, 6, 7, 8, 9.5, 10.5) = 25`,
		`[pid N] printf("%o %lo %#o\n", 0755, 01777, 010) = 13`, // octal, as C writes it
	}
	for _, engine := range [][]string{nil, {"--no-inprocess"}} {
		out := filepath.Join(t.TempDir(), "calls")
		r := mustProbe(t, append(append([]string{"run", "-o", out}, engine...), "--calls", "libc:printf,libc:snprintf,libc:fprintf", "--", exe)...)
		if r.stdout != "k=-3  2.50 z 7 ff 44%\n1 2 3 4 5 6 7 8\n1 2 3 4 5 6 7 8 9.5 10.5\n755 1777 010\n" || r.stderr != "  42|abc|-0.125 0x1234\n" {
			t.Errorf("%v: the program's output changed:\n%v", engine, r)
		}
		if got := callLines(readFile(t, out)); strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("%v: calls\n%s\nwant\n%s", engine, strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	}
}

// TestCallsSyscallWrappers: glibc's assembly wrappers of system calls
// show their parameters and results by the table (they showed
// "umask() = <void>"), a mode in octal.
func TestCallsSyscallWrappers(t *testing.T) {
	t.Parallel()
	exe := builtOnce(t, "wrappers", "testdata/tracers/wrappers.c", "-O2", "-g")
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^Umask:\s*(\d+)$`).FindSubmatch(status)
	if m == nil {
		t.Fatalf("no Umask in /proc/self/status:\n%s", status)
	}
	old, _ := strconv.ParseUint(string(m[1]), 8, 32)
	uid, euid := os.Getuid(), os.Geteuid()
	want := []string{
		fmt.Sprintf("[pid N] umask(027) = %#o", old),
		fmt.Sprintf("[pid N] umask(%#o) = 027", old),
		fmt.Sprintf("[pid N] getuid() = %d", uid),
		fmt.Sprintf("[pid N] geteuid() = %d", euid),
	}
	for _, engine := range [][]string{nil, {"--no-inprocess"}} {
		out := filepath.Join(t.TempDir(), "calls")
		r := mustProbe(t, append(append([]string{"run", "-o", out}, engine...), "--calls", "libc:umask,libc:getuid,libc:geteuid", "--", exe)...)
		if want := fmt.Sprintf("%d %d\n", uid, euid); r.stdout != want {
			t.Errorf("%v: the program printed %q, want %q", engine, r.stdout, want)
		}
		if got := callLines(readFile(t, out)); strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("%v: calls\n%s\nwant\n%s", engine, strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	}
}

// TestCallsNames: a call is named as the program made it, by the import
// its PLT entry (or, built with -fno-plt, its GOT slot) is for, as ltrace
// names it: not by the name the C library's symbol table prefers for the
// address (index for strchr, bcmp for memcmp, getc for fgetc), nor by the
// function whose implementation an IFUNC picked (memmove's for memcpy on
// x86-64); and each name selects its function. The table's characters
// and signals by name.
func TestCallsNames(t *testing.T) {
	t.Parallel()
	want := []string{
		"[pid N] memcpy(0xADDR, 0xADDR, 9) = 0xADDR",
		"[pid N] memmove(0xADDR, 0xADDR, 8) = 0xADDR",
		"[pid N] memcmp(0xADDR, 0xADDR, 9) = 1",
		`[pid N] strchr("abcdefgh", 'd') = 0xADDR`,
		`[pid N] strrchr("abcdefgh", 'e') = 0xADDR`,
		"[pid N] fgetc(0xADDR) = 120",
		"[pid N] memset(0xADDR, 'z', 2) = 0xADDR",
		"[pid N] signal(SIGUSR1, 0x1) = 0x0",
		"[pid N] gettimeofday(0xADDR, 0x0) = 0",
	}
	named := "libc:memcpy,libc:memmove,libc:memcmp,libc:strchr,libc:strrchr,libc:fgetc,libc:memset,libc:signal,libc:gettimeofday"
	variants := [][]string{{"-O0"}, {"-O0", "-fno-plt"}}
	exes := map[int]string{} // (both built before either runs: the arm64 guest's fixtures are built by a host run that stops at its first exec)
	for i, flags := range variants {
		exes[i] = builtOnce(t, "aliases"+strings.Join(flags, ""), filepath.Join("testdata", "tracers", "aliases.c"), flags...)
	}
	for i, flags := range variants {
		exe := exes[i]
		want, named, note := want, named, "functions not traced"
		if len(flags) > 1 {
			// Without a PLT entry, nothing of the program's own
			// sees its calls of a function in the vDSO (glibc's
			// gettimeofday is an IFUNC that picks it, on both).
			want, named = want[:len(want)-1], strings.TrimSuffix(named, ",libc:gettimeofday")
			note = "\n# 1 functions not traced: gettimeofday (an IFUNC: its resolver runs once at load, and no GOT slot of its module says what it picked)\n"
		}
		for _, run := range [][]string{{"--calls", named}, {"--no-inprocess", "--calls", named}, {"--calls", "libc:*"}} {
			if run[1] == "libc:*" && runtime.GOARCH == "arm64" {
				continue // (all of libc under TCG: see TestCalls)
			}
			r := runCmdStdin(t, nil, []byte("x\n"), probeBin, append(append([]string{"run"}, run...), "--", exe)...)
			if r.code != 0 || !strings.HasPrefix(r.stdout, "aabcdefgh 1 3 4 x\n") && !strings.Contains(r.stdout, "\naabcdefgh 1 3 4 x\n") {
				t.Fatalf("%v %v: want exit 0 and the program's output; got %v", flags, run, r)
			}
			var got []string
			for _, l := range callLines(r.stdout) {
				if !strings.Contains(l, "printf(") && !strings.Contains(l, "wait(") && !strings.Contains(l, "fork(") {
					got = append(got, l)
				}
			}
			if strings.Join(got, "\n") != strings.Join(want, "\n") {
				t.Errorf("%v %v: calls\n%s\nwant\n%s", flags, run, strings.Join(got, "\n"), strings.Join(want, "\n"))
			}
			// The program's calls that go unseen, and only those (not
			// libc's own functions that could not be hooked): none
			// but gettimeofday's without a PLT.
			if unseen := len(flags) > 1; run[1] == "libc:*" && strings.Contains(r.stdout, note) != unseen {
				t.Errorf("%v %v: want the note %q %v:\n%s", flags, run, note, unseen, r.stdout)
			}
		}
		r := runCmdStdin(t, nil, []byte("x\n"), probeBin, "run", "-c", "--calls", named, "--", exe)
		for _, fn := range strings.Split(strings.ReplaceAll(named, "libc:", ""), ",") {
			if !regexp.MustCompile(`(?m) 1 +0 ` + fn + `$`).MatchString(r.stdout) {
				t.Errorf("%v -c: no row of 1 call of %s:\n%s", flags, fn, r.stdout)
			}
		}
	}
}

// TestCallsUnknown: a function with no DWARF and no prototype shows its
// arguments as unknown and its result register in hex, as it may be
// anything: not as "f() = <void>", which would say it takes and returns
// nothing.
func TestCallsUnknown(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := build(dir, "gcc", "-O1", "-shared", "-fPIC", "-o", filepath.Join(dir, "libmystery.so"), filepath.Join(repoRoot, "integration", "testdata", "tracers", "mystery.c")); err != nil {
		t.Fatal(err)
	}
	exe := filepath.Join(dir, "mysterymain")
	if err := build(dir, "gcc", "-O0", "-o", exe, filepath.Join(repoRoot, "integration", "testdata", "tracers", "mysterymain.c"), "-L"+dir, "-lmystery", "-Wl,-rpath,"+dir); err != nil {
		t.Fatal(err)
	}
	for _, engine := range [][]string{nil, {"--no-inprocess"}} {
		r := mustProbe(t, append(append([]string{"run"}, engine...), "--calls", "libmystery:*", "--", exe)...)
		if got, want := strings.Join(callLines(r.stdout), "\n"), "[pid N] mystery(?) = 0x7"; got != want || !strings.Contains(r.stdout, "\n7\n") && !strings.HasPrefix(r.stdout, "7\n") {
			t.Errorf("%v: calls %q, want %q; output %q", engine, got, want, r.stdout)
		}
	}
}

// hookedFunctions reads how many functions -v's note says the function
// tracer hooked: in the tracee, and stopping the thread.
func hookedFunctions(t *testing.T, stderr string) int {
	t.Helper()
	m := regexp.MustCompile(`function tracer: (\d+) functions in-process(?:, (\d+) stop the thread)?`).FindStringSubmatch(stderr)
	if m == nil {
		t.Fatalf("no function tracer note in:\n%s", stderr)
	}
	in, _ := strconv.Atoi(m[1])
	stop, _ := strconv.Atoi(m[2])
	return in + stop
}

// TestCallsTailCall: a call the program makes through its PLT is shown
// whatever its return address: a qsort comparator's tail call, `jmp
// strcmp@plt`, returns into qsort (before, --calls showed none of them,
// ltrace all). One line each, as many as the program counted, with its
// words; inside qsort's, as ltrace nests them.
func TestCallsTailCall(t *testing.T) {
	t.Parallel()
	exe := builtOnce(t, "tailcmp", filepath.Join("testdata", "tracers", "tailcmp.c"), "-O2", "-g")
	glob := "libc:*"
	if runtime.GOARCH == "arm64" {
		glob = "libc:qsort,libc:strcmp,libc:printf" // (libc's DWARF: a minute under TCG)
	}
	line := regexp.MustCompile(`^\[pid N\] strcmp\("(pear|apple|fig|kiwi|plum)", "(pear|apple|fig|kiwi|plum)"\) = -?\d+$`)
	for _, engine := range [][]string{nil, {"--no-inprocess"}} {
		r := mustProbe(t, append(append([]string{"run"}, engine...), "--calls", glob, "--", exe)...)
		m := regexp.MustCompile(`(?m)^apple plum (\d+)$`).FindStringSubmatch(r.stdout)
		if m == nil {
			t.Fatalf("%v: the program's output is missing:\n%s", engine, r.stdout)
		}
		lines := callLines(r.stdout)
		var cmps []string
		for _, l := range lines {
			if strings.Contains(l, "strcmp") {
				if !line.MatchString(l) {
					t.Errorf("%v: %q is not a strcmp of two of the words", engine, l)
				}
				cmps = append(cmps, l)
			}
		}
		if n := strconv.Itoa(len(cmps)); n != m[1] || len(lines) != len(cmps)+3 ||
			lines[0] != "[pid N] qsort(0xADDR, 5, 8, 0xADDR <unfinished ...>" || lines[len(lines)-2] != "[pid N] <... qsort resumed> = <void>" {
			t.Errorf("%v: %s strcmp lines inside qsort's, want the %s the program counted:\n%s", engine, n, m[1], strings.Join(lines, "\n"))
		}
	}
	// A function of the program's own, named (ltrace -x): every call,
	// qsort's of it too, inside qsort's.
	r := mustProbe(t, "run", "--calls", "libc:qsort,tailcmp:cmp", "--", exe)
	m := regexp.MustCompile(`(?m)^apple plum (\d+)$`).FindStringSubmatch(r.stdout)
	lines := callLines(r.stdout)
	own := regexp.MustCompile(`^\[pid N\] cmp\(0xADDR, 0xADDR\) = -?\d+$`)
	n := 0
	for _, l := range lines {
		if own.MatchString(l) {
			n++
		}
	}
	if m == nil || strconv.Itoa(n) != m[1] || len(lines) != n+2 || lines[0] != "[pid N] qsort(0xADDR, 5, 8, 0xADDR <unfinished ...>" {
		t.Errorf("--calls tailcmp:cmp: %d cmp lines inside qsort's, want the program's count:\n%s", n, r.stdout)
	}

	// ltrace's times: -ttt's seconds since the epoch within the run, at
	// the start of each line, and -T's time in the call at the end of
	// each line with a result.
	before := time.Now()
	r = mustProbe(t, "run", "-ttt", "-T", "--calls", glob, "--", exe)
	after := time.Now()
	stamped := regexp.MustCompile(`^\[pid \d+\] (\d+\.\d{6}) (\S+)`)
	timed := regexp.MustCompile(` = .* <\d+\.\d{6}>$`)
	n = 0
	for _, l := range strings.Split(r.stdout, "\n") {
		if !strings.HasPrefix(l, "[pid ") {
			continue
		}
		n++
		m := stamped.FindStringSubmatch(l)
		if m == nil {
			t.Errorf("-ttt: no time at the start of %q", l)
			continue
		}
		if sec, _ := strconv.ParseFloat(m[1], 64); sec < float64(before.UnixMicro())/1e6-0.001 || sec > float64(after.UnixMicro())/1e6 {
			t.Errorf("-ttt: %s is not in the run, %v to %v: %q", m[1], before, after, l)
		}
		if returned := strings.Contains(l, " = ") && !strings.Contains(l, "<no return"); returned != timed.MatchString(l) {
			t.Errorf("-T: %q: a result and no time, or a time and no result", l)
		}
	}
	if n < 9 {
		t.Errorf("-ttt -T: %d call lines:\n%s", n, r.stdout)
	}
}

// TestCallsLtrace: ltrace itself is the oracle: the calls --calls
// 'libc:*' shows are the ones ltrace shows, in the same order, and for
// tailcmp's (strcmp through a tail call inside qsort, printf's format)
// the same lines, arguments and results, with -s 32 as ltrace's.
func TestCallsLtrace(t *testing.T) {
	t.Parallel()
	ltrace, err := exec.LookPath("ltrace")
	if err != nil {
		t.Fatalf("ltrace is not installed (apt-get install ltrace; .ci/run does): %v", err)
	}
	// ltrace's line as probe's: no pid, one space before " = ",
	// addresses 0xADDR, "<... f resumed> )" without its ")".
	norm := func(lines []string) []string {
		pad := regexp.MustCompile(`\s+= `)
		addr := regexp.MustCompile(`0x[0-9a-f]{5,}`)
		var out []string
		for _, l := range lines {
			if l == "" || strings.HasPrefix(l, "+++ ") || strings.Contains(l, "__libc_start_main") || strings.Contains(l, "__cxa_finalize") {
				continue
			}
			l = strings.TrimPrefix(l, "[pid N] ")
			l = strings.Replace(l, " resumed> )", " resumed>", 1)
			out = append(out, addr.ReplaceAllString(pad.ReplaceAllString(l, " = "), "0xADDR"))
		}
		return out
	}
	name := regexp.MustCompile(`^(?:<\.\.\. )?([A-Za-z_0-9]+)`)
	names := func(lines []string) []string {
		var out []string
		for _, l := range lines {
			out = append(out, name.FindString(l))
		}
		return out
	}
	for _, c := range []struct {
		exe   string
		whole bool // the lines too, not only the calls' names
	}{
		{builtOnce(t, "tailcmp", filepath.Join("testdata", "tracers", "tailcmp.c"), "-O2", "-g"), true},
		{tracerBin(t, "libcalls"), false}, // (ltrace types open's flags and atoi's argument otherwise)
	} {
		out := filepath.Join(t.TempDir(), "ltrace")
		if b, err := exec.Command(ltrace, "-s", "32", "-o", out, c.exe).CombinedOutput(); err != nil {
			t.Fatalf("ltrace %s: %v\n%s", c.exe, err, b)
		}
		b, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		want := norm(strings.Split(string(b), "\n"))
		got := norm(callLines(mustProbe(t, "run", "-s", "32", "--calls", "libc:*", "--", c.exe).stdout))
		if len(want) == 0 || strings.Join(names(got), " ") != strings.Join(names(want), " ") {
			t.Errorf("%s: calls\n%s\nltrace's\n%s", filepath.Base(c.exe), strings.Join(got, "\n"), strings.Join(want, "\n"))
		} else if c.whole && strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("%s: lines\n%s\nltrace's\n%s", filepath.Base(c.exe), strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	}
}

// TestCallsTerminalOrder: where the trace and the program write to one
// terminal, their lines come out in the order they happened, as under
// ltrace: each printf's line, then the call's (its return comes after
// its write), whether its calls are recorded in-process or stop the
// thread. (script(1) gives both a terminal.)
func TestCallsTerminalOrder(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("script"); err != nil {
		t.Fatal("script(1) is needed (util-linux)")
	}
	exe := builtOnce(t, "order", filepath.Join("testdata", "tracers", "order.c"), "-O2", "-g")
	var want []string
	for i := range 5 {
		want = append(want, fmt.Sprintf("strlen(\"word%d\") = 5", i), fmt.Sprintf("line %d", 5+i), fmt.Sprintf("printf(\"line %%zu\\n\", %d) = 7", 5+i))
	}
	for _, engine := range []string{"", "--no-inprocess "} {
		cmd := exec.Command("script", "-qfec", fmt.Sprintf("%s run %s--calls 'libc:strlen,libc:printf' -- %s", probeBin, engine, exe), "/dev/null")
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("%s: %v\n%s", engine, err, out)
		}
		var got []string
		for _, l := range strings.Split(strings.ReplaceAll(string(out), "\r", ""), "\n") {
			l = regexp.MustCompile(`^\[pid \d+\] `).ReplaceAllString(l, "")
			l = regexp.MustCompile(` +=`).ReplaceAllString(l, " =")
			if strings.HasPrefix(l, "strlen") || strings.HasPrefix(l, "printf") || strings.HasPrefix(l, "line") {
				got = append(got, l)
			}
		}
		if !slices.Equal(got, want) {
			t.Errorf("%son a terminal:\n%s\nwant\n%s", engine, strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	}
}

// TestCallsSyscalls: -S shows the system calls among the library calls,
// as ltrace -S: each its line, SYS_NAME, its arguments typed as the C
// library's function of that name (openat's flags by name, its path as
// text), a failure as -1 and its errno; a call's own system calls
// inside its line, cut as ltrace cuts it; in-process and stopping alike.
// With -L, the system calls alone; -S without --calls or -L, and -L
// without -S or with --calls, are bad input.
func TestCallsSyscalls(t *testing.T) {
	t.Parallel()
	exe := lifecycleBin(t, "syscalls", o2pie)
	dir := t.TempDir()
	present, missing := filepath.Join(dir, "present"), filepath.Join(dir, "missing")
	if err := os.WriteFile(present, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	open := "SYS_open("
	if runtime.GOARCH == "arm64" {
		open = "SYS_openat(-100," // (no raw open: the program's raw openat)
	}
	want := []string{
		fmt.Sprintf(`[pid N] open("%s", O_RDONLY <unfinished ...>`, present),
		fmt.Sprintf(`[pid N] SYS_openat(-100, "%s", O_RDONLY) = 3`, present),
		`[pid N] <... open resumed> = 3`,
		fmt.Sprintf(`[pid N] open("%s", O_RDONLY <unfinished ...>`, missing),
		fmt.Sprintf(`[pid N] SYS_openat(-100, "%s", O_RDONLY) = -1 ENOENT (No such file or directory)`, missing),
		`[pid N] <... open resumed> = -1 ENOENT (No such file or directory)`,
	}
	for _, engine := range [][]string{nil, {"--no-inprocess"}} {
		r := mustProbe(t, append(append([]string{"run"}, engine...), "--calls", "libc:open", "-S", "--", exe, present, missing)...)
		var got []string
		raw := ""
		for _, l := range callLines(r.stdout) {
			switch {
			case strings.HasPrefix(l, "[pid N] "+open) && strings.Contains(l, "O_CLOEXEC"):
				raw = l // (glibc's open passes O_RDONLY alone)
			case strings.Contains(l, dir) || strings.Contains(l, "open resumed"):
				got = append(got, l)
			}
		}
		// The raw system call, after glibc's two.
		if len(got) > 0 && raw != "" && slices.Index(callLines(r.stdout), raw) < slices.Index(callLines(r.stdout), got[len(got)-1]) {
			t.Errorf("%v: the raw call %q before open's", engine, raw)
		}
		if !slices.Equal(got, want) || !strings.Contains(raw, present) || !strings.HasSuffix(raw, " = 4") {
			t.Errorf("%v: -S lines\n%s\nraw %q\nwant\n%s", engine, strings.Join(got, "\n"), raw, strings.Join(want, "\n"))
		}
		// System calls the C library has no function of: typed by
		// the table of system calls.
		lines := callLines(r.stdout)
		for _, want := range []string{"[pid N] SYS_ioctl(-1, 0x5401, 0x0) = -1 EBADF (Bad file descriptor)", "[pid N] SYS_exit_group(0 <no return ...>"} {
			if !slices.Contains(lines, want) {
				t.Errorf("%v: no line %q:\n%s", engine, want, r.stdout)
			}
		}
	}
	// -L: the system calls alone.
	r := mustProbe(t, "run", "-S", "-L", "--", exe, present, missing)
	var sys []string
	for _, l := range callLines(r.stdout) {
		if !strings.HasPrefix(l, "[pid N] SYS_") {
			t.Errorf("-S -L: %q", l)
		}
		if strings.Contains(l, dir) {
			sys = append(sys, l)
		}
	}
	if len(sys) != 3 || sys[0] != want[1] || sys[1] != want[4] || !strings.Contains(sys[2], "O_CLOEXEC") {
		t.Errorf("-S -L: %q", sys)
	}
	for _, args := range [][]string{{"-S"}, {"-L"}, {"-L", "-S", "--calls", "libc:open"}} {
		if r := probe(t, append(append([]string{"run"}, args...), "--", exe, present, missing)...); r.code != 2 || !strings.Contains(r.stderr, "-S needs --calls") && !strings.Contains(r.stderr, "-L: no library calls") {
			t.Errorf("%v: %v", args, r)
		}
	}
}

// TestCallsFilledBuffers: a buffer the call fills is shown as it holds
// it at the return, as ltrace shows it: read's bytes (as many as it
// read), fgets' line, and at the end of the file (NULL) the pointer;
// stopping or recording in-process alike (these stop at their entry to
// hook their return).
func TestCallsFilledBuffers(t *testing.T) {
	t.Parallel()
	exe := builtOnce(t, "filled", filepath.Join("testdata", "tracers", "filled.c"), "-O2", "-g")
	in := filepath.Join(t.TempDir(), "in.txt")
	if err := os.WriteFile(in, []byte("hello\nworld\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	want := []string{
		`[pid N] read(3, "hello\nworld\n", 64) = 12`,
		`[pid N] fgets("hello\n", 32, 0xADDR) = 0xADDR`,
		`[pid N] fgets("world\n", 32, 0xADDR) = 0xADDR`,
		`[pid N] fgets(0xADDR, 32, 0xADDR) = 0x0`,
	}
	for _, engine := range [][]string{nil, {"--no-inprocess"}} {
		r := mustProbe(t, append(append([]string{"run"}, engine...), "--calls", "libc:read,libc:fgets", "--", exe, in)...)
		if got := callLines(r.stdout); !slices.Equal(got, want) || !strings.Contains(r.stdout, "12 1 1\n") {
			t.Errorf("%v:\n%s\nwant\n%s", engine, strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	}
}

// TestCallsArrays: what pipe and socketpair fill is shown at their
// return, two descriptors; execv's argv as its strings, four of them by
// default and -A's number, as ltrace's -A; both engines.
func TestCallsArrays(t *testing.T) {
	t.Parallel()
	exe := builtOnce(t, "arrays", filepath.Join("testdata", "tracers", "arrays.c"), "-O2", "-g")
	for _, tc := range []struct {
		flags []string
		argv  string
	}{
		{nil, `["echo", "one", "two", "three", ...]`},
		{[]string{"-A", "2"}, `["echo", "one", ...]`},
		{[]string{"-A", "6"}, `["echo", "one", "two", "three", "four", "five"]`},
	} {
		want := []string{
			`[pid N] pipe([3, 4]) = 0`,
			`[pid N] socketpair(1, 1, 0, [5, 6]) = 0`,
			`[pid N] execv("/bin/echo", ` + tc.argv + `) = <no return ...>`,
		}
		for _, engine := range [][]string{nil, {"--no-inprocess"}} {
			args := append(append(append([]string{"run"}, engine...), tc.flags...), "--calls", "libc:pipe,libc:socketpair,libc:execv", "--", exe)
			r := mustProbe(t, args...)
			if got := callLines(r.stdout); !slices.Equal(got, want) || !strings.Contains(r.stdout, "one two three four five\n") {
				t.Errorf("%v:\n%s\nwant\n%s", args, r.stdout, strings.Join(want, "\n"))
			}
		}
	}
	if r := probe(t, "run", "--calls", "libc:pipe", "-A", "-1", "--", exe); r.code != 2 || r.stderr != "probe: -A -1: want at least 1 element\n" {
		t.Errorf("-A -1: %v", r)
	}
}
