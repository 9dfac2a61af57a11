package integration

import (
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Jump-optimised probes (probe/optimize.go): a plain entry probe's int3
// becomes a jmp to a detour. PROBE_DEBUG_JUMPS makes probe say on stderr
// how many sites it optimised, so that each test proves the path it
// means to test ran.

var jumpDebug = []string{"PROBE_DEBUG_JUMPS=1"}

// jumpBin builds testdata/jump/jump.c with opt ("-O0", "-O2"), once per run.
func jumpBin(t *testing.T, opt string) string {
	t.Helper()
	return builtOnce(t, "jump"+opt, filepath.Join("testdata", "jump", "jump.c"), opt, "-g", "-Wall")
}

// jumpSpecs probe every function of jump: frame, lookup, ripload and
// loopfar (its loop's jnz rel32 re-aimed into the detour) can be
// optimised; loopback (a loop back into the jump's bytes with a jnz
// rel8, which cannot reach a detour) and indirect (an indirect jump) must
// keep their int3.
var jumpSpecs = []string{"p:frame a=%di b=%si", "p:lookup i=%di", "p:loopback n=%di", "p:indirect n=%di", "p:ripload n=%di", "p:loopfar n=%di"}

const jumpOptimisable = 4

// jumpedLine is probe's stderr with PROBE_DEBUG_JUMPS, when it detached
// with no thread inside a detour.
func jumpedLine(n int) string {
	return fmt.Sprintf("probe: %d sites jump-optimised, 0 threads moved out of detours\n", n)
}

// jumpedRE matches that line with any count of threads moved.
var jumpedRE = regexp.MustCompile(`^probe: (\d+) sites jump-optimised, (\d+) threads moved out of detours\n$`)

// TestJumpExact: with its prologues and a rip-relative load run from
// detours, jump prints what it prints untraced, every probe fires once a
// call, and the events are those of --no-boost (int3 and single-steps
// only), field for field.
func TestJumpExact(t *testing.T) {
	const calls = 300
	for _, opt := range []string{"-O0", "-O2"} {
		t.Run(opt, func(t *testing.T) {
			t.Parallel()
			exe := jumpBin(t, opt)
			want := runCmd(t, nil, exe, strconv.Itoa(calls))
			if want.code != 0 {
				t.Fatalf("untraced: %v", want)
			}
			var runs [2][]event
			for i, mode := range []string{"--no-optimize=false", "--no-boost"} {
				out := filepath.Join(t.TempDir(), "trace")
				args := append([]string{"run", mode, "-o", out}, jumpSpecs...)
				r := probeEnv(t, jumpDebug, append(args, "--", exe, strconv.Itoa(calls))...)
				jumped := jumpOptimisable
				if mode == "--no-boost" {
					jumped = 0
				}
				if r.code != 0 || r.stdout != want.stdout || r.stderr != jumpedLine(jumped) {
					t.Fatalf("%s: %v\nwant exit 0, stdout %q, stderr %q", mode, r, want.stdout, jumpedLine(jumped))
				}
				runs[i] = eventsIn(t, out)
				for name, n := range countByName(runs[i]) {
					if n != calls {
						t.Errorf("%s: %s fired %d times, want %d", mode, name, n, calls)
					}
				}
				if len(runs[i]) != calls*len(jumpSpecs) {
					t.Errorf("%s: %d events, want %d", mode, len(runs[i]), calls*len(jumpSpecs))
				}
			}
			for i := range runs[0] {
				a, b := runs[0][i], runs[1][i]
				if a.name != b.name || a.loc != b.loc || a.rest != b.rest || a.comm != b.comm {
					t.Fatalf("event %d optimised:\n%s\nwith --no-boost:\n%s", i, a.line, b.line)
				}
			}
		})
	}
}

// TestJumpFork: a child forked by a jump-optimised program runs without
// our jmps (its text is its file's, checked by the child itself) and
// computes what it does untraced; the parent's probes fire exactly. With
// -f the child is traced with the parent's detours: every call of both
// fires.
func TestJumpFork(t *testing.T) {
	t.Parallel()
	const calls = 200
	exe := jumpBin(t, "-O2")
	want := runCmd(t, nil, exe, "fork", strconv.Itoa(calls))
	if want.code != 0 || !strings.Contains(want.stdout, "child text ok\n") {
		t.Fatalf("untraced: %v", want)
	}
	for _, follow := range []bool{false, true} {
		out := filepath.Join(t.TempDir(), "trace")
		args := []string{"run", "-o", out}
		perProbe, wantOut := calls, want.stdout
		if follow {
			// The followed child has our jmps in its text, rightly.
			args = append(args, "-f")
			perProbe, wantOut = 2*calls, strings.Replace(want.stdout, "child text ok", "child text BAD", 1)
		}
		args = append(append(args, jumpSpecs...), "--", exe, "fork", strconv.Itoa(calls))
		r := probeEnv(t, jumpDebug, args...)
		if r.code != 0 || r.stdout != wantOut || r.stderr != jumpedLine(jumpOptimisable) {
			t.Fatalf("follow=%v: %v\nwant exit 0, stdout %q, stderr %q", follow, r, wantOut, jumpedLine(jumpOptimisable))
		}
		evs := eventsIn(t, out)
		for _, spec := range jumpSpecs {
			fn := strings.Fields(spec)[0][2:]
			if n := countByName(evs)["p_"+fn+"_0"]; n != perProbe {
				t.Errorf("follow=%v: p_%s_0 fired %d times, want %d", follow, fn, n, perProbe)
			}
		}
	}
}

// TestJumpRedirect: loopfar's loop jumps back to loopfar+1, inside the
// bytes a jmp at its entry covers, with a jnz rel32; the jnz is re-aimed
// at the copy of loopfar+1 in the detour. Under function_graph (a record
// stub that hooks the return) and a stopping entry probe the program
// computes what it does untraced and every call is seen once, however
// many times it loops; attached to a program running it and detached,
// the program finds its text its file's again, jnz included.
func TestJumpRedirect(t *testing.T) {
	t.Parallel()
	const calls = 200
	exe := jumpBin(t, "-O2")
	want := runCmd(t, nil, exe, strconv.Itoa(calls))
	for _, args := range [][]string{
		{"-v", "--tracer", "function_graph", "--filter", "loopfar"},
		{"-v", "--no-inprocess", "p:loopfar n=%di"},
	} {
		out := filepath.Join(t.TempDir(), "trace")
		r := probeEnv(t, jumpDebug, append(append([]string{"run", "-o", out}, args...), "--", exe, strconv.Itoa(calls))...)
		if r.code != 0 || r.stdout != want.stdout || strings.Contains(r.stderr, "keep their int3") {
			t.Fatalf("%q: %v\nwant exit 0, stdout %q, no site refused a jump", args, r, want.stdout)
		}
		if args[1] == "--tracer" {
			if !strings.Contains(r.stderr, "probe: function tracer: 1 functions in-process\n") {
				t.Errorf("%q: loopfar not in-process:\n%s", args, r.stderr)
			}
			if got := countsOf(graphOfOneThread(t, readTrace(t, out)))["loopfar"]; got != calls {
				t.Errorf("%q: loopfar seen %d times, want %d", args, got, calls)
			}
			continue
		}
		if !strings.Contains(r.stderr, "probe: 1 sites jump-optimised") {
			t.Errorf("%q: loopfar not jump-optimised:\n%s", args, r.stderr)
		}
		if got := countByName(eventsIn(t, out))["p_loopfar_0"]; got != calls {
			t.Errorf("%q: p_loopfar_0 fired %d times, want %d", args, got, calls)
		}
	}
	prog := startBg(t, nil, exe, "wait", "50")
	prog.waitStdout(t, "ready\n", 10*time.Second)
	for i, args := range [][]string{{"--tracer", "function_graph", "--filter", "loopfar"}, {"--no-inprocess", "p:loopfar"}} {
		pr := startBg(t, jumpDebug, probeBin, append([]string{"attach", "-v", "-o", os.DevNull, strconv.Itoa(prog.pid())}, args...)...)
		waitStderr(t, pr, "probe: ", 30*time.Second)
		time.Sleep(time.Duration(100+100*i) * time.Millisecond)
		pr.signal(t, syscall.SIGINT)
		if r := pr.wait(t, 30*time.Second); r.code != 0 || !strings.Contains(r.stderr, "probe: 1 sites jump-optimised") {
			t.Fatalf("%q: %v\nwant exit 0, loopfar jump-optimised", args, r)
		}
	}
	prog.signal(t, syscall.SIGUSR1)
	if r := prog.wait(t, 30*time.Second); r.code != 0 || r.stdout != "ready\ntext ok after some rounds\n" {
		t.Fatalf("jump wait: %v\nwant its text as its file's", r)
	}
}

// TestJumpDetachUnderLoad: probe attaches to stress (four threads calling
// work() as fast as they can), optimises work and canary (recording in
// the tracee, or every other time stopping the threads), and is sent
// SIGINT at a random moment while threads run through the detours. Each
// time the tracee is left untraced, with its text equal to its files and
// every result right (stress checks both itself).
func TestJumpDetachUnderLoad(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewSource(logSeed(t)))
	const trials = 30
	s := startStress(t, stressO0, "spin", "4")
	pid := strconv.Itoa(s.pid())
	checks := 0
	var moved [2]int // in-process stubs, trapping detours
	for i := 0; i < trials; i++ {
		// Every other time the probes stop the threads: the detour's
		// int3; else they record in the tracee, from a stub.
		args := []string{"attach", "-v", "-o", os.DevNull, pid, "p:work", "p:canary"}
		if i%2 == 1 {
			args = append([]string{"attach", "--no-inprocess"}, args[1:]...)
		}
		pr := startBg(t, jumpDebug, probeBin, args...)
		// -v's lines come once the jumps are in.
		waitStderr(t, pr, "probe: probe/p_work_0: ", 30*time.Second)
		delay := time.Duration(rng.Intn(20_000)) * time.Microsecond
		time.Sleep(delay)
		pr.signal(t, syscall.SIGINT)
		r := pr.wait(t, 30*time.Second)
		// After -v's two lines.
		m := jumpedRE.FindStringSubmatch(r.stderr[strings.LastIndex(strings.TrimSuffix(r.stderr, "\n"), "\n")+1:])
		if r.code != 0 || m == nil || m[1] != "2" {
			t.Fatalf("trial %d (SIGINT after %v): %v\nwant exit 0 and stderr %q", i, delay, r, jumpedLine(2))
		}
		n, _ := strconv.Atoi(m[2])
		moved[i%2] += n
		checkFreeAfter(t, s, s.pid(), &checks, fmt.Sprintf("trial %d (SIGINT after %v)", i, delay))
	}
	extra := make([]string, checks)
	for i := range extra {
		extra[i] = "check ok"
	}
	stopStress(t, s, stressOutput(4, extra...))
	// Most detaches find a thread trapped at a detour's int3 or running
	// its copies, or in a record stub; none in 15 of a kind would mean
	// this test tests nothing.
	t.Logf("threads moved out of record stubs and detours: %d, out of trapping detours: %d, in %d detaches", moved[0], moved[1], trials)
	if moved[0] == 0 || moved[1] == 0 {
		t.Errorf("no detach found a thread inside a record stub or detour (%d), or inside a trapping detour (%d)", moved[0], moved[1])
	}
}

// TestJumpREPL: from the REPL, a return probe added at an optimised
// entry (what the site needs changed: it goes back to an int3, then gets
// a jump to a new detour that hooks the return too) and then both probes
// deleted; every call is counted exactly, and after detach stress finds
// its text and results intact.
func TestJumpREPL(t *testing.T) {
	t.Parallel()
	const calls = 1000
	s := startStress(t, stressO0, "cmd", "2")
	out := filepath.Join(t.TempDir(), "trace")
	r := startPiped(t, jumpDebug, probeBin, "attach", "--repl", "-o", out, strconv.Itoa(s.pid()), "p:work")
	r.send(t, "list") // answered once the probe is in
	r.waitStdout(t, "probe/p_work_0", 30*time.Second)
	s.send(t, fmt.Sprintf("go %d", calls))
	s.waitCount(t, "done ", 1, 60*time.Second)
	r.send(t, "add r:work")
	r.waitStdout(t, "added r_work_0\n", 30*time.Second)
	s.send(t, fmt.Sprintf("go %d", calls))
	s.waitCount(t, "done ", 2, 60*time.Second)
	r.send(t, "del p_work_0")
	r.send(t, "del r_work_0")
	r.waitStdout(t, "deleted r_work_0", 30*time.Second)
	s.send(t, fmt.Sprintf("go %d", calls))
	s.waitCount(t, "done ", 3, 60*time.Second)
	r.send(t, "detach")
	res := r.wait(t, 30*time.Second)
	if m := jumpedRE.FindStringSubmatch(res.stderr); res.code != 0 || m == nil || m[1] != "2" {
		t.Fatalf("probe: %v\nwant exit 0 and stderr %q", res, jumpedLine(2))
	}
	noAlarm(t, res)
	got := countByName(eventsIn(t, out))
	if got["p_work_0"] != 2*2*calls || got["r_work_0"] != 2*calls || len(got) != 2 {
		t.Errorf("hits %v, want p_work_0=%d r_work_0=%d", got, 4*calls, 2*calls)
	}
	checks := 0
	checkFree(t, s, s.pid(), &checks)
	done := fmt.Sprintf("done %d", calls)
	stopStress(t, s, stressOutput(2, done, done, done, "check ok"))
}

// intoBin builds testdata/jump/into.c, whose other enters target by a jmp
// to target+1 (form "jmp") or a jns to target+4 ("jcc"), once per run.
func intoBin(t *testing.T, form string) string {
	t.Helper()
	flags := []string{"-O2", "-g", "-Wall"}
	if form == "jcc" {
		flags = append(flags, "-DJCC")
	}
	return builtOnce(t, "into_"+form, filepath.Join("testdata", "jump", "into.c"), flags...)
}

// refusedRE matches PROBE_DEBUG_JUMPS's lines for sites kept as int3s
// because a branch from elsewhere lands inside their jmp: one site, whose
// line matches site.
func refusedRE(site string) *regexp.Regexp {
	return regexp.MustCompile(`(?m)^probe: 1 sites keep their int3, something else lands inside the jump:\nprobe:   ` + site + `\n\z`)
}

// jumpedHeadRE matches the lines before the refusals, with any count of
// sites jump-optimised (some return-hooking).
var jumpedHeadRE = regexp.MustCompile(`^probe: (\d+) sites jump-optimised, 0 threads moved out of detours\n(?:probe: \d+ of them hook returns in the detour, 0 threads moved out after the swap\n)?`)

// funcLines counts a function trace's lines by "FUNC <-CALLER".
func funcLines(t *testing.T, tf traceFile) map[string]int {
	t.Helper()
	got := map[string]int{}
	for _, l := range tf.section(t, "function")[1:] {
		m := funcLineRE.FindStringSubmatch(l)
		if m == nil {
			t.Fatalf("not a function tracer line: %q", l)
		}
		got[m[6]+" <-"+m[7]]++
	}
	return got
}

// TestJumpInto: other enters target past its first instruction, inside
// the bytes a jmp at target's entry covers (a jmp to target+1, a jns to
// target+4), from outside target: target keeps its int3 under a probe,
// the function tracer and function_graph, and the program computes what
// it does untraced (it checks every result itself); plain, an ordinary
// function, is still jump-optimised. Before the module's branches were
// checked, target got a jmp and each run died of SIGSEGV.
func TestJumpInto(t *testing.T) {
	const calls = 200
	for _, tc := range []struct{ form, from, at string }{{"jmp", "0x1/0x3", "0x1"}, {"jcc", "0x7/0x12", "0x4"}} {
		t.Run(tc.form, func(t *testing.T) {
			t.Parallel()
			exe := intoBin(t, tc.form)
			want := runCmd(t, nil, exe, strconv.Itoa(calls))
			if want.code != 0 || !strings.HasSuffix(want.stdout, " ok\n") {
				t.Fatalf("untraced: %v", want)
			}
			refused := refusedRE(`target\+0x0/0xb: a branch at other\+` + tc.from + ` lands at target\+` + tc.at + `/0xb`)
			for _, mode := range []struct {
				args  []string
				calls func(t *testing.T, trace string) map[string]int // by function
			}{
				{[]string{"p:target", "p:plain"}, func(t *testing.T, trace string) map[string]int {
					got := map[string]int{}
					for name, n := range countByName(eventsIn(t, trace)) {
						got[strings.TrimSuffix(strings.TrimPrefix(name, "p_"), "_0")] = n
					}
					got["other"] = calls // not probed
					return got
				}},
				{[]string{"--tracer", "function"}, func(t *testing.T, trace string) map[string]int {
					return byFunction(funcLines(t, readTrace(t, trace)))
				}},
				{[]string{"--tracer", "function_graph"}, func(t *testing.T, trace string) map[string]int {
					return countsOf(graphOfOneThread(t, readTrace(t, trace)))
				}},
			} {
				out := filepath.Join(t.TempDir(), "trace")
				args := append(append([]string{"run", "-o", out}, mode.args...), "--", exe, strconv.Itoa(calls))
				r := probeEnv(t, jumpDebug, args...)
				head := jumpedHeadRE.FindStringSubmatch(r.stderr)
				if r.code != 0 || r.stdout != want.stdout || head == nil || head[1] == "0" || !refused.MatchString(r.stderr[len(head[0]):]) {
					t.Fatalf("%q: %v\nwant exit 0, stdout %q, some sites jump-optimised and only target refused (%s)", mode.args, r, want.stdout, refused)
				}
				if mode.args[0] == "p:target" && head[1] != "1" {
					t.Errorf("%q: %s sites jump-optimised, want plain only", mode.args, head[1])
				}
				got := mode.calls(t, out)
				for _, fn := range []string{"target", "other", "plain"} {
					if got[fn] != calls {
						t.Errorf("%q: %s seen %d times, want %d (%v)", mode.args, fn, got[fn], calls, got)
					}
				}
			}
		})
	}
}

// byFunction sums a function trace's lines by function.
func byFunction(lines map[string]int) map[string]int {
	got := map[string]int{}
	for fn, n := range lines {
		name, _, _ := strings.Cut(fn, " <-")
		got[name] += n
	}
	return got
}

// TestJumpLibcMemcpy: glibc's __mempcpy_* jump to +3 of the matching
// __memcpy_*, so p:libc:memcpy keeps its int3, as does the memcpy the
// program calls under the function tracers on libc:__mem*; the program's
// output is as untraced (it checks every copy itself) and every call is
// seen exactly once. Before, this program (and jq, python3) died of
// SIGSEGV.
func TestJumpLibcMemcpy(t *testing.T) {
	t.Parallel()
	const calls = 300
	exe := builtOnce(t, "memcopy", filepath.Join("testdata", "jump", "memcopy.c"), "-O2", "-g", "-Wall")
	want := runCmd(t, nil, exe, strconv.Itoa(calls))
	if want.code != 0 || !strings.HasPrefix(want.stdout, fmt.Sprintf("copies=%d ", 2*calls)) || !strings.HasSuffix(want.stdout, " ok\n") {
		t.Fatalf("untraced: %v", want)
	}
	run := func(mode ...string) (trace, refusals string) {
		t.Helper()
		trace = filepath.Join(t.TempDir(), "trace")
		args := append(append([]string{"run", "-o", trace}, mode...), "--", exe, strconv.Itoa(calls))
		r := probeEnv(t, jumpDebug, args...)
		head := jumpedHeadRE.FindStringSubmatch(r.stderr)
		if r.code != 0 || r.stdout != want.stdout || head == nil {
			t.Fatalf("%q: %v\nwant exit 0 and stdout %q", mode, r, want.stdout)
		}
		return trace, r.stderr[len(head[0]):]
	}
	// refused checks that impl, the memcpy called, kept its int3.
	refused := func(mode, refusals, impl string) {
		t.Helper()
		re := regexp.MustCompile(`(?m)^probe:   ` + regexp.QuoteMeta(impl) + `\+0x0/0x[0-9a-f]+: a branch at __mempcpy_\S+ lands at ` + regexp.QuoteMeta(impl) + `\+0x[1-4]/0x[0-9a-f]+$`)
		if !strings.HasPrefix(refusals, "probe: ") || !re.MatchString(refusals) {
			t.Errorf("%s: the memcpy called, %q, is not among the sites refused a jmp:\n%s", mode, impl, refusals)
		}
	}

	trace, refusals := run("p:libc:memcpy n=%dx:u64 if n == 777")
	evs := eventsIn(t, trace)
	if len(evs) != calls || countByName(evs)["p_memcpy_0"] != calls {
		t.Fatalf("p:libc:memcpy: %d events (%v), want %d", len(evs), countByName(evs), calls)
	}
	refused("p:libc:memcpy", refusals, evs[0].sym)

	trace, refusals = run("--tracer", "function", "--filter", "libc:__mem*")
	lines := funcLines(t, readTrace(t, trace))
	var impl string
	pcopies := 0
	for fn, n := range lines {
		switch name, caller, _ := strings.Cut(fn, " <-"); {
		case caller != "main":
		case strings.HasPrefix(name, "__mempcpy_"):
			pcopies += n
		case impl == "" && n == calls:
			impl = name
		default:
			t.Errorf("function: %s <-main %d times", name, n)
		}
	}
	if impl == "" || pcopies != calls {
		t.Fatalf("function: calls from main %v, want %d of memcpy and of mempcpy", lines, calls)
	}
	refused("function", refusals, impl)

	// function_graph sees each call the function tracer saw, from main and
	// from libc (printf's).
	trace, refusals = run("--tracer", "function_graph", "--filter", "libc:__mem*")
	if got, want := countsOf(graphOfOneThread(t, readTrace(t, trace))), byFunction(lines); !mapsEqual(got, want) {
		t.Errorf("function_graph: calls %v, want %v", got, want)
	}
	refused("function_graph", refusals, impl)
}

// TestJumpComputedGoto: a function whose indirect jumps are a computed
// goto through a table of its own labels (gcc's labels as values, the
// dispatch of Lua's luaV_execute and CPython's eval loop) takes a jump
// like any other: its table's labels are its branch targets, read from
// .data.rel.ro in a PIE (read-only once relocated) and from .rodata
// otherwise. Before, run stopped the thread at every call ("the function
// has an indirect jump"). Its calls and leaf's, in the order of a trace
// made with a stop at every call, and the program's output as untraced.
func TestJumpComputedGoto(t *testing.T) {
	const calls = 300
	for _, pie := range []string{"-pie", "-no-pie"} {
		t.Run(pie, func(t *testing.T) {
			t.Parallel()
			flags := []string{"-O2", "-g", pie}
			if pie == "-no-pie" {
				flags = append(flags, "-fno-pie")
			}
			exe := builtOnce(t, "cgoto"+pie, filepath.Join("testdata", "jump", "cgoto.c"), flags...)
			want := runCmd(t, nil, exe, strconv.Itoa(calls))
			r := probe(t, "run", "-v", "-o", filepath.Join(t.TempDir(), "trace"), "--tracer", "function_graph", "--filter", "run", "--", exe, strconv.Itoa(calls))
			if r.code != 0 || r.stdout != want.stdout || !strings.Contains(r.stderr, "probe: function tracer: 1 functions in-process\n") {
				t.Fatalf("probe run -v --filter run: want exit 0, %q and run in-process; got %v", want.stdout, r)
			}
			var shapes []string
			for _, mode := range []string{"-v", "--no-inprocess"} {
				out := filepath.Join(t.TempDir(), "trace")
				r := probe(t, "run", "-v", mode, "-o", out, "--tracer", "function_graph", "--", exe, strconv.Itoa(calls))
				if r.code != 0 || r.stdout != want.stdout {
					t.Fatalf("probe run %s: want exit 0 and %q; got %v", mode, want.stdout, r)
				}
				graph := graphOfOneThread(t, readTrace(t, out))
				if n := countsOf(graph); n["run"] != calls || n["leaf"] != 2*calls {
					t.Fatalf("%s: calls %v, want run %d, leaf %d", mode, n, calls, 2*calls)
				}
				shapes = append(shapes, graphShape(t, readTrace(t, out)))
			}
			if shapes[0] != shapes[1] {
				t.Errorf("in-process:\n%s\nstopping:\n%s", limit(shapes[0]), limit(shapes[1]))
			}
		})
	}
}
