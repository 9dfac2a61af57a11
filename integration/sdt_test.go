package integration

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Static probes (sdt:PROVIDER:NAME), from <sys/sdt.h> notes:
// integration/testdata/sdt.

// sdtHeader is where the host's <sys/sdt.h> is (systemtap-sdt-dev):
// searched last, so that the arm64 cross compiler, whose own tree has
// none, finds it there and nothing else of the host's.
const sdtHeader = "-idirafter/usr/include/x86_64-linux-gnu"

// sdtBins builds the sdt program in two ways (-O0 without PIE, -O2 with)
// and its library beside them.
func sdtBins(t *testing.T) []string {
	t.Helper()
	src := filepath.Join("testdata", "sdt")
	builtOnceBy(t, "libsdtlib.so", func(lib string) error {
		abs, _ := filepath.Abs(filepath.Join(src, "sdtlib.c"))
		return build(binDir, "gcc", "-O2", "-g", sdtHeader, "-shared", "-fPIC", "-o", lib, abs)
	})
	return []string{
		builtOnce(t, "sdt_O0_nopie", filepath.Join(src, "sdt.c"), "-O0", "-g", sdtHeader, "-fno-pie", "-no-pie"),
		builtOnce(t, "sdt_O2_pie", filepath.Join(src, "sdt.c"), "-O2", "-g", sdtHeader, "-fpie", "-pie"),
	}
}

// sdtLine matches a hit's line: the event and its fields.
var sdtLine = regexp.MustCompile(`^ +sdt_\S+-\d+ +\[\d+\] +[\d.]+: (\w+): \((\S+)\)(.*)$`)

// sdtHits are the event and fields of the hits in out, in order.
func sdtHits(out string) []string {
	var hits []string
	for line := range strings.SplitSeq(out, "\n") {
		if m := sdtLine.FindStringSubmatch(line); m != nil {
			hits = append(hits, m[1]+m[3])
		}
	}
	return hits
}

// TestSDT: every probe of the program (sdt:demo:*) fires at its site
// with the note's arguments as arg1..argN, typed by their size and sign;
// a probe behind a semaphore runs because the tracer raised it (the
// program counts its runs: 0 untraced); $argN in fetch-args, filters and
// actions; a library's probe waits for the library's dlopen.
func TestSDT(t *testing.T) {
	t.Parallel()
	// (Every build first: the arm64 guest's are made on the host, by a
	// run that cannot run them.)
	bins := sdtBins(t)
	stripped := builtOnce(t, "sdt_O2_stripped", filepath.Join("testdata", "sdt", "sdt.c"), "-O2", "-g0", "-s", sdtHeader)
	for _, exe := range bins {
		name := filepath.Base(exe)
		if r := runCmd(t, nil, exe, "3"); r.stdout != "sum=3 gated=0\n" {
			t.Fatalf("%s untraced: %v", name, r)
		}
		r := mustProbe(t, "run", "sdt:demo:*", "--", exe, "3")
		want := []string{"tick arg1=0 arg2=0", "gated arg1=0", "tick arg1=1 arg2=-1", "gated arg1=1",
			"tick arg1=2 arg2=-2", "gated arg1=2", "done arg1=3"}
		if got := sdtHits(r.stdout); strings.Join(got, "\n") != strings.Join(want, "\n") || !strings.Contains(r.stdout, "sum=3 gated=3\n") {
			t.Errorf("%s: sdt:demo:*:\n%s\nwant the hits\n%s\nand gated=3", name, r.stdout, strings.Join(want, "\n"))
		}
		// Recorded (raw, where they record in the tracee) and reported:
		// the same hits, the same fields.
		rec := filepath.Join(t.TempDir(), "sdt.rec")
		mustProbe(t, "record", "-o", rec, "sdt:demo:*", "--", exe, "3")
		if got := sdtHits(mustProbe(t, "report", rec).stdout); strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("%s: recorded and reported:\n%s\nwant\n%s", name, strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
		// Inside a function, recorded in the tracee: every hit, its
		// arguments read where the note says (-O0: in the leaf's red
		// zone, which the record must leave as it is), the program's
		// sum right.
		r = mustProbe(t, "run", "-v", "sdt:demo:tick i=$arg1 => sum:i", "--", exe, "20000")
		if !strings.Contains(r.stderr, "probe: sdt_demo/tick: in-process") || !strings.Contains(r.stdout, "sum=199990000 gated=0\n") ||
			!strings.Contains(r.stdout, "# sum:i of sdt_demo/tick: 20000 values, 1 key\ntotal    199990000\n") {
			t.Errorf("%s: in-process:\n%v", name, r)
		}
		// A fork child: untraced (no -f), its copy of the semaphore is
		// put back and it computes as untraced; followed (-f), it is
		// probed as its parent is.
		r = mustProbe(t, "run", "sdt:demo:gated => count", "--", exe, "fork", "3")
		if !strings.Contains(r.stdout, "child gated=0\nparent gated=3\n") || !strings.Contains(r.stdout, "# count of sdt_demo/gated: 3 hits") {
			t.Errorf("%s: fork, not followed:\n%v", name, r)
		}
		r = mustProbe(t, "run", "-f", "sdt:demo:gated => count", "--", exe, "fork", "3")
		if !strings.Contains(r.stdout, "child gated=3\nparent gated=3\n") || !strings.Contains(r.stdout, "# count of sdt_demo/gated: 6 hits") {
			t.Errorf("%s: fork, followed:\n%v", name, r)
		}
		// One probe, two sites, its argument in another place at each:
		// each site reads its own.
		r = mustProbe(t, "run", "sdt:demo:twice x=$arg1", "--", exe, "twice", "3")
		if got := strings.Join(sdtHits(r.stdout), ","); got != "twice x=100,twice x=0,twice x=101,twice x=1,twice x=102,twice x=2" || !strings.Contains(r.stdout, "twice=309\n") {
			t.Errorf("%s: two sites:\n%v", name, r)
		}
		r = mustProbe(t, "run", "sdt:demo:tick i=$arg1 n=$arg2:s8 if i > 7 => count:n", "--", exe, "10")
		if !strings.Contains(r.stdout, "# count:n of sdt_demo/tick: 2 hits, 2 keys\n") || !strings.Contains(r.stdout, "\nn=-8 ") || !strings.Contains(r.stdout, "\nn=-9 ") {
			t.Errorf("%s: $argN by name, typed, filtered, counted:\n%s", name, r.stdout)
		}
	}
	// Stripped: the site's function known from its FDE alone, named by
	// its address; jump-optimised and recorded in the tracee all the
	// same.
	r := mustProbe(t, "run", "-v", "sdt:demo:tick", "--", stripped, "2")
	if !strings.Contains(r.stderr, "probe: sdt_demo/tick: in-process") ||
		!regexp.MustCompile(`\n +sdt_O2_stripped-\d+ +\[\d+\] +[\d.]+: tick: \(0x[0-9a-f]+\+0x[0-9a-f]+/0x[0-9a-f]+\) arg1=1 arg2=-1\n`).MatchString(r.stdout) {
		t.Errorf("stripped:\n%v", r)
	}
	// A library's probe, before its dlopen: pending, then at each call.
	exe := sdtBins(t)[1]
	lib := filepath.Join(filepath.Dir(exe), "libsdtlib.so")
	r = mustProbe(t, "run", "sdt:"+lib+":demolib:hit i=$arg1", "--", exe, "lib", "3")
	if got := sdtHits(r.stdout); strings.Join(got, ",") != "hit i=0,hit i=1,hit i=2" || !strings.Contains(r.stdout, "libsum=6\n") {
		t.Errorf("a dlopened library's probe:\n%v", r)
	}
}

// TestSDTList: probe list BINARY 'sdt:*' lists each probe's site, its
// semaphore, its module and its arguments as the note spells them.
func TestSDTList(t *testing.T) {
	t.Parallel()
	exe := sdtBins(t)[1]
	r := mustProbe(t, "list", exe, "sdt:*")
	want := regexp.MustCompile(`^0x[0-9a-f]{16} 0x[0-9a-f]+ sdt_O2_pie sdt:demo:done -8@.+
0x[0-9a-f]{16} 0x[0-9a-f]+ sdt_O2_pie sdt:demo:gated -8@\S+
0x[0-9a-f]{16} 0x[0-9a-f]+ sdt_O2_pie sdt:demo:tick -8@\S+ -4@\S+
0x[0-9a-f]{16} (0x[0-9a-f]+) sdt_O2_pie sdt:demo:twice -8@\S+
0x[0-9a-f]{16} (0x[0-9a-f]+) sdt_O2_pie sdt:demo:twice -8@\S+
$`)
	if !want.MatchString(r.stdout) {
		t.Errorf("list sdt:*:\n%s", r.stdout)
	}
	r = mustProbe(t, "list", filepath.Join(filepath.Dir(exe), "libsdtlib.so"), "sdt:demolib")
	if !regexp.MustCompile(`^0x[0-9a-f]{16} - libsdtlib.so sdt:demolib:hit -8@\S+\n$`).MatchString(r.stdout) {
		t.Errorf("list sdt:demolib (no semaphore):\n%s", r.stdout)
	}
}

// TestSDTBadInput: a probe that is not there (the list of those that
// are), a $argN past the probe's, a glob matching nothing, a malformed
// spec: exit 2, one line, the program not run.
func TestSDTBadInput(t *testing.T) {
	t.Parallel()
	exe := sdtBins(t)[1]
	for _, tc := range []struct{ spec, want string }{
		{"sdt:demo:nosuch", `probe: sdt:demo:nosuch: no such SDT probe in any module (it has demo:done, demo:gated, demo:tick, demo:twice)`},
		{"sdt:demo:tick x=$arg9", `probe: sdt:demo:tick: $arg9: the probe has 2 arguments`},
		{"sdt:nosuch:*", `probe: sdt:nosuch:*: no SDT probe matches`},
		{"sdt:demo", `probe: bad probe "sdt:demo": "demo": want sdt:[MOD:]PROVIDER:NAME`},
	} {
		r := probe(t, "run", tc.spec, "--", exe, "3")
		if r.code != 2 || strings.TrimSuffix(r.stderr, "\n") != tc.want || strings.Count(r.stderr, "\n") != 1 || strings.Contains(r.stdout, "sum=") {
			t.Errorf("%s: %v\nwant exit 2 and %q", tc.spec, r, tc.want)
		}
	}
}

// TestSDTSemaphore: attached to a running program, a probe behind a
// semaphore raises it (the program sees 1 and runs the probe, as many
// times as it is counted) and puts it back to 0 at the detach; the
// program runs on and ends right.
func TestSDTSemaphore(t *testing.T) {
	t.Parallel()
	for _, exe := range sdtBins(t) {
		p := startPiped(t, nil, exe, "loop")
		p.waitStdout(t, "ready\n", 10*time.Second)
		pr := startProbe(t, "attach", "-v", "--duration", "1s", strconv.Itoa(p.pid()), "sdt:demo:gated => count")
		pr.waitStdout(t, "# tracer: nop\n", 20*time.Second)
		time.Sleep(300 * time.Millisecond)
		fmt.Fprintln(p.in)
		p.waitStdout(t, "sem=", 10*time.Second)
		r := pr.wait(t, 30*time.Second)
		m := regexp.MustCompile(`# count of sdt_demo/gated: (\d+) hits`).FindStringSubmatch(r.stdout)
		if r.code != 0 || m == nil || m[1] == "0" {
			t.Fatalf("%s: attach: %v", filepath.Base(exe), r)
		}
		waitUntraced(t, p.pid(), 10*time.Second)
		fmt.Fprintln(p.in)
		want := fmt.Sprintf("sem=0 gated=%s\n", m[1])
		p.waitStdout(t, want, 10*time.Second)
		if !strings.Contains(p.stdout.String(), "ready\nsem=1 gated=") {
			t.Errorf("%s: while attached the program saw %q, want sem=1", filepath.Base(exe), p.stdout.String())
		}
		p.in.Close()
		if res := p.wait(t, cmdTimeout); res.code != 0 || !strings.HasSuffix(res.stdout, " gated="+m[1]+"\n") {
			t.Errorf("%s: after the detach: %v", filepath.Base(exe), res)
		}
	}
}

// TestSDTLibstdcxx: libstdc++'s own static probes, libstdcxx:throw and
// libstdcxx:catch, fire once per exception a C++ program throws and
// catches.
func TestSDTLibstdcxx(t *testing.T) {
	t.Parallel()
	exe := builtOnceBy(t, "sdt_throw", func(exe string) error {
		abs, _ := filepath.Abs(filepath.Join("testdata", "sdt", "throw.cc"))
		return build(binDir, "g++", "-O2", "-g", "-o", exe, abs)
	})
	r := mustProbe(t, "run", "sdt:libstdcxx:throw => count", "sdt:libstdcxx:catch => count", "--", exe, "7")
	for _, want := range []string{"caught=7\n", "# count of sdt_libstdcxx/throw: 7 hits", "# count of sdt_libstdcxx/catch: 7 hits"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("want %q in\n%s", want, r.stdout)
		}
	}
}

// TestSDTPython: Debian's python3.11's function__return probe (behind a
// semaphore) fires once per call of a Python function, named by its
// second argument, a string: the script's leaf and key as often as it
// calls them. (Its function__entry fires only for frames entered from C
// in 3.11: CPython's issue gh-98894.)
func TestSDTPython(t *testing.T) {
	t.Parallel()
	py := "/usr/bin/python3.11"
	script := filepath.Join(t.TempDir(), "calls.py")
	mustWrite(t, script, "def leaf(x):\n    return x + 1\ndef key(x):\n    return -x\nr = list(map(leaf, range(7)))\ns = sorted(range(5), key=key)\nprint(sum(r), s)\n")
	r := mustProbe(t, "run", "sdt:python:function__return f=$arg2:string => count:f", "--", py, script)
	for _, want := range []string{"28 [4, 3, 2, 1, 0]\n", "\nf=\"leaf\" ", "\nf=\"key\" "} {
		if !strings.Contains(r.stdout, want) {
			t.Fatalf("want %q in\n%s", want, r.stdout)
		}
	}
	for fn, n := range map[string]int{"leaf": 7, "key": 5} {
		if !regexp.MustCompile(fmt.Sprintf(`\nf="%s" +%d \|`, fn, n)).MatchString(r.stdout) {
			t.Errorf("%s: want %d returns in\n%s", fn, n, r.stdout)
		}
	}
}

func mustWrite(t *testing.T, path, text string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestSDTPythonAttach: attached to a running python3.11, its
// function__return probe (behind a semaphore) counts the calls the
// program makes while attached; the semaphore, read from the process's
// memory, is 1 while attached and 0 again after the detach.
func TestSDTPythonAttach(t *testing.T) {
	t.Parallel()
	script := filepath.Join(t.TempDir(), "serve.py")
	mustWrite(t, script, "import sys\ndef leaf(x):\n    return x + 1\nprint('ready', flush=True)\nfor line in sys.stdin:\n    print(sum(map(leaf, range(int(line)))), flush=True)\n")
	p := startPiped(t, nil, "/usr/bin/python3.11", script)
	p.waitStdout(t, "ready\n", 20*time.Second)
	list := mustProbe(t, "list", strconv.Itoa(p.pid()), "sdt:python:function__return")
	f := strings.Fields(list.stdout)
	if len(f) < 2 {
		t.Fatalf("list: %v", list)
	}
	sem, err := strconv.ParseUint(f[1], 0, 64)
	if err != nil {
		t.Fatalf("list: the semaphore %q: %v", f[1], err)
	}
	semaphore := func() uint16 {
		t.Helper()
		mem, err := os.Open(fmt.Sprintf("/proc/%d/mem", p.pid()))
		if err != nil {
			t.Fatal(err)
		}
		defer mem.Close()
		var b [2]byte
		if _, err := mem.ReadAt(b[:], int64(sem)); err != nil {
			t.Fatal(err)
		}
		return uint16(b[0]) | uint16(b[1])<<8
	}
	if v := semaphore(); v != 0 {
		t.Fatalf("the semaphore is %d before the attach", v)
	}
	pr := startProbe(t, "attach", "-v", "--duration", "2s", strconv.Itoa(p.pid()), `sdt:python:function__return f=$arg2:string if f == "leaf" => count`)
	pr.waitStdout(t, "# tracer: nop\n", 20*time.Second)
	if v := semaphore(); v != 1 {
		t.Errorf("the semaphore is %d while attached, want 1", v)
	}
	fmt.Fprintln(p.in, 30)
	p.waitStdout(t, "465\n", 10*time.Second)
	fmt.Fprintln(p.in, 12)
	p.waitStdout(t, "78\n", 10*time.Second)
	r := pr.wait(t, 30*time.Second)
	if r.code != 0 || !strings.Contains(r.stdout, "# count of sdt_python/function__return: 42 hits") {
		t.Errorf("attach: %v\nwant 42 returns of leaf", r)
	}
	waitUntraced(t, p.pid(), 10*time.Second)
	if v := semaphore(); v != 0 {
		t.Errorf("the semaphore is %d after the detach, want 0", v)
	}
	fmt.Fprintln(p.in, 3)
	p.waitStdout(t, "78\n6\n", 10*time.Second) // (it runs on, untraced)
}

// TestSDTREPL: the REPL completes sdt:PROVIDER:NAME, adds it, and a glob
// adds a probe for each it matches; at the detach the semaphores are
// back down and the program ends right.
func TestSDTREPL(t *testing.T) {
	t.Parallel()
	exe := sdtBins(t)[1]
	p := startPiped(t, nil, exe, "loop")
	p.waitStdout(t, "ready\n", 10*time.Second)
	env := []string{"XDG_STATE_HOME=" + t.TempDir(), "HOME=" + t.TempDir()}
	r := startREPL(t, env, true, "attach", strconv.Itoa(p.pid()))
	io.WriteString(r.in, "add sdt:demo:ga\t\r")
	r.waitFor(t, `added gated\n`)
	io.WriteString(r.in, "add sdt:demo:t* => count\r")
	r.waitFor(t, `added tick\n`)
	r.send(t, "detach")
	if code := r.wait(t); code != 0 {
		t.Fatalf("probe: exit status %d, want 0; output:\n%s", code, limit(r.text()))
	}
	waitUntraced(t, p.pid(), 10*time.Second)
	fmt.Fprintln(p.in)
	p.waitStdout(t, "sem=0 gated=", 10*time.Second)
	p.in.Close()
	if res := p.wait(t, cmdTimeout); res.code != 0 {
		t.Errorf("after the detach: %v", res)
	}
}
