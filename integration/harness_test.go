// Package integration holds end-to-end tests of the probe binary: it is
// built once, the C and Go tracees under testdata/ are compiled in several
// variants, and every test runs the real binary against them.
package integration

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"unsafe"
)

// cmdTimeout bounds every command a test runs: a minute, times
// PROBE_TIME_SCALE where everything is slower (an emulated guest).
var cmdTimeout = 60 * time.Second * timeScale

// timeScale is PROBE_TIME_SCALE, 1 by default.
var timeScale = time.Duration(max(1, atoiOr(os.Getenv("PROBE_TIME_SCALE"), 1)))

func atoiOr(s string, or int) int {
	if n, err := strconv.Atoi(s); err == nil {
		return n
	}
	return or
}

// variant is one way of compiling a C tracee.
type variant struct {
	opt string // "-O0" or "-O2"
	pie bool
}

func (v variant) String() string {
	s := strings.TrimPrefix(v.opt, "-")
	if v.pie {
		return s + "_pie"
	}
	return s + "_nopie"
}

func (v variant) flags() []string {
	f := []string{v.opt, "-g", "-pthread", "-Wall"}
	if v.pie {
		return append(f, "-fPIE", "-pie")
	}
	return append(f, "-fno-pie", "-no-pie")
}

var (
	o0pie   = variant{"-O0", true}
	o0nopie = variant{"-O0", false}
	o2pie   = variant{"-O2", true}
	o2nopie = variant{"-O2", false}

	cVariants = []variant{o0pie, o0nopie, o2pie, o2nopie}
)

// Set up by TestMain.
var (
	repoRoot  string
	binDir    string
	probeBin  string // the probe binary under test
	goworkBin string
	gorecBin  string
	seizeBin  string
	// longLoop is a copy of loop_O2_pie whose name is longer than the
	// 15 characters of a comm.
	longLoop string
	// libcPath is the resolved path of the libc that the tracees load (as
	// it appears in /proc/PID/maps).
	libcPath string
)

const longLoopName = "loop-with-a-very-long-name"

// bin returns the path of C tracee prog ("loop", "spin") built as v,
// e.g. <binDir>/loop_O0_pie.
func bin(prog string, v variant) string {
	return filepath.Join(binDir, prog+"_"+v.String())
}

func TestMain(m *testing.M) {
	os.Exit(testMain(m))
}

func testMain(m *testing.M) int {
	defaultSignalsForChildren()
	dir, err := os.MkdirTemp("", "probe-integration-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "integration: FAIL:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	if err := setup(dir); err != nil {
		fmt.Fprintf(os.Stderr, "integration: FAIL: setup: %v\n", err)
		return 1
	}
	return m.Run()
}

// defaultSignalsForChildren gives the processes we start the default
// SIGINT and SIGHUP even when we were started with them ignored (from a
// script's background job, or nohup): a Go program keeps an inherited
// SIG_IGN for these two until it calls signal.Notify, so the tests of a
// signal that reaches probe before it catches any would see probe ignore
// it. A Go handler, unlike SIG_IGN, is not inherited across exec; ours
// drops what it catches, which is what ignoring meant.
func defaultSignalsForChildren() {
	v, err := statusValue("/proc/self/status", "SigIgn:")
	if err != nil {
		return
	}
	ignored, _ := strconv.ParseUint(v, 16, 64)
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGHUP} {
		if ignored&(1<<(sig-1)) != 0 {
			signal.Notify(make(chan os.Signal, 1), sig)
		}
	}
}

// setup builds the probe binary and all tracees into dir. Any failure is
// fatal to the whole run.
func setup(dir string) error {
	binDir = dir
	var err error
	if repoRoot, err = findRepoRoot(); err != nil {
		return err
	}

	if p := os.Getenv("PROBE_BIN"); p != "" {
		// Escape hatch: test an already built binary.
		if probeBin, err = filepath.Abs(p); err != nil {
			return err
		}
	} else {
		probeBin = filepath.Join(dir, "probe")
		build := build
		if prebuilt == "" && crossFixtures == "" {
			// As make build builds it, without cgo (the guest's cross
			// build is without it too).
			build = func(dir, name string, args ...string) error {
				return runBuild(dir, []string{"CGO_ENABLED=0"}, name, args...)
			}
		}
		if err := build(repoRoot, "go", "build", "-o", probeBin, "./cmd/probe"); err != nil {
			return err
		}
	}

	src, err := filepath.Abs("testdata")
	if err != nil {
		return err
	}
	for _, prog := range []string{"loop", "spin"} {
		for _, v := range cVariants {
			args := append(v.flags(), "-o", bin(prog, v), filepath.Join(src, prog+".c"))
			if err := build(dir, "gcc", args...); err != nil {
				return err
			}
		}
	}
	seizeBin = filepath.Join(dir, "seize")
	if err := build(dir, "gcc", "-O2", "-g", "-Wall", "-o", seizeBin, filepath.Join(src, "seize.c")); err != nil {
		return err
	}
	longLoop = filepath.Join(dir, longLoopName)
	data, err := os.ReadFile(bin("loop", o2pie))
	if err != nil {
		return err
	}
	if err := os.WriteFile(longLoop, data, 0o755); err != nil {
		return err
	}

	for _, v := range []variant{o0pie, o2nopie} {
		args := append(v.flags(), "-o", bin("ret", v), filepath.Join(src, "ret.c"))
		if err := build(dir, "gcc", args...); err != nil {
			return err
		}
	}
	for _, v := range []variant{o0pie, o2pie} {
		args := append(v.flags(), "-o", bin("fetch", v), filepath.Join(src, "fetch.c"))
		if err := build(dir, "gcc", args...); err != nil {
			return err
		}
	}
	if crossFixtures != "" || runtime.GOARCH == "arm64" {
		// pac_arm64_test.go's tracee, built here: the host's run of the
		// tests that builds the guest's tracees has no arm64 tests.
		coro := filepath.Join(src, "tracers", "coro.c")
		if err := build(dir, "gcc", append(slices.Clone(pacFlags), "-o", filepath.Join(dir, "coro_pac"), coro)...); err != nil {
			return err
		}
		for name, file := range map[string]string{"ret_pac": "ret.c", "pacret": "pacret.c"} {
			args := append(slices.Clone(pacRetFlags), "-o", filepath.Join(dir, name), filepath.Join(src, "inprocess", file))
			if err := build(dir, "gcc", args...); err != nil {
				return err
			}
		}
		sw := filepath.Join(src, "tracers", "shrinkwrap.cpp")
		if err := build(dir, "g++", append(slices.Clone(shrinkWrapFlags), "-o", filepath.Join(dir, "shrinkwrap"), sw)...); err != nil {
			return err
		}
		for name, flags := range pacPgBuilds {
			args := append(fentryFlags(flags...), "-o", filepath.Join(dir, name), filepath.Join(src, "fentry", "fentry.c"))
			if err := build(dir, "gcc", args...); err != nil {
				return err
			}
		}
		// bti_arm64_test.go's.
		if err := build(dir, "gcc", append(slices.Clone(btiFlags), "-o", filepath.Join(dir, "bti"), filepath.Join(src, "inprocess", "bti.c"))...); err != nil {
			return err
		}
		// reloc_arm64_test.go's.
		if err := build(dir, "gcc", "-O2", filepath.Join(src, "inprocess", "reloc_arm64.S"), "-o", filepath.Join(dir, "reloc"), filepath.Join(src, "inprocess", "reloc.c")); err != nil {
			return err
		}
	}
	gorecBin = filepath.Join(dir, "gorec")
	if err := build(repoRoot, "go", "build", "-o", gorecBin, "./integration/testdata/gorec"); err != nil {
		return err
	}

	goworkBin = filepath.Join(dir, "gowork")
	if err := build(repoRoot, "go", "build", "-o", goworkBin, "./integration/testdata/gowork"); err != nil {
		return err
	}

	libcPath, err = findLibc(bin("loop", o2pie))
	return err
}

// findRepoRoot is the directory of the probe module's go.mod, above the
// test's directory (a guest has the tree's test data, and no go command).
func findRepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for d := dir; ; d = filepath.Dir(d) {
		if mod, err := os.ReadFile(filepath.Join(d, "go.mod")); err == nil && bytes.HasPrefix(mod, []byte("module github.com/probedbg/probe\n")) {
			return d, nil
		}
		if d == filepath.Dir(d) {
			return "", fmt.Errorf("not inside the probe module: no go.mod above %s", dir)
		}
	}
}

func build(dir, name string, args ...string) error {
	switch {
	case prebuilt != "":
		return takePrebuilt(dir, name, args)
	case crossFixtures != "":
		return buildCross(dir, name, args)
	}
	return runBuild(dir, nil, name, args...)
}

func runBuild(dir string, env []string, name string, args ...string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return nil
}

// Tracees for a guest of another architecture, which has no toolchain
// (guest/arm64/test): with PROBE_CROSS_FIXTURES=DIR, build compiles with
// the cross compiler (aarch64-linux-gnu-gcc; Go with GOARCH=arm64) and
// keeps a copy of each output in DIR, named by a key of its command; in
// the guest, PROBE_FIXTURES=DIR makes build take that copy instead.
var (
	crossFixtures = os.Getenv("PROBE_CROSS_FIXTURES")
	prebuilt      = os.Getenv("PROBE_FIXTURES")
)

// fixtureKey names a build by its command, with paths cut to what is the
// same on the host and in the guest: the repository's relative to it,
// others (temporary directories) to their last element.
func fixtureKey(name string, args []string) string {
	h := sha256.New()
	fmt.Fprintln(h, name)
	for _, a := range args {
		for _, prefix := range []string{"-Wl,-rpath,", "-L", ""} {
			if p, ok := strings.CutPrefix(a, prefix); ok && filepath.IsAbs(p) {
				if rel, err := filepath.Rel(repoRoot, p); err == nil && !strings.HasPrefix(rel, "..") {
					p = rel
				} else {
					p = filepath.Base(p)
				}
				a = prefix + p
				break
			}
		}
		fmt.Fprintln(h, a)
	}
	return fmt.Sprintf("%x", h.Sum(nil)[:12])
}

// buildOutput is the file a build writes: its -o.
func buildOutput(dir string, args []string) (string, bool) {
	i := slices.Index(args, "-o")
	if i < 0 || i+1 >= len(args) {
		return "", false
	}
	if filepath.IsAbs(args[i+1]) {
		return args[i+1], true
	}
	return filepath.Join(dir, args[i+1]), true
}

func buildCross(dir, name string, args []string) error {
	var env []string
	cmd := name
	switch name {
	case "gcc", "g++":
		cmd = "aarch64-linux-gnu-" + name
	case "go":
		env = []string{"GOOS=linux", "GOARCH=arm64", "CGO_ENABLED=0"}
	}
	if err := runBuild(dir, env, cmd, args...); err != nil {
		return err
	}
	out, ok := buildOutput(dir, args)
	if !ok {
		return nil // objects of a later link: that link is what is kept
	}
	data, err := os.ReadFile(out)
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(crossFixtures, fixtureKey(name, args)), data, 0o755)
}

func takePrebuilt(dir, name string, args []string) error {
	out, ok := buildOutput(dir, args)
	if !ok {
		return fmt.Errorf("%s %s: not built for the guest (no -o)", name, strings.Join(args, " "))
	}
	from := filepath.Join(prebuilt, fixtureKey(name, args))
	if _, err := os.Stat(from); err != nil {
		return fmt.Errorf("%s %s: not built for the guest: %v", name, strings.Join(args, " "), err)
	}
	// Copied by another process, as a compiler writes it: a file this
	// process had open for writing could be inherited by a child forked
	// meanwhile, and its exec would fail with ETXTBSY until that child
	// execs in turn.
	return runBuild(dir, nil, "cp", from, out)
}

// findLibc returns the resolved path of the libc.so.6 that exe loads.
func findLibc(exe string) (string, error) {
	if crossFixtures != "" {
		return "", nil // not run here
	}
	if _, err := exec.LookPath("ldd"); err != nil {
		// A guest with no ldd: the libc of its one multiarch directory.
		return filepath.EvalSymlinks(filepath.Join("/lib", map[string]string{"amd64": "x86_64-linux-gnu", "arm64": "aarch64-linux-gnu"}[runtime.GOARCH], "libc.so.6"))
	}
	out, err := exec.Command("ldd", exe).Output()
	if err != nil {
		return "", fmt.Errorf("ldd %s: %v", exe, err)
	}
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) >= 3 && f[0] == "libc.so.6" && f[1] == "=>" {
			return filepath.EvalSymlinks(f[2])
		}
	}
	return "", fmt.Errorf("ldd %s: no libc.so.6 in\n%s", exe, out)
}

// ---------------------------------------------------------------------
// Running commands.

// result is how a command ended.
type result struct {
	stdout, stderr string
	// code is the exit status, or 128+N if killed by signal N.
	code    int
	elapsed time.Duration
}

func (r result) String() string {
	return fmt.Sprintf("exit status %d after %v\n--- stdout:\n%s--- stderr:\n%s---",
		r.code, r.elapsed.Round(time.Millisecond), limit(r.stdout), limit(r.stderr))
}

func limit(s string) string {
	const max = 4000
	if len(s) > max {
		return s[:max/2] + fmt.Sprintf("\n... (%d bytes left out)\n", len(s)-max) + s[len(s)-max/2:]
	}
	return s
}

func exitCode(ps *os.ProcessState) int {
	if ps == nil {
		return -1
	}
	ws := ps.Sys().(syscall.WaitStatus)
	if ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ws.ExitStatus()
}

// runCmd runs name with args (and env added to the environment) to
// completion within cmdTimeout.
func runCmd(t *testing.T, env []string, name string, args ...string) result {
	t.Helper()
	return runCmdStdin(t, env, nil, name, args...)
}

// runStdin runs name with args and stdin to completion within cmdTimeout.
func runStdin(t *testing.T, stdin []byte, name string, args ...string) result {
	t.Helper()
	return runCmdStdin(t, nil, stdin, name, args...)
}

func runCmdStdin(t *testing.T, env []string, stdin []byte, name string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), cmdTimeout)
	defer cancel()
	args = archArgs(name, args)
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = append(os.Environ(), env...)
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var so, se bytes.Buffer
	cmd.Stdout, cmd.Stderr = &so, &se
	// On the timeout a Go program (probe) prints where every goroutine
	// is, for the log; WaitDelay then kills what is left.
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGQUIT) }
	cmd.WaitDelay = 5 * time.Second
	start := time.Now()
	err := cmd.Run()
	r := result{stdout: so.String(), stderr: se.String(), code: exitCode(cmd.ProcessState), elapsed: time.Since(start)}
	if ctx.Err() != nil {
		t.Fatalf("%s %q: timed out after %v (full stderr: %s)\n%v", name, args, cmdTimeout, keepDump(cmd.Process.Pid, r.stderr), r)
	}
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("%s %q: %v\n%v", name, args, err, r)
	}
	return r
}

// The tests name registers as on x86-64. On arm64 probe's arguments get
// the registers of the same roles (AAPCS64): the argument registers in
// order, the return value, pc, sp and the frame pointer.
var (
	x86Reg   = regexp.MustCompile(`%(r?di|edi|r?si|esi|r?dx|edx|r?cx|ecx|r8d?|r9d?|r?ax|eax|r?ip|r?sp|r?bp)\b`)
	arm64Reg = map[string]string{
		"di": "x0", "rdi": "x0", "edi": "w0", "si": "x1", "rsi": "x1", "esi": "w1",
		"dx": "x2", "rdx": "x2", "edx": "w2", "cx": "x3", "rcx": "x3", "ecx": "w3",
		"r8": "x4", "r8d": "w4", "r9": "x5", "r9d": "w5", "ax": "x0", "rax": "x0", "eax": "w0",
		"ip": "pc", "rip": "pc", "sp": "sp", "rsp": "sp", "bp": "x29", "rbp": "x29",
	}
)

func archArgs(name string, args []string) []string {
	if runtime.GOARCH != "arm64" || name != probeBin {
		return args
	}
	out := make([]string, len(args))
	for i, a := range args {
		out[i] = archRegs(a)
		if i > 0 && args[i-1] == "--script" {
			// The script's probes too, in place (its errors name it),
			// if it is a script at all.
			if fi, err := os.Stat(a); err == nil && fi.Mode().IsRegular() && fi.Size() < 1<<20 {
				if b, err := os.ReadFile(a); err == nil {
					os.WriteFile(a, []byte(archRegs(string(b))), fi.Mode().Perm())
				}
			}
		}
	}
	return out
}

// archRegs is s with x86-64 register names made arm64's, on arm64.
func archRegs(s string) string {
	if runtime.GOARCH != "arm64" {
		return s
	}
	return x86Reg.ReplaceAllStringFunc(s, func(r string) string { return "%" + arm64Reg[r[1:]] })
}

// secondInsnO0 is the offset of a -O0 function's second instruction:
// after push %rbp, or arm64's stp x29, x30, [sp, #-N]!.
var secondInsnO0 = map[string]int{"amd64": 1, "arm64": 4}[runtime.GOARCH]

// entryReturnFetch is the fetch-arg of the return address at a
// function's entry: the word at [sp], on arm64 the link register.
var entryReturnFetch = map[string]string{"amd64": "$stack0", "arm64": "%lr"}[runtime.GOARCH]

// pacFlags build arm64 code with pointer authentication (paciasp and
// autiasp around each non-leaf function) and BTI (pac_arm64_test.go).
var pacFlags = []string{"-O2", "-g", "-Wall", "-mbranch-protection=standard", "-fno-pie", "-no-pie"}

// pacPgBuilds are TestPointerAuthPg's builds of fentry.c (after
// fentryFlags): plain -pg with the return address signed, by key A
// (paciasp) and key B (pacibsp, in frames over 512 bytes).
var pacPgBuilds = map[string][]string{
	"fentry-pg-pac":           {"-pg", "-mbranch-protection=standard", "-fPIE", "-pie"},
	"fentry-pg-pac-O0":        {"-O0", "-pg", "-mbranch-protection=standard", "-no-pie"},
	"fentry-pg-pacb-bigframe": {"-pg", "-mbranch-protection=pac-ret+b-key", "-no-pie", "-DFRAME_BYTES=600"},
	"fentry-pg-pacb":          {"-pg", "-mbranch-protection=pac-ret+b-key", "-no-pie"},
}

// pacRetFlags build with pointer authentication but no BTI: in a
// BTI-guarded page a landing pad (paciasp is one) takes no b, and every
// entry would stop the thread.
var pacRetFlags = []string{"-O2", "-g", "-Wall", "-pthread", "-mbranch-protection=pac-ret"}

// btiFlags build bti.c: freestanding and static, every object with the
// BTI note, so the kernel guards its text (bti_arm64_test.go).
var btiFlags = []string{"-O2", "-g", "-Wall", "-mbranch-protection=standard", "-ffreestanding", "-fno-stack-protector", "-nostdlib", "-static"}

// shrinkWrapFlags build shrinkwrap.cpp as Debian's arm64 gcc builds
// with -mbranch-protection=standard (pac_arm64_test.go).
var shrinkWrapFlags = []string{"-O2", "-g", "-Wall", "-mbranch-protection=standard"}

// patched reports whether code starts with a probe's breakpoint: an int3,
// or the jmp that replaces it (a window between the two may be too short
// to see); on arm64 a brk #0.
func patched(code []byte) bool {
	if runtime.GOARCH == "arm64" {
		return bytes.HasPrefix(code, []byte{0x00, 0x00, 0x20, 0xd4})
	}
	return len(code) > 0 && (code[0] == 0xcc || code[0] == 0xe9)
}

// keepDump writes a timed-out process's whole stderr (a goroutine dump
// is longer than a log shows) to a file and returns its name.
func keepDump(pid int, stderr string) string {
	name := filepath.Join(os.TempDir(), fmt.Sprintf("probe-sigquit-%d.txt", pid))
	if err := os.WriteFile(name, []byte(stderr), 0o644); err != nil {
		return err.Error()
	}
	return name
}

// probe runs the probe binary with args.
var (
	builtMu sync.Mutex
	built   = map[string]string{}
)

// builtOnce compiles the C source src (relative to integration/) with gcc
// and flags into binDir/name, once per run, and returns the binary.
func builtOnce(t *testing.T, name, src string, flags ...string) string {
	t.Helper()
	abs, _ := filepath.Abs(src)
	return builtOnceBy(t, name, func(exe string) error {
		return build(binDir, "gcc", append(flags, "-o", exe, abs)...)
	})
}

// builtOnceBy runs make once per run to build binDir/name, and returns it.
func builtOnceBy(t *testing.T, name string, make func(exe string) error) string {
	t.Helper()
	builtMu.Lock()
	defer builtMu.Unlock()
	if exe, ok := built[name]; ok {
		return exe
	}
	exe := filepath.Join(binDir, name)
	if err := make(exe); err != nil {
		t.Fatal(err)
	}
	built[name] = exe
	return exe
}

func probe(t *testing.T, args ...string) result {
	t.Helper()
	return runCmd(t, nil, probeBin, args...)
}

// logSeed returns a seed for a test's random choices, from the clock,
// and logs it so that a failing run can be repeated.
func logSeed(t *testing.T) int64 {
	t.Helper()
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	return seed
}

// probeEnv runs the probe binary with args and env added to its environment.
func probeEnv(t *testing.T, env []string, args ...string) result {
	t.Helper()
	return runCmd(t, env, probeBin, args...)
}

// syncBuf is a bytes.Buffer safe for concurrent use.
type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// bg is a process running in the background.
type bg struct {
	desc           string
	cmd            *exec.Cmd
	stdout, stderr syncBuf
	start          time.Time
	done           chan struct{}
	res            result // valid once done is closed
}

// startBg starts name with args in the background. The process is killed
// when the test ends if it is still running.
func startBg(t *testing.T, env []string, name string, args ...string) *bg {
	t.Helper()
	return startBgWith(t, env, nil, name, args...)
}

// piped is a background process whose stdin the test writes.
type piped struct {
	*bg
	in *os.File // the write end of its stdin pipe
}

// startPiped is startBg with the process's stdin a pipe the test writes;
// it is closed at the end of the test before the process is killed, so
// that a program reading to EOF may end by itself.
func startPiped(t *testing.T, env []string, name string, args ...string) *piped {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	p := startBgWith(t, env, r, name, args...)
	r.Close()
	t.Cleanup(func() { w.Close() }) // runs before startBgWith's
	return &piped{bg: p, in: w}
}

// startBgWith is startBg with stdin (nil: none).
func startBgWith(t *testing.T, env []string, stdin io.Reader, name string, args ...string) *bg {
	t.Helper()
	args = archArgs(name, args)
	p := &bg{desc: fmt.Sprintf("%s %q", filepath.Base(name), args), done: make(chan struct{})}
	p.cmd = exec.Command(name, args...)
	p.cmd.Env = append(os.Environ(), env...)
	p.cmd.Stdin = stdin
	p.cmd.Stdout, p.cmd.Stderr = &p.stdout, &p.stderr
	p.cmd.WaitDelay = 5 * time.Second
	p.start = time.Now()
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", p.desc, err)
	}
	go func() {
		p.cmd.Wait()
		p.res = result{
			stdout:  p.stdout.String(),
			stderr:  p.stderr.String(),
			code:    exitCode(p.cmd.ProcessState),
			elapsed: time.Since(p.start),
		}
		close(p.done)
	}()
	t.Cleanup(func() {
		if !p.exited() {
			p.cmd.Process.Kill()
			<-p.done
		}
	})
	return p
}

func (p *bg) pid() int { return p.cmd.Process.Pid }

func (p *bg) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// wait waits for the process to exit; if it does not within timeout, it
// is killed and the test fails.
func (p *bg) wait(t *testing.T, timeout time.Duration) result {
	t.Helper()
	select {
	case <-p.done:
		return p.res
	case <-time.After(timeout):
	}
	p.cmd.Process.Kill()
	<-p.done
	t.Fatalf("%s (pid %d) did not exit within %v; killed\n%v", p.desc, p.pid(), timeout, p.res)
	return result{}
}

// waitStdout waits until the process's stdout contains s.
func (p *bg) waitStdout(t *testing.T, s string, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !strings.Contains(p.stdout.String(), s) {
		if p.exited() {
			t.Fatalf("%s exited before printing %q\n%v", p.desc, s, p.res)
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not print %q within %v; stdout so far:\n%s\nstderr:\n%s",
				p.desc, s, timeout, p.stdout.String(), p.stderr.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (p *bg) signal(t *testing.T, sig os.Signal) {
	t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		t.Fatalf("signal %v to %s: %v", sig, p.desc, err)
	}
}

// startProbe starts the probe binary in the background.
func startProbe(t *testing.T, args ...string) *bg {
	t.Helper()
	return startBg(t, nil, probeBin, args...)
}

// ---------------------------------------------------------------------
// The spin tracee.

type spinProc struct {
	*bg
	stopFile string
	threads  int
}

// startSpin starts spin built as v with the given number of threads,
// stopping by itself after limit at the latest, and waits until it prints
// "ready".
func startSpin(t *testing.T, v variant, threads int, limit time.Duration) *spinProc {
	t.Helper()
	stop := filepath.Join(t.TempDir(), "stop-spin")
	p := startBg(t, nil, bin("spin", v), strconv.Itoa(threads), strconv.FormatInt(limit.Milliseconds(), 10), stop)
	p.waitStdout(t, "ready\n", 10*time.Second)
	s := &spinProc{bg: p, stopFile: stop, threads: threads}
	// All workers have been created and named once "ready" is printed.
	if w := s.workers(t); len(w) != threads {
		t.Fatalf("spin: %d worker threads in /proc, want %d: %v", len(w), threads, w)
	}
	return s
}

// workers returns the comm of each worker thread of spin (every thread
// but the main one), by TID.
func (s *spinProc) workers(t *testing.T) map[int]string {
	t.Helper()
	pid := s.pid()
	tids, err := taskIDs(pid)
	if err != nil {
		t.Fatalf("spin: %v", err)
	}
	m := make(map[int]string)
	for _, tid := range tids {
		if tid == pid {
			continue
		}
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/comm", pid, tid))
		if err != nil {
			t.Fatalf("spin: %v", err)
		}
		m[tid] = strings.TrimSuffix(string(b), "\n")
	}
	return m
}

var spinOutRE = regexp.MustCompile(`^ready\ntotal=(\d+) check=(\S+)\n$`)

// finish asks spin to stop (unless it is expected to stop by itself),
// waits for it and checks that it exited 0 with consistent output.
// It returns the total number of calls of work().
func (s *spinProc) finish(t *testing.T) int {
	t.Helper()
	if err := os.WriteFile(s.stopFile, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	return s.check(t, s.wait(t, 20*time.Second))
}

func (s *spinProc) check(t *testing.T, r result) int {
	t.Helper()
	m := spinOutRE.FindStringSubmatch(r.stdout)
	if r.code != 0 || m == nil || r.stderr != "" {
		t.Fatalf("spin: want exit 0, stdout \"ready\\ntotal=N check=N\\n\" and no stderr; got\n%v", r)
	}
	if m[1] != m[2] {
		t.Fatalf("spin: inconsistent result, the tracer corrupted the tracee: total=%s check=%s", m[1], m[2])
	}
	n, _ := strconv.Atoi(m[1])
	if n <= 0 {
		t.Fatalf("spin: no calls made: %q", r.stdout)
	}
	return n
}

// ---------------------------------------------------------------------
// /proc.

func taskIDs(pid int) ([]int, error) {
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		return nil, err
	}
	var tids []int
	for _, e := range ents {
		if tid, err := strconv.Atoi(e.Name()); err == nil {
			tids = append(tids, tid)
		}
	}
	sort.Ints(tids)
	return tids, nil
}

// tracerPid returns the TracerPid of thread tid of process pid.
func tracerPid(pid, tid int) (int, error) {
	v, err := statusValue(fmt.Sprintf("/proc/%d/task/%d/status", pid, tid), "TracerPid:")
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(v)
}

// taskState returns the state letter of thread tid of process pid.
func taskState(pid, tid int) (byte, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/stat", pid, tid))
	if err != nil {
		return 0, err
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		return 0, fmt.Errorf("bad /proc/%d/task/%d/stat: %q", pid, tid, b)
	}
	return b[i+2], nil
}

// threadsReport describes the tracer and state of every thread of pid.
func threadsReport(pid int) string {
	tids, err := taskIDs(pid)
	if err != nil {
		return err.Error()
	}
	var sb strings.Builder
	for _, tid := range tids {
		tp, err1 := tracerPid(pid, tid)
		st, err2 := taskState(pid, tid)
		fmt.Fprintf(&sb, "  tid %d: TracerPid %d state %c %v %v\n", tid, tp, st, err1, err2)
	}
	return sb.String()
}

// belongsTo tells whether thread tid is a thread of process pid or of one
// of its descendants. (TracerPid in /proc is the TID of the tracing thread,
// which for a multithreaded tracer such as a Go program is not its PID.)
func belongsTo(tid, pid int) bool {
	if tid <= 0 {
		return false
	}
	tgid, err := statusField(tid, "Tgid:")
	for i := 0; err == nil && i < 4; i++ {
		if tgid == pid {
			return true
		}
		tgid, err = statusField(tgid, "PPid:")
	}
	return false
}

func statusField(pid int, field string) (int, error) {
	v, err := statusValue(fmt.Sprintf("/proc/%d/status", pid), field)
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(v)
}

// statusValue returns the value of field ("TracerPid:") in a /proc
// status file, spaces trimmed.
func statusValue(file, field string) (string, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, field); ok {
			return strings.TrimSpace(v), nil
		}
	}
	return "", fmt.Errorf("no %s in %s", field, file)
}

// waitTracedBy waits until every thread of pid is traced by process tracer
// (by one of its threads, or of its descendants').
func waitTracedBy(t *testing.T, pid, tracer int, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok := true
		tids, err := taskIDs(pid)
		if err != nil {
			t.Fatalf("pid %d: %v", pid, err)
		}
		for _, tid := range tids {
			if tp, err := tracerPid(pid, tid); err != nil || !belongsTo(tp, tracer) {
				ok = false
			}
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %v, not every thread of %d is traced by process %d:\n%s", timeout, pid, tracer, threadsReport(pid))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// waitFree waits until no thread of spin is traced or stopped, except the
// threads in allowed, which must stay traced by the given process.
func waitFree(t *testing.T, s *spinProc, allowed map[int]int) {
	t.Helper()
	pid := s.pid()
	deadline := time.Now().Add(3 * time.Second)
	for {
		ok := true
		tids, err := taskIDs(pid)
		if err != nil {
			select {
			case <-s.done:
				t.Fatalf("spin (pid %d) is gone, it should still run:\n%v", pid, s.res)
			case <-time.After(time.Second):
			}
			t.Fatalf("pid %d: %v", pid, err)
		}
		for _, tid := range tids {
			tp, err1 := tracerPid(pid, tid)
			st, err2 := taskState(pid, tid)
			if err1 != nil || err2 != nil || st == 't' || st == 'T' {
				ok = false
			} else if tracer, in := allowed[tid]; in && !belongsTo(tp, tracer) || !in && tp != 0 {
				ok = false
			}
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("threads of %d still traced or stopped (want traced by %v (tid: tracer pid), others not; none stopped):\n%s",
				pid, allowed, threadsReport(pid))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// mapping is a line of /proc/PID/maps.
type mapping struct {
	start, end, off uint64
	path            string
}

func readMaps(t *testing.T, pid int) []mapping {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/maps", pid))
	if err != nil {
		t.Fatal(err)
	}
	var ms []mapping
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 6 {
			continue
		}
		lo, hi, _ := strings.Cut(f[0], "-")
		var m mapping
		m.start, _ = strconv.ParseUint(lo, 16, 64)
		m.end, _ = strconv.ParseUint(hi, 16, 64)
		m.off, _ = strconv.ParseUint(f[2], 16, 64)
		m.path = strings.Join(f[5:], " ")
		ms = append(ms, m)
	}
	return ms
}

// loadBias returns runtime address minus link address for the ELF file
// path mapped into pid.
func loadBias(t *testing.T, pid int, path string) uint64 {
	t.Helper()
	f, err := elf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var first *elf.Prog
	for _, p := range f.Progs {
		if p.Type == elf.PT_LOAD {
			first = p
			break
		}
	}
	if first == nil {
		t.Fatalf("%s: no PT_LOAD", path)
	}
	for _, m := range readMaps(t, pid) {
		if m.path == path && m.off == first.Off&^0xfff {
			return m.start - first.Vaddr&^0xfff
		}
	}
	t.Fatalf("%s not mapped at offset %#x in pid %d:\n%v", path, first.Off, pid, readMaps(t, pid))
	return 0
}

// ---------------------------------------------------------------------
// The monotonic clock and CPUs.

// monoMicros reads CLOCK_MONOTONIC in microseconds, the clock of the
// events' timestamps.
func monoMicros(t *testing.T) int64 {
	t.Helper()
	var ts syscall.Timespec
	const clockMonotonic = 1
	_, _, e := syscall.Syscall(syscall.SYS_CLOCK_GETTIME, clockMonotonic, uintptr(unsafe.Pointer(&ts)), 0)
	if e != 0 {
		t.Fatalf("clock_gettime: %v", e)
	}
	return ts.Nano() / 1000
}

var maxCPU = func() int {
	b, err := os.ReadFile("/sys/devices/system/cpu/possible")
	if err != nil {
		return 4095
	}
	s := strings.TrimSpace(string(b))
	s = s[strings.LastIndexAny(s, ",-")+1:]
	n, err := strconv.Atoi(s)
	if err != nil {
		return 4095
	}
	return n
}()

// ---------------------------------------------------------------------
// Events.

// event is one line of an events file.
type event struct {
	line      string
	comm      string
	tid       int
	cpu       int
	usec      int64 // timestamp
	name      string
	loc       string // e.g. "work+0x0/0x12"
	sym       string // parsed from loc
	off, size uint64 // parsed from loc
	rest      string // after the ")"
	retFunc   string // a return's "<- FUNC"; loc, sym, off, size are then the caller's
}

var (
	// The location ends at the first ")" followed by a space or the end:
	// a return's "(main+0x4d/0x81 <- work)" has spaces, a Go symbol's
	// "main.(*T).Run" has parentheses.
	eventRE = regexp.MustCompile(`^\s*(.+)-(\d+)\s+\[(\d{3})\]\s+(\d+)\.(\d{6}): (\S+): \((.+?)\)( .*)?$`)
	locRE   = regexp.MustCompile(`^(.+)\+0x([0-9a-f]+)/0x([0-9a-f]+)$`)
)

func parseEvent(line string) (event, bool) {
	m := eventRE.FindStringSubmatch(line)
	if m == nil {
		return event{}, false
	}
	e := event{line: line, comm: m[1], name: m[6], loc: m[7], rest: m[8]}
	e.tid, _ = strconv.Atoi(m[2])
	e.cpu, _ = strconv.Atoi(m[3])
	sec, _ := strconv.ParseInt(m[4], 10, 64)
	us, _ := strconv.ParseInt(m[5], 10, 64)
	e.usec = sec*1000000 + us
	where := e.loc
	if caller, fn, ok := strings.Cut(e.loc, " <- "); ok {
		where, e.retFunc = caller, fn
	}
	if l := locRE.FindStringSubmatch(where); l != nil {
		e.sym = l[1]
		e.off, _ = strconv.ParseUint(l[2], 16, 64)
		e.size, _ = strconv.ParseUint(l[3], 16, 64)
	}
	return e, true
}

// parseEventsFile reads an events file written with -o: one or more
// header lines starting with "#", then only event lines (and possibly more
// "#" comment lines).
func parseEventsFile(t *testing.T, path string) []event {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("events file: %v", err)
	}
	s := string(data)
	if s == "" {
		t.Fatalf("events file %s is empty (want at least a # header)", path)
	}
	if !strings.HasSuffix(s, "\n") {
		t.Errorf("events file does not end with a newline: ...%q", s[max(0, len(s)-100):])
	}
	lines := strings.Split(strings.TrimSuffix(s, "\n"), "\n")
	i := 0
	for i < len(lines) && strings.HasPrefix(lines[i], "#") {
		i++
	}
	if i == 0 {
		t.Errorf("events file does not start with a # header: %q", lines[0])
	}
	var evs []event
	bad := 0
	for _, line := range lines[i:] {
		if strings.HasPrefix(line, "#") {
			// A comment after the events (e.g. about hits lost while
			// detaching) is tolerated.
			t.Logf("events file: comment after the header: %q", line)
			continue
		}
		e, ok := parseEvent(line)
		if !ok {
			if bad++; bad <= 5 {
				t.Errorf("events file: line is not an event: %q", line)
			}
			continue
		}
		evs = append(evs, e)
	}
	if bad > 0 {
		t.Fatalf("events file: %d bad lines", bad)
	}
	return evs
}

// eventsIn reads the events of a trace file written with -o; a line that
// is neither the header nor an event fails the test.
func eventsIn(t *testing.T, path string) []event {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	_, evs, other := splitOutput(string(data))
	if len(other) != 0 {
		t.Errorf("lines that are not events: %q", other)
	}
	return evs
}

// splitOutput separates probe's stdout, when events go there, into the
// header lines, the events and the remaining lines (the tracee's output).
func splitOutput(s string) (header []string, evs []event, other []string) {
	for _, line := range strings.Split(strings.TrimSuffix(s, "\n"), "\n") {
		if strings.HasPrefix(line, "#") {
			header = append(header, line)
		} else if e, ok := parseEvent(line); ok {
			evs = append(evs, e)
		} else {
			other = append(other, line)
		}
	}
	return header, evs, other
}

func countByName(evs []event) map[string]int {
	m := make(map[string]int)
	for _, e := range evs {
		m[e.name]++
	}
	return m
}

func countByTID(evs []event) map[int]int {
	m := make(map[int]int)
	for _, e := range evs {
		m[e.tid]++
	}
	return m
}

func countByLoc(evs []event) map[string]int {
	m := make(map[string]int)
	for _, e := range evs {
		m[e.loc]++
	}
	return m
}

// wantEvents checks that evs are exactly n events, all named name (unless
// name is "") at location loc (unless loc is "").
func wantEvents(t *testing.T, evs []event, n int, name, loc string) {
	t.Helper()
	if len(evs) != n {
		t.Errorf("got %d events, want %d; by name %v, by location %v", len(evs), n, countByName(evs), countByLoc(evs))
	}
	if name != "" {
		if c := countByName(evs); len(c) > 1 || (len(evs) > 0 && c[name] == 0) {
			t.Errorf("event names %v, want all %q", c, name)
		}
	}
	if loc != "" {
		if c := countByLoc(evs); len(c) > 1 || (len(evs) > 0 && c[loc] == 0) {
			t.Errorf("event locations %v, want all %q", c, loc)
		}
	}
}

// window is a span of CLOCK_MONOTONIC in microseconds.
type window struct{ from, to int64 }

// checkCommon checks what must hold of every event: the timestamp lies in
// w, it does not go backwards for a thread, the CPU exists, the location
// is SYM+0xOFF/0xSIZE, the comm is comm(tid).
func checkCommon(t *testing.T, evs []event, w window, comm func(tid int) string) {
	t.Helper()
	errs := 0
	fail := func(format string, args ...any) {
		if errs++; errs <= 5 {
			t.Errorf(format, args...)
		}
	}
	last := make(map[int]int64)
	for _, e := range evs {
		if e.usec < w.from || e.usec > w.to+1 {
			fail("timestamp %d.%06d of %q is not within the run [%d.%06d, %d.%06d] (CLOCK_MONOTONIC)",
				e.usec/1e6, e.usec%1e6, e.line, w.from/1e6, w.from%1e6, w.to/1e6, w.to%1e6)
		}
		if e.usec < last[e.tid] {
			fail("timestamp goes backwards for tid %d: %q", e.tid, e.line)
		}
		last[e.tid] = e.usec
		if e.cpu > maxCPU {
			fail("cpu %d > %d: %q", e.cpu, maxCPU, e.line)
		}
		if e.sym == "" {
			fail("location %q is not SYM+0xOFF/0xSIZE: %q", e.loc, e.line)
		}
		if e.size == 0 || e.off >= e.size {
			fail("location %q: offset not within size: %q", e.loc, e.line)
		}
		if want := comm(e.tid); e.comm != want {
			fail("comm %q, want %q: %q", e.comm, want, e.line)
		}
	}
	if errs > 5 {
		t.Errorf("... %d errors in all", errs)
	}
}

// fixedComm is a comm function for tracees whose threads share one name.
func fixedComm(c string) func(int) string {
	return func(int) string { return c }
}

// commOf returns the comm the kernel gives a process running path.
func commOf(path string) string {
	c := filepath.Base(path)
	if len(c) > 15 {
		c = c[:15]
	}
	return c
}

// ---------------------------------------------------------------------
// ELF and disassembly.

// funcSym returns the function symbol name of the ELF file path, from
// .symtab or else .dynsym.
func funcSym(t *testing.T, path, name string) elf.Symbol {
	t.Helper()
	f, err := elf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, get := range []func() ([]elf.Symbol, error){f.Symbols, f.DynamicSymbols} {
		syms, _ := get()
		for _, s := range syms {
			if s.Name == name && elf.ST_TYPE(s.Info) == elf.STT_FUNC && s.Section != elf.SHN_UNDEF {
				return s
			}
		}
	}
	t.Fatalf("%s: no function symbol %q", path, name)
	return elf.Symbol{}
}

// fileOffset converts link address vaddr of the ELF file path to a file
// offset.
func fileOffset(t *testing.T, path string, vaddr uint64) uint64 {
	t.Helper()
	f, err := elf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_LOAD && p.Vaddr <= vaddr && vaddr < p.Vaddr+p.Filesz {
			return vaddr - p.Vaddr + p.Off
		}
	}
	t.Fatalf("%s: %#x is in no PT_LOAD segment", path, vaddr)
	return 0
}

// insnOffsets returns the offsets of the instructions of function fn of
// path from its start, and the function's size, from objdump (on arm64,
// where every instruction is a word, from the symbol's size alone).
func insnOffsets(t *testing.T, path, fn string) (offs []uint64, size uint64) {
	t.Helper()
	sym := funcSym(t, path, fn)
	if runtime.GOARCH == "arm64" {
		for off := uint64(0); off < sym.Size; off += 4 {
			offs = append(offs, off)
		}
		return offs, sym.Size
	}
	out, err := exec.Command("objdump", "-d", "--no-show-raw-insn", path).Output()
	if err != nil {
		t.Fatalf("objdump %s: %v", path, err)
	}
	header := fmt.Sprintf("%016x <%s>:", sym.Value, fn)
	insnRE := regexp.MustCompile(`^\s*([0-9a-f]+):\s+\S`)
	in := false
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		line := sc.Text()
		if !in {
			in = line == header
			continue
		}
		m := insnRE.FindStringSubmatch(line)
		if m == nil {
			break
		}
		a, _ := strconv.ParseUint(m[1], 16, 64)
		offs = append(offs, a-sym.Value)
	}
	if len(offs) < 4 {
		t.Fatalf("objdump %s: found %d instructions of %s (header %q)", path, len(offs), fn, header)
	}
	return offs, sym.Size
}

// oneLine checks that stderr is exactly one non-empty line and returns it.
func oneLine(t *testing.T, r result) string {
	t.Helper()
	s := strings.TrimSuffix(r.stderr, "\n")
	if s == "" || strings.Contains(s, "\n") {
		t.Errorf("want exactly one line on stderr, got %q", r.stderr)
	}
	return s
}

// noAlarm checks that probe's stderr has no sign of a crash or error.
func noAlarm(t *testing.T, r result) {
	t.Helper()
	low := strings.ToLower(r.stderr)
	for _, w := range []string{"panic", "goroutine ", "fatal", "error", "fail", "sigsegv", "warning"} {
		if strings.Contains(low, w) {
			t.Errorf("probe's stderr contains %q:\n%s", w, r.stderr)
			return
		}
	}
}
