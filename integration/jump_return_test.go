package integration

import (
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Jump-optimised return-hooked entries (probe/optimize.go): a C entry
// with a return probe or under function_graph gets a detour that loads
// the return address into r11 and swaps in the trampoline itself.
// testdata/jump/retjump.c counts its own calls and prints them, so the
// traced counts are checked exactly against what really ran.

// retjumpBin builds testdata/jump/retjump.c with opt, once per run.
func retjumpBin(t *testing.T, opt string) string {
	t.Helper()
	return builtOnce(t, "retjump"+opt, filepath.Join("testdata", "jump", "retjump.c"), opt, "-g", "-Wall")
}

// retjumpUntraced builds retjump with opt and runs it untraced for rounds:
// the binary, what it printed, and the calls it counted.
func retjumpUntraced(t *testing.T, opt string, rounds int) (exe string, want result, calls map[string]int) {
	t.Helper()
	exe = retjumpBin(t, opt)
	want = runCmd(t, nil, exe, strconv.Itoa(rounds))
	if want.code != 0 {
		t.Fatalf("untraced: %v", want)
	}
	return exe, want, retjumpCalls(t, want.stdout)
}

var retjumpFuncs = []string{"leaf", "fib", "tail", "outer"}

// hookedLines is probe's stderr with PROBE_DEBUG_JUMPS when n sites got
// return-hook detours (and no other), none found in use at detach.
func hookedLines(n int) string {
	if n == 0 {
		return jumpedLine(0)
	}
	return jumpedLine(n) + fmt.Sprintf("probe: %d of them hook returns in the detour, 0 threads moved out after the swap\n", n)
}

// retjumpCalls reads retjump's own call counts from its output.
func retjumpCalls(t *testing.T, stdout string) map[string]int {
	t.Helper()
	calls := map[string]int{}
	for _, f := range strings.Fields(stdout) {
		k, v, ok := strings.Cut(f, "=")
		if n, err := strconv.Atoi(v); ok && err == nil && k != "sum" {
			calls[k] = n
		}
	}
	if len(calls) != len(retjumpFuncs) {
		t.Fatalf("retjump printed %q", stdout)
	}
	return calls
}

// retjumpModes are the runs compared: optimised with return-hook detours
// that stop the thread, int3 + boost, int3 + single-steps, and in-process
// (the default: no stop, the hook in the tracee).
var retjumpModes = []string{"--no-inprocess", "--no-optimize", "--no-boost", "--no-optimize=false"}

const inProcessMode = 3

// runRetjumpMode runs probe with args, in retjumpModes[i], and checks that
// retjump printed what it prints untraced (want) and that every function
// got a return-hook detour in the optimised mode and none in the others.
func runRetjumpMode(t *testing.T, i int, want result, args ...string) {
	t.Helper()
	r := probeEnv(t, jumpDebug, args...)
	hooked := len(retjumpFuncs)
	if i > 0 {
		hooked = 0
	}
	lines := hookedLines(hooked)
	if i == inProcessMode {
		lines = jumpedLine(len(retjumpFuncs)) // their stubs hook the returns
	}
	if r.code != 0 || r.stdout != want.stdout || r.stderr != lines {
		t.Fatalf("%s: %v\nwant exit 0, stdout %q, stderr %q", retjumpModes[i], r, want.stdout, lines)
	}
}

// TestJumpReturnExact: return probes with $retval on every function of
// retjump (a recursion, a tail call into another probed function) fire
// once per call, exactly as often as retjump counts its calls, with the
// same events field for field whether the entries are jump-optimised, int3
// + boost or single-stepped; retjump prints what it prints untraced.
func TestJumpReturnExact(t *testing.T) {
	const rounds = 200
	for _, opt := range []string{"-O0", "-O2"} {
		t.Run(opt, func(t *testing.T) {
			t.Parallel()
			exe, want, calls := retjumpUntraced(t, opt, rounds)
			if opt == "-O2" {
				requireTailCall(t, exe)
			}
			runs := make([][]event, len(retjumpModes))
			for i, mode := range retjumpModes {
				out := filepath.Join(t.TempDir(), "trace")
				args := []string{"run", mode, "-o", out}
				for _, fn := range retjumpFuncs {
					args = append(args, "r:"+fn+" $retval")
				}
				runRetjumpMode(t, i, want, append(args, "--", exe, strconv.Itoa(rounds))...)
				runs[i] = eventsIn(t, out)
				got := countByName(runs[i])
				for _, fn := range retjumpFuncs {
					if got["r_"+fn+"_0"] != calls[fn] {
						t.Errorf("%s: r_%s_0 fired %d times, want %d", mode, fn, got["r_"+fn+"_0"], calls[fn])
					}
				}
			}
			for m := 1; m < len(runs); m++ {
				if len(runs[m]) != len(runs[0]) {
					t.Fatalf("%d events optimised, %d with %s", len(runs[0]), len(runs[m]), retjumpModes[m])
				}
				for i := range runs[0] {
					a, b := runs[0][i], runs[m][i]
					if a.name != b.name || a.loc != b.loc || a.rest != b.rest || a.comm != b.comm {
						t.Fatalf("event %d optimised:\n%s\nwith %s:\n%s", i, a.line, retjumpModes[m], b.line)
					}
				}
			}
		})
	}
}

// requireTailCall fails unless retjump's tail ends in a jmp to leaf, the
// tail call the test means to cover.
func requireTailCall(t *testing.T, exe string) {
	t.Helper()
	r := runCmd(t, nil, "objdump", "-d", "--no-show-raw-insn", "--disassemble=tail", exe)
	if r.code != 0 || !regexp.MustCompile(`jmp +[0-9a-f]+ <leaf>`).MatchString(r.stdout) {
		t.Fatalf("tail has no tail call to leaf: %v", r)
	}
}

// graphColumn is the FUNCTION CALLS column of a function_graph trace, one
// line per line, durations and tasks left out.
func graphColumn(t *testing.T, path string) []string {
	t.Helper()
	var calls []string
	for _, line := range strings.Split(readFile(t, path), "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		cols := strings.SplitN(line, "|", 3)
		if len(cols) != 3 {
			t.Fatalf("function_graph line %q", line)
		}
		calls = append(calls, cols[2])
	}
	return calls
}

var graphLeafRE = regexp.MustCompile(`^\s*(\w+)\(\)(;| \{)$`)

// TestJumpReturnGraph: function_graph over retjump draws the same graph
// optimised, with int3 + boost and single-stepped, each function entered
// as often as retjump says; with --graph-function tail and with
// --max-depth 2, calls the tracer does not hook (resumed past the
// detour's swap) still return where they must: retjump's output is
// unchanged, and the graph is again the same in every mode.
func TestJumpReturnGraph(t *testing.T) {
	const rounds = 200
	exe, want, calls := retjumpUntraced(t, "-O2", rounds)
	for _, scope := range [][]string{nil, {"--graph-function", "tail"}, {"--max-depth", "2"}} {
		name := "all"
		if scope != nil {
			name = strings.TrimPrefix(scope[0], "--")
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			graphs := make([][]string, len(retjumpModes))
			for i, mode := range retjumpModes {
				out := filepath.Join(t.TempDir(), "trace")
				args := []string{"run", mode, "-o", out, "--tracer", "function_graph"}
				for _, fn := range retjumpFuncs {
					args = append(args, "--filter", fn)
				}
				args = append(append(args, scope...), "--", exe, strconv.Itoa(rounds))
				runRetjumpMode(t, i, want, args...)
				graphs[i] = graphColumn(t, out)
			}
			entered := map[string]int{}
			for _, c := range graphs[0] {
				if m := graphLeafRE.FindStringSubmatch(c); m != nil {
					entered[m[1]]++
				}
			}
			wantEntered := map[string]int{"leaf": calls["leaf"], "fib": calls["fib"], "tail": calls["tail"], "outer": calls["outer"]}
			switch name {
			case "graph-function": // tail() { leaf(); } each round
				wantEntered = map[string]int{"tail": rounds, "leaf": rounds}
			case "max-depth": // outer() { tail(); fib(); } each round
				wantEntered = map[string]int{"outer": rounds, "tail": rounds, "fib": rounds}
			}
			if fmt.Sprint(entered) != fmt.Sprint(wantEntered) {
				t.Errorf("functions entered %v, want %v", entered, wantEntered)
			}
			for m := 1; m < len(graphs); m++ {
				if strings.Join(graphs[m], "\n") != strings.Join(graphs[0], "\n") {
					t.Errorf("graph optimised (%d lines) differs from %s (%d lines)", len(graphs[0]), retjumpModes[m], len(graphs[m]))
				}
			}
		})
	}
}

// TestJumpReturnDetachUnderLoad: as TestJumpDetachUnderLoad, with return
// probes and with function_graph on stress's work and rec (a recursion):
// detached at random moments while four threads run through the
// return-hook detours, before and after their swap, stress is left with
// its text equal to its files and every result right; some detach must
// have found a thread inside a detour.
func TestJumpReturnDetachUnderLoad(t *testing.T) {
	t.Parallel()
	returnDetachUnderLoad(t, false)
}

// TestInProcessReturnDetachUnderLoad: the same with the returns hooked in
// the tracee: a thread found in a stub, the hook routine, the record
// routine or the return trampoline goes to the function's entry or to
// where it returns, every register as it was.
func TestInProcessReturnDetachUnderLoad(t *testing.T) {
	t.Parallel()
	returnDetachUnderLoad(t, true)
}

func returnDetachUnderLoad(t *testing.T, inProcess bool) {
	rng := rand.New(rand.NewSource(logSeed(t)))
	trials := 30
	if runtime.GOARCH == "arm64" {
		trials = 2 // an attach takes seconds under TCG
	}
	s := startStress(t, stressO0, "spin", "4")
	pid := strconv.Itoa(s.pid())
	mode := "--no-inprocess"
	if inProcess {
		mode = "--no-mailbox" // (stops nowhere anyway)
	}
	checks, moved, swapped := 0, 0, 0
	for i := 0; i < trials; i++ {
		args, first := []string{"attach", mode, pid, "r:work", "r:rec"}, "r_work_0:"
		if i%2 == 1 {
			args, first = []string{"attach", mode, "--tracer", "function_graph", "--filter", "work", "--filter", "rec", pid}, "work();"
		}
		if inProcess {
			// The trace to /dev/null: the threads run at full speed,
			// and what they record would fill the test's memory. -v
			// says when the probes are in.
			args = slices.Insert(args, 1, "-v", "-o", os.DevNull)
		}
		pr := startBg(t, jumpDebug, probeBin, args...)
		if inProcess {
			waitStderr(t, pr, "in-process", 30*time.Second)
		} else {
			pr.waitStdout(t, first, 30*time.Second)
		}
		delay := time.Duration(rng.Intn(20_000)) * time.Microsecond
		time.Sleep(delay)
		pr.signal(t, syscall.SIGINT)
		r := pr.wait(t, 30*time.Second)
		if i := strings.Index(r.stderr, "probe: 2 sites"); inProcess && i >= 0 {
			r.stderr = r.stderr[i:] // after the paths -v printed
		}
		lines := strings.SplitAfterN(r.stderr, "\n", 2)
		m := jumpedRE.FindStringSubmatch(lines[0])
		var hm []string
		if len(lines) == 2 {
			hm = hookedRE.FindStringSubmatch(lines[1])
		}
		switch {
		case r.code != 0 || m == nil || m[1] != "2":
		case inProcess && (len(lines) == 1 || lines[1] == ""):
		case !inProcess && hm != nil && hm[1] == "2":
		default:
			m = nil
		}
		if m == nil {
			t.Fatalf("trial %d (%v, SIGINT after %v): %v\nwant exit 0 and the jumps' debug lines", i, args, delay, r)
		}
		n, _ := strconv.Atoi(m[2])
		moved += n
		if hm != nil {
			n, _ = strconv.Atoi(hm[2])
			swapped += n
		}
		checkFreeAfter(t, s, s.pid(), &checks, fmt.Sprintf("trial %d (%v, SIGINT after %v)", i, args, delay))
	}
	extra := make([]string, checks)
	for i := range extra {
		extra[i] = "check ok"
	}
	stopStress(t, s, stressOutput(4, extra...))
	t.Logf("%d threads moved out of detours in %d detaches, %d of them after the swap", moved, trials, swapped)
	if moved == 0 {
		t.Errorf("no detach found a thread inside a detour")
	}
}

// hookedRE matches the return-hook line of PROBE_DEBUG_JUMPS with any
// count of threads moved.
var hookedRE = regexp.MustCompile(`^probe: (\d+) of them hook returns in the detour, (\d+) threads moved out after the swap\n$`)

// TestJumpReturnPanicPastSwap: a panic of ours (injected, in a binary
// built with -tags probetest) while a thread stands past its return-hook
// detour's swap, its frame pushed and its return address already the
// trampoline, ends in the emergency detach, which puts that return
// address back: stress, attached with return probes and with
// function_graph on work and rec, runs on untraced with its text and
// every result right.
func TestJumpReturnPanicPastSwap(t *testing.T) {
	t.Parallel()
	bin := faultProbeBin(t)
	rng := rand.New(rand.NewSource(logSeed(t)))
	for _, args := range [][]string{
		{"r:work => count", "r:rec => count"},
		{"-o", "/dev/null", "--tracer", "function_graph", "--filter", "work", "--filter", "rec"},
	} {
		at := 1 + rng.Intn(2000)
		env := []string{fmt.Sprintf("PROBE_TEST_PANIC=swapped:%d", at)}
		wantErr := fmt.Sprintf("probe: internal error: fault injected at swapped %d\n", at)
		s := startStress(t, stressO0, "spin", "4")
		pr := startBg(t, env, bin, append([]string{"attach", "--no-inprocess", strconv.Itoa(s.pid())}, args...)...)
		if r := pr.wait(t, 60*time.Second); r.code != 1 || r.stderr != wantErr {
			t.Errorf("attach %v with %s: %v\nwant exit 1 and stderr %q", args, env[0], r, wantErr)
		}
		checks := 0
		checkFree(t, s, s.pid(), &checks)
		stopStress(t, s, stressOutput(4, "check ok"))
	}
}

// TestJumpReturnFork: as TestJumpFork with return probes: a forked child
// runs without our jmps and return hooks and computes what it does
// untraced; with -f it is traced through the parent's return-hook
// detours and every return of both is reported.
func TestJumpReturnFork(t *testing.T) {
	t.Parallel()
	const calls = 200
	exe := jumpBin(t, "-O2")
	want := runCmd(t, nil, exe, "fork", strconv.Itoa(calls))
	if want.code != 0 || !strings.Contains(want.stdout, "child text ok\n") {
		t.Fatalf("untraced: %v", want)
	}
	fns := []string{"frame", "lookup", "loopback", "indirect", "ripload", "loopfar"}
	// In-process, the child's copy of the stack has the parent's hooked
	// returns too: they go back before it runs, or it would return into
	// the trampoline with no frame of its own.
	// With -f, the child's copy of the stubs records into rings of its
	// own, and its returns through its copy of the hooks are its own.
	for _, mode := range []string{"--no-inprocess", "-f", "-f in-process", "in-process"} {
		out := filepath.Join(t.TempDir(), "trace")
		args := []string{"run", "-o", out}
		perProbe, wantOut, wantErr := calls, want.stdout, hookedLines(jumpOptimisable)
		switch mode {
		case "-f":
			args = append(args, "-f", "--no-inprocess")
			perProbe, wantOut = 2*calls, strings.Replace(want.stdout, "child text ok", "child text BAD", 1)
		case "-f in-process":
			args = append(args, "-f")
			perProbe, wantOut = 2*calls, strings.Replace(want.stdout, "child text ok", "child text BAD", 1)
			wantErr = jumpedLine(jumpOptimisable)
		case "--no-inprocess":
			args = append(args, mode)
		default:
			wantErr = jumpedLine(jumpOptimisable)
		}
		for _, fn := range fns {
			args = append(args, "r:"+fn+" $retval")
		}
		r := probeEnv(t, jumpDebug, append(args, "--", exe, "fork", strconv.Itoa(calls))...)
		if r.code != 0 || r.stdout != wantOut || r.stderr != wantErr {
			t.Fatalf("%s: %v\nwant exit 0, stdout %q, stderr %q", mode, r, wantOut, wantErr)
		}
		got := countByName(eventsIn(t, out))
		for _, fn := range fns {
			if n := got["r_"+fn+"_0"]; n != perProbe {
				t.Errorf("%s: r_%s_0 fired %d times, want %d", mode, fn, n, perProbe)
			}
		}
	}
}

// TestJumpCallerFunctionTracer: the function tracer without returns names
// each call's caller from the return address; on C entries a detour loads
// it into %r11 for the tracer (keeping the thread's own in the red zone),
// so a call costs no memory read. The "FUNC <-CALLER" lines are the same,
// in the same order, optimised, with --no-optimize and with --no-boost,
// and every call the tracee made is there.
func TestJumpCallerFunctionTracer(t *testing.T) {
	const rounds = 100
	for _, opt := range []string{"-O0", "-O2"} {
		t.Run(opt, func(t *testing.T) {
			t.Parallel()
			exe, want, calls := retjumpUntraced(t, opt, rounds)
			runs := make([][]string, len(retjumpModes))
			for i, mode := range retjumpModes {
				out := filepath.Join(t.TempDir(), "trace")
				args := []string{"run", mode, "-o", out, "--tracer", "function"}
				for _, fn := range retjumpFuncs {
					args = append(args, "--filter", fn)
				}
				r := probeEnv(t, jumpDebug, append(args, "--", exe, strconv.Itoa(rounds))...)
				optimised := len(retjumpFuncs)
				if i > 0 && i != inProcessMode {
					optimised = 0
				}
				if r.code != 0 || r.stdout != want.stdout || r.stderr != jumpedLine(optimised) {
					t.Fatalf("%s: %v\nwant exit 0, stdout %q, stderr %q", mode, r, want.stdout, jumpedLine(optimised))
				}
				b, err := os.ReadFile(out)
				if err != nil {
					t.Fatal(err)
				}
				got := map[string]int{}
				for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
					if strings.HasPrefix(line, "#") {
						continue
					}
					_, call, ok := strings.Cut(line, ": ")
					fn, caller, ok2 := strings.Cut(call, " <-")
					if !ok || !ok2 || strings.HasPrefix(caller, "0x") {
						t.Fatalf("%s: not a named function-tracer line: %q", mode, line)
					}
					got[fn]++
					runs[i] = append(runs[i], call)
				}
				for _, fn := range retjumpFuncs {
					if got[fn] != calls[fn] {
						t.Errorf("%s: %s traced %d times, want %d", mode, fn, got[fn], calls[fn])
					}
				}
			}
			for m := 1; m < len(runs); m++ {
				if strings.Join(runs[m], "\n") != strings.Join(runs[0], "\n") {
					t.Fatalf("optimised and %s differ:\n%s\n---\n%s", retjumpModes[m], limit(strings.Join(runs[0], "\n")), limit(strings.Join(runs[m], "\n")))
				}
			}
		})
	}
}
