package integration

import (
	"bufio"
	"debug/elf"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/arch/x86/x86asm"
)

// TestBadInput is the one place that proves the bad-input rule of SPEC
// section 6: every rejected input ends probe with exit status 2, one line
// on stderr naming the bad token (and no panic), nothing on stdout, and
// the running tracee untouched: its mappings and the bytes of its code
// (and of its libraries' data) are what they were, no thread is traced
// or stopped afterwards, and it finishes its work correctly.
// permissionHint is what a refusal for want of permission advises: Yama's
// ptrace_scope is named only on a kernel that has Yama.
func permissionHint() string {
	if _, err := os.Stat("/proc/sys/kernel/yama/ptrace_scope"); err == nil {
		return "check /proc/sys/kernel/yama/ptrace_scope, or run with CAP_SYS_PTRACE"
	}
	return "run as its user, or with CAP_SYS_PTRACE"
}

func TestBadInput(t *testing.T) {
	spin := bin("spin", o0pie)
	s := startSpin(t, o0pie, 2, 60*time.Second)
	pid := strconv.Itoa(s.pid())
	dir := t.TempDir()

	badYAML := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(badYAML, []byte("probes:\n\t- at: work\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	unknownKey := filepath.Join(dir, "key.yaml")
	if err := os.WriteFile(unknownKey, []byte("probes:\n  - at: work\n    filter: i > 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	mid := midInstruction(t, spin, "work")
	sysOff := syscallOffset(t, libcPath, "syscall")

	type badCase struct {
		name string
		args []string // {pid} stands for the tracee's pid
		want string   // a regexp for the whole stderr line
		// run, if set, runs probe with args in the case's circumstances.
		run func(t *testing.T, args []string) result
	}
	q := regexp.QuoteMeta
	permissionHint := permissionHint()
	cases := []badCase{
		// Malformed specs.
		{"unknown probe type", []string{"{pid}", "q:work"}, q(`probe: bad probe "q:work": "q": unknown probe type (want p:, r:, o:, sdt: or -:)`), nil},
		{"empty location", []string{"{pid}", "p:"}, q(`probe: bad probe "p:": missing location or event name after "p:"`), nil},
		{"bad offset", []string{"{pid}", "p:work+zz"}, q(`probe: bad probe "p:work+zz": "work+zz": bad offset "zz" (want decimal or 0x hex)`), nil},
		{"event without location", []string{"{pid}", "p:grp/ev"}, q(`probe: bad probe "p:grp/ev": missing location after event name "grp/ev"`), nil},
		{"bad address", []string{"{pid}", "p:0xzz"}, q(`probe: bad probe "p:0xzz": "0xzz": bad address`), nil},
		{"empty fetch-arg", []string{"{pid}", "p:work x="}, q(`probe: missing fetch argument in "x="`), nil},
		// Where the probe goes.
		{"unknown symbol, closest", []string{"{pid}", "p:wrk"}, q(`probe: unknown symbol "wrk" (did you mean: work, `) + `.*\)`, nil},
		{"unknown symbol in a library", []string{"{pid}", "p:libc:nosuchfn"}, `probe: unknown symbol "nosuchfn".*`, nil},
		{"unknown library", []string{"{pid}", "p:libnosuchlib:foo"}, q(`probe: unknown library "libnosuchlib"`) + `.*`, nil},
		{"off an instruction boundary", []string{"{pid}", fmt.Sprintf("p:work+%d", mid)}, q(fmt.Sprintf("probe: work+%#x is not an instruction boundary (nearest: work+", mid)) + `0x[0-9a-f]+, work\+0x[0-9a-f]+\)`, nil},
		{"unsupported instruction", []string{"{pid}", fmt.Sprintf("p:libc:syscall+%#x", sysOff)}, q(fmt.Sprintf("probe: syscall+%#x/", sysOff)) + `0x[0-9a-f]+` + q(": unsupported instruction at probe site: syscall (system call)"), nil},
		{"data symbol", []string{"{pid}", "p:last"}, q(`probe: "last" is a data object, not a function`), nil},
		{"address outside any file", []string{"{pid}", "p:0x1"}, q(`probe: 0x1 is not in any mapped file`), nil},
		{"unknown system call", []string{"{pid}", "p:sys_nosuch"}, q(`probe: sys_nosuch: no such symbol or system call (closest system calls: `) + `.*\)`, nil},
		{"unknown system call, return", []string{"{pid}", "r:sys_nosuch"}, q(`probe: sys_nosuch: no such symbol or system call (closest system calls: `) + `.*\)`, nil},
		// Fetch-args.
		{"bad type", []string{"{pid}", "p:work x=%di:u33"}, q(`probe: bad type "u33" (want `) + `.*` + q(`) in "x=%di:u33"`), nil},
		{"$retval on p:", []string{"{pid}", "p:work $retval"}, q(`probe: $retval is only available in a return probe (r:) in "$retval"`), nil},
		{"unknown variable", []string{"{pid}", "p:work $foo"}, q(`probe: unknown variable "$foo" (want $retval, $stack, $stackN, $argN, $comm or $params)`), nil},
		{"unknown register", []string{"{pid}", "p:work %zz"}, q(`probe: unknown register "%zz"`), nil},
		// Filters and actions.
		{"filter missing value", []string{"{pid}", "p:work x=%di if x =="}, q(`probe: bad filter "x ==": missing value after "x =="`), nil},
		{"filter unknown field", []string{"{pid}", "p:work x=%di if y == 1"}, q(`probe: bad filter "y == 1": unknown field "y" (fields: x, comm)`), nil},
		{"filter number against string", []string{"{pid}", `p:work x=%di:s64 if x == "a"`}, q(`probe: bad filter "x == \"a\"": field "x" is a number: compare it with a number, not a string`), nil},
		{"filter DWARF integer against string", []string{"{pid}", `p:work i if i == "a"`}, q(`probe: bad filter "i == \"a\"": field "i" is a number: compare it with a number, not a string`), nil},
		{"filter incomplete", []string{"{pid}", "p:work i if i >"}, q(`probe: bad filter "i >": missing value after "i >"`), nil},
		{"filter unclosed", []string{"{pid}", "p:work i if (i > 1"}, q(`probe: bad filter "(i > 1": missing ")"`), nil},
		{"filter dangling &&", []string{"{pid}", "p:work i if i > 1 &&"}, q(`probe: bad filter "i > 1 &&": expression ends where a comparison was expected`), nil},
		{"unknown action", []string{"{pid}", "p:work => bogus"}, q(`probe: bad action "bogus": unknown action (want print, printf, count, sum, avg, min, max, hist, stacktrace, mark, traceon, traceoff, enable or disable)`), nil},
		{"action on a missing field", []string{"{pid}", "p:work => hist:nosuch"}, q(`probe: bad action "hist:nosuch": nosuch is not a field of probe/p_work_0 (fields: none)`), nil},
		{"no action after =>", []string{"{pid}", "p:work =>"}, q(`probe: bad action "=>": no action after it (want e.g. => count)`), nil},
		{"two histogram scales", []string{"{pid}", "p:work i=%di => hist:i:log2:linear=5"}, q(`probe: bad action "hist:i:log2:linear=5": log2 and linear=5: a histogram has one scale`), nil},
		{"interval with no table", []string{"--interval", "1s", "{pid}", "p:work"}, q(`probe: --interval 1s: no probe keeps a table to print (=> count, hist:FIELD, sum:FIELD...)`), nil},
		{"interval-clear with no interval", []string{"--interval-clear", "{pid}", "p:work => count"}, q(`probe: --interval-clear needs --interval D (the tables are emptied each D)`), nil},
		// Scripts.
		{"invalid YAML", []string{"--script", badYAML, "{pid}"}, q("probe: " + badYAML + ":2:1: bad YAML: found character '\t' that cannot start any token"), nil},
		{"unknown script key", []string{"--script", unknownKey, "{pid}"}, q("probe: " + unknownKey + `:3:5: probes[0]: unknown key "filter" (want "at", "return", "spec", "event", "args", "if", "actions")`), nil},
		// Flags.
		{"unknown tracer", []string{"--tracer", "bogus", "{pid}"}, q(`probe: --tracer: unknown tracer "bogus" (want nop, function, function_graph, profile, stack)`), nil},
		{"bad format", []string{"--format", "xml", "{pid}", "p:work"}, q(`probe: --format: unknown format "xml" (want text, json, chrome, perfetto, pprof, folded, graph, profile or otlp)`), nil},
		{"unknown flag", []string{"--bogus", "{pid}", "p:work"}, q(`probe: flag provided but not defined: -bogus`), nil},
		// (-: deletes an event defined before it: a spec, not a flag.)
		{"delete of no event", []string{"{pid}", "p:work", "-:p_nowork_0"}, q(`probe: no event probe/p_nowork_0`), nil},
		{"bad flag value", []string{"--max-depth", "deep", "{pid}"}, q(`probe: --max-depth "deep": parse error`), nil},
		{"bad duration", []string{"--duration", "forever", "{pid}", "p:work"}, q(`probe: --duration "forever": not a duration (e.g. 5s, 1m30s, 100ms)`), nil},
		{"duration without unit", []string{"--duration", "5", "{pid}", "p:work"}, q(`probe: --duration "5": missing unit (e.g. 5s, 100ms)`), nil},
		{"zero duration", []string{"--duration", "0s", "{pid}", "p:work"}, q(`probe: --duration "0s": want a positive duration`), nil},
		{"negative duration", []string{"--duration", "-1s", "{pid}", "p:work"}, q(`probe: --duration "-1s": want a positive duration`), nil},
		{"output a directory", []string{"-o", "/tmp", "{pid}", "p:work"}, q(`probe: /tmp: is a directory`), nil},
		{"output in no directory", []string{"-o", "/nonexistent/x", "{pid}", "p:work"}, q(`probe: /nonexistent/x: no such file or directory`), nil},
		{"output in /proc", []string{"-o", "/proc/nope", "{pid}", "p:work"}, q(`probe: /proc/nope: no such file or directory`), nil},
		{"output a file of /proc", []string{"-o", "/proc/version", "{pid}", "p:work"}, q(`probe: /proc/version: a file of the kernel's /proc or /sys, not one for a trace`), nil},
		{"output that takes no write", []string{"-o", "/dev/full", "{pid}", "p:work"}, q(`probe: /dev/full: no space left on device`), nil},
		{"output named empty", []string{"-o", "", "{pid}", "p:work"}, q(`probe: -o "": no file named (give a file, or - for standard output)`), nil},
		{"output a FIFO with no reader", []string{"-o", fifo, "{pid}", "p:work"}, q(`probe: ` + fifo + `: a FIFO with no reader (start its reader first)`), nil},
		{"return probe off the entry", []string{"{pid}", "r:work+4"}, q(`probe: work+0x4: a return probe must be at a function's entry (no +offset)`), nil},
		// The process.
		{"not a pid", []string{"notapid", "p:work"}, q(`probe: bad PID "notapid"`), nil},
		{"nonexistent pid", []string{"99999999", "p:work"}, q(`probe: pid 99999999: no such process`), nil},
		{"not permitted", []string{"{pid}", "p:work"}, q("probe: pid {pid}: not permitted to trace process (" + permissionHint + ")"), asNobody},
		{"a kernel thread", []string{"2", "p:work"}, q("probe: pid 2: not permitted to trace process (kthreadd is a kernel thread: no one can trace it)"), nil},
		{"already traced", []string{"{pid}", "p:work"}, `probe: pid {pid}: process is already traced by pid \d+ \(seize\)`, func(t *testing.T, args []string) result {
			stop := filepath.Join(t.TempDir(), "stop-seize")
			z := startBg(t, nil, seizeBin, pid, stop)
			z.waitStdout(t, "seized\n", 10*time.Second)
			r := probe(t, args...)
			if err := os.WriteFile(stop, nil, 0o644); err != nil {
				t.Fatal(err)
			}
			if zr := z.wait(t, 10*time.Second); zr.code != 0 {
				t.Fatalf("seize: %v", zr)
			}
			return r
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			args := []string{"attach"}
			for _, a := range tc.args {
				args = append(args, strings.ReplaceAll(a, "{pid}", pid))
			}
			want := regexp.MustCompile("^" + strings.ReplaceAll(strings.ReplaceAll(tc.want, `\{pid\}`, pid), "{pid}", pid) + "$")
			before := readImage(t, s.pid(), spin)
			var r result
			if tc.run != nil {
				r = tc.run(t, args)
			} else {
				r = probe(t, args...)
			}
			if r.code != 2 || r.stdout != "" || strings.Count(r.stderr, "\n") != 1 || !want.MatchString(strings.TrimSuffix(r.stderr, "\n")) {
				t.Errorf("probe %q: want exit status 2, no stdout and one line matching\n  %s\ngot\n%v", args, want, r)
			}
			if strings.Contains(r.stderr, "goroutine ") || strings.Contains(r.stderr, "panic") {
				t.Errorf("probe %q: a panic reached the user:\n%v", args, r)
			}
			waitFree(t, s, nil)
			after := readImage(t, s.pid(), spin)
			compareImages(t, before, after)
		})
	}
	s.finish(t)
}

// asNobody runs the case's probe as user 65534 (setpriv), from a copy the
// user may execute, against the root-owned tracee.
func asNobody(t *testing.T, args []string) result {
	if os.Geteuid() != 0 {
		t.Fatal("this case drops privileges with setpriv: run the suite as root")
	}
	dir, err := os.MkdirTemp("", "probe-badinput-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	data, err := os.ReadFile(probeBin)
	if err != nil {
		t.Fatal(err)
	}
	nobodyProbe := filepath.Join(dir, "probe")
	if err := os.WriteFile(nobodyProbe, data, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return runCmd(t, nil, "setpriv", append([]string{"--reuid=65534", "--regid=65534", "--clear-groups", nobodyProbe}, args...)...)
}

// tracedImage is what a tracer could have changed in a process: its
// mappings (an injected page would show), the bytes of every executable
// mapping, and the first page of each writable mapping of a library
// (the main program's data and the anonymous ones change as it runs).
type tracedImage struct {
	maps  []string
	bytes map[string][]byte
}

func readImage(t *testing.T, pid int, exe string) tracedImage {
	t.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/maps", pid))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	mem, err := os.Open(fmt.Sprintf("/proc/%d/mem", pid))
	if err != nil {
		t.Fatal(err)
	}
	defer mem.Close()
	img := tracedImage{bytes: map[string][]byte{}}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		img.maps = append(img.maps, line)
		fields := strings.Fields(line)
		lo, hi, _ := strings.Cut(fields[0], "-")
		start, _ := strconv.ParseUint(lo, 16, 64)
		end, _ := strconv.ParseUint(hi, 16, 64)
		perms, path := fields[1], ""
		if len(fields) >= 6 {
			path = fields[5]
		}
		var n uint64
		switch {
		case perms[0] != 'r' || path == "[vsyscall]" || path == "[vvar]":
		case perms[2] == 'x':
			n = end - start
		case perms[1] == 'w' && strings.HasPrefix(path, "/") && path != exe:
			n = min(end-start, 4096)
		}
		if n == 0 {
			continue
		}
		b := make([]byte, n)
		if _, err := mem.ReadAt(b, int64(start)); err != nil {
			t.Fatalf("reading %s of pid %d: %v", line, pid, err)
		}
		img.bytes[line] = b
	}
	return img
}

func compareImages(t *testing.T, before, after tracedImage) {
	t.Helper()
	if strings.Join(before.maps, "\n") != strings.Join(after.maps, "\n") {
		t.Errorf("the tracee's mappings changed:\nbefore:\n%s\nafter:\n%s", strings.Join(before.maps, "\n"), strings.Join(after.maps, "\n"))
	}
	for m, b := range before.bytes {
		a, ok := after.bytes[m]
		if !ok {
			continue // reported above
		}
		for i := range b {
			if a[i] != b[i] {
				t.Errorf("the tracee's memory changed in %s at +%#x: %#x -> %#x", m, i, b[i], a[i])
				break
			}
		}
	}
}

// midInstruction returns an offset into fn that is inside an instruction.
func midInstruction(t *testing.T, path, fn string) uint64 {
	offs, _ := insnOffsets(t, path, fn)
	for i := 0; i+1 < len(offs); i++ {
		if offs[i+1]-offs[i] >= 2 {
			return offs[i] + 1
		}
	}
	t.Fatalf("no multi-byte instruction in %s: %v", fn, offs)
	return 0
}

// syscallOffset returns the offset of the first syscall instruction in
// the library function fn.
func syscallOffset(t *testing.T, lib, fn string) uint64 {
	t.Helper()
	f, err := elf.Open(lib)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	syms, err := f.DynamicSymbols()
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range syms {
		if s.Name != fn || elf.ST_TYPE(s.Info) != elf.STT_FUNC || s.Size == 0 {
			continue
		}
		for _, p := range f.Progs {
			if p.Type != elf.PT_LOAD || s.Value < p.Vaddr || s.Value+s.Size > p.Vaddr+p.Filesz {
				continue
			}
			code := make([]byte, s.Size)
			if _, err := p.ReadAt(code, int64(s.Value-p.Vaddr)); err != nil {
				t.Fatal(err)
			}
			for off := 0; off < len(code); {
				in, err := x86asm.Decode(code[off:], 64)
				if err != nil {
					t.Fatalf("%s in %s: cannot decode at +%#x: %v", fn, lib, off, err)
				}
				if in.Op == x86asm.SYSCALL {
					return uint64(off)
				}
				off += in.Len
			}
		}
	}
	t.Fatalf("no syscall instruction in %s of %s", fn, lib)
	return 0
}
