package integration

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// Boosting and emulation are exact: the tracee testdata/exact runs every
// instruction form probe displaces (see forms.S) and prints a checksum of
// what each left in the registers, flags and memory. Under a probe on
// every instruction of every form, fetching every register, its output
// must be byte for byte the untraced one; the events of the default run
// (emulated or boosted) must be those of the --no-boost run (stepped),
// line for line once timestamps, CPUs and stack addresses are taken out;
// and each instruction under test must be hit exactly as often as it runs.

// exactIters is how many times the tracee calls each form (per thread).
const exactIters = 16

// exactRun is one run of the tracee under probe.
type exactRun struct {
	mode    string // "default" or the flags
	res     result
	evs     []event
	threads [][]string // exactThreads(evs), for the C tracee
}

// runExact runs the tracee path with args (and env added to the
// environment) under probe with flags and specs, ASLR off, and checks that it printed what the untraced run
// printed, that probe said nothing, and the form of every event.
func runExact(t *testing.T, path string, env []string, want result, flags, specs []string, args ...string) exactRun {
	t.Helper()
	ev := filepath.Join(t.TempDir(), "events")
	// Many long specs: pass them in the arguments all the same, as a user would.
	cmd := append(append([]string{"run", "-o", ev}, flags...), specs...)
	cmd = append(append(cmd, "--", path), args...)
	w0 := monoMicros(t)
	r := runCmd(t, env, "setarch", append([]string{"x86_64", "-R", probeBin}, cmd...)...)
	w1 := monoMicros(t)
	if r.code != want.code || r.stdout != want.stdout || r.stderr != "" {
		t.Fatalf("probe run %s<%d specs> -- %s %s: exit status, stdout and stderr differ from the untraced run's (exit status %d, no stderr):\n%s\ngot:\n%v",
			strings.Join(append(flags, ""), " "), len(specs), filepath.Base(path), strings.Join(args, " "), want.code, exactOutputDiff(want.stdout, r.stdout), r)
	}
	evs := parseEventsFile(t, ev)
	checkCommon(t, evs, window{w0, w1}, fixedComm(commOf(path)))
	run := exactRun{mode: "default", res: r, evs: evs}
	if len(flags) > 0 {
		run.mode = strings.Join(flags, " ")
	}
	if path == exactTracee.path {
		run.threads = exactThreads(t, evs)
	}
	return run
}

// exactOutputDiff lists the lines of got that are not those of want.
func exactOutputDiff(want, got string) string {
	w := strings.Split(want, "\n")
	g := strings.Split(got, "\n")
	var sb strings.Builder
	n := 0
	for i := 0; i < len(w) || i < len(g); i++ {
		var a, b string
		if i < len(w) {
			a = w[i]
		}
		if i < len(g) {
			b = g[i]
		}
		if a != b {
			if n++; n > 10 {
				sb.WriteString("  ...\n")
				break
			}
			fmt.Fprintf(&sb, "  line %d: want %q\n            got %q\n", i+1, a, b)
		}
	}
	return sb.String()
}

// untracedExact runs the tracee path (env added to the environment)
// without probe, ASLR off.
func untracedExact(t *testing.T, path string, env []string, args ...string) result {
	t.Helper()
	r := runCmd(t, env, "setarch", append([]string{"x86_64", "-R", path}, args...)...)
	if r.code != 0 || r.stderr != "" || strings.Contains(r.stdout, "NOT") {
		t.Fatalf("%s %s, untraced:\n%v", filepath.Base(path), strings.Join(args, " "), r)
	}
	return r
}

// wantLabelHits checks the hit count of every label that was probed: its
// executions per iteration times iters, or what the tracee reported.
func wantLabelHits(t *testing.T, mode string, l *exactLayout, evs []event, rep exactReport, iters int) {
	t.Helper()
	got := countByLoc(evs)
	for _, lb := range l.labels {
		want := lb.perIter * iters
		if lb.perIter == 0 {
			n, ok := rep.hits[lb.name]
			if !ok {
				t.Fatalf("the tracee reported no \"hits %s K\"", lb.name)
			}
			want = n
		}
		if got[lb.loc()] != want {
			t.Errorf("%s: %s (%s): %d hits, want %d", mode, lb.name, lb.loc(), got[lb.loc()], want)
		}
	}
}

// wantSameEvents checks that two runs gave the same events, thread by thread.
func wantSameEvents(t *testing.T, a, b exactRun, aName, bName string) {
	t.Helper()
	if len(a.threads) != len(b.threads) {
		t.Fatalf("%s: events from %d threads, %s: from %d", aName, len(a.threads), bName, len(b.threads))
	}
	for i := range a.threads {
		if d := firstDiff(a.threads[i], b.threads[i], aName, bName); d != "" {
			t.Errorf("thread %d: %s", i, d)
		}
	}
}

func TestExact(t *testing.T) {
	t.Parallel()
	needSetarch(t)
	path := exactBin(t)
	lay := readExactLayout(t, path)
	iters := strconv.Itoa(exactIters)
	base := untracedExact(t, path, nil, iters)
	rep := parseExactReport(t, base.stdout)
	if rep.faultAt == 0 || rep.faultReturned == 0 || rep.hits["loope"] == 0 || rep.hits["loopne"] == 0 {
		t.Fatalf("exact %s: the inputs do not take every path:\n%s", iters, base.stdout)
	}

	// Every instruction probed, its state (and the top of the stack) fetched.
	t.Run("entry", func(t *testing.T) {
		t.Parallel()
		specs := lay.exactSpecs(true, false)
		def := runExact(t, path, nil, base, nil, specs, iters)
		step := runExact(t, path, nil, base, []string{"--no-boost"}, specs, iters)
		if len(def.threads) != 1 {
			t.Fatalf("events from %d threads, want 1", len(def.threads))
		}
		wantLabelHits(t, "default", lay, def.evs, rep, exactIters)
		wantLabelHits(t, "--no-boost", lay, step.evs, rep, exactIters)
		wantSameEvents(t, def, step, "default", "--no-boost")
		wantBothWays(t, lay, def.threads[0])
	})

	// The same with a return probe on every function: the entry runs the
	// displaced instruction after rewriting the return address.
	t.Run("return", func(t *testing.T) {
		t.Parallel()
		specs := lay.exactSpecs(false, true)
		def := runExact(t, path, nil, base, nil, specs, iters)
		step := runExact(t, path, nil, base, []string{"--no-boost"}, specs, iters)
		for _, run := range []exactRun{def, step} {
			wantLabelHits(t, run.mode, lay, run.evs, rep, exactIters)
			wantReturnHits(t, run.mode, lay, run.evs, rep, exactIters)
		}
		wantSameEvents(t, def, step, "default", "--no-boost")
	})

	// The function tracer (no returns) on every form: it names each
	// caller, through detours that load the return address into r11 and
	// put the thread's own back (the checksums see every register).
	t.Run("function", func(t *testing.T) {
		t.Parallel()
		ev := filepath.Join(t.TempDir(), "trace")
		r := runCmd(t, jumpDebug, "setarch", "x86_64", "-R", probeBin, "run", "-o", ev, "--tracer", "function", "--filter", "x_*", "--", path, iters)
		m := jumpedRE.FindStringSubmatch(r.stderr)
		if r.code != base.code || r.stdout != base.stdout || m == nil || m[1] == "0" {
			t.Fatalf("want the untraced output and some sites optimised, got:\n%s\n%v", exactOutputDiff(base.stdout, r.stdout), r)
		}
	})

	// Signals arriving all the time, most of them while the thread is
	// stopped at a probe: they are delivered as it resumes, in a slot.
	t.Run("signals", func(t *testing.T) {
		t.Parallel()
		args := []string{iters, "0", "signals"}
		specs := lay.exactSpecs(true, false)
		def := runExact(t, path, nil, base, nil, specs, args...)
		step := runExact(t, path, nil, base, []string{"--no-boost"}, specs, args...)
		wantLabelHits(t, "default", lay, def.evs, rep, exactIters)
		wantLabelHits(t, "--no-boost", lay, step.evs, rep, exactIters)
		wantSameEvents(t, def, step, "default", "--no-boost")
	})

	// Four threads through the same probes at once.
	t.Run("threads", func(t *testing.T) {
		t.Parallel()
		const threads, titers = 4, 4
		args := []string{strconv.Itoa(titers), strconv.Itoa(threads)}
		tbase := untracedExact(t, path, nil, args...)
		trep := parseExactReport(t, tbase.stdout)
		specs := lay.exactSpecs(true, false)
		def := runExact(t, path, nil, tbase, nil, specs, args...)
		step := runExact(t, path, nil, tbase, []string{"--no-boost"}, specs, args...)
		for _, run := range []exactRun{def, step} {
			if len(run.threads) != threads {
				t.Fatalf("events from %d threads, want %d", len(run.threads), threads)
			}
			wantLabelHits(t, run.mode, lay, run.evs, trep, titers*threads)
			// Each thread did what every other did.
			for i := 1; i < threads; i++ {
				if d := firstDiff(run.threads[0], run.threads[i], "thread 0", fmt.Sprintf("thread %d", i)); d != "" {
					t.Errorf("%s", d)
				}
			}
		}
		if !t.Failed() {
			wantSameEvents(t, exactRun{threads: def.threads[:1]}, exactRun{threads: step.threads[:1]}, "default", "--no-boost")
		}
	})
}

// wantBothWays checks that each conditional branch under test was
// taken and not taken: the events after its own show two places.
func wantBothWays(t *testing.T, l *exactLayout, seq []string) {
	t.Helper()
	locOf := func(line string) string {
		_, rest, _ := strings.Cut(line, " (")
		loc, _, _ := strings.Cut(rest, ")")
		return loc
	}
	next := map[string]map[string]bool{}
	for i := 0; i+1 < len(seq); i++ {
		from := locOf(seq[i])
		if next[from] == nil {
			next[from] = map[string]bool{}
		}
		next[from][locOf(seq[i+1])] = true
	}
	for _, lb := range l.labels {
		var text string
		for _, in := range lb.fn.insns {
			if in.off == lb.off {
				text = in.text
			}
		}
		mnem, _, _ := strings.Cut(text, " ")
		branch := mnem == "loop" || mnem == "loope" || mnem == "loopne" || mnem == "jrcxz" ||
			strings.HasPrefix(mnem, "j") && mnem != "jmp"
		// frame_jcc tests the flags of sub rsp on the real stack: never zero, never below.
		if !branch || lb.name == "frame_jcc" {
			continue
		}
		if n := len(next[lb.loc()]); n != 2 {
			t.Errorf("%s (%s, %s): the events after its own show %d places, want 2 (taken and not)", lb.name, lb.loc(), text, n)
		}
	}
}

// wantReturnHits checks the count of each function's return events: one
// per iteration for a form, but x_fault, which returns only when it did
// not fault; h_leaf is called by x_call_rel and jumped to by x_o2_tail.
func wantReturnHits(t *testing.T, mode string, l *exactLayout, evs []event, rep exactReport, iters int) {
	t.Helper()
	got := map[string]int{}
	for _, e := range evs {
		if e.retFunc != "" {
			got[e.retFunc]++
		}
	}
	for _, fn := range l.funcs {
		if strings.HasPrefix(fn.name, "ra_") {
			continue
		}
		want := iters
		switch fn.name {
		case "x_fault":
			want = rep.faultReturned
		case "h_leaf":
			want = 2 * iters
		}
		if got[fn.name] != want {
			t.Errorf("%s: r:%s: %d return events, want %d", mode, fn.name, got[fn.name], want)
		}
	}
}

// needSetarch fails the test where ASLR cannot be turned off for the
// tracee: the flags of rsp arithmetic and an aligned stack pointer depend
// on where the stack is, and runs are compared value for value.
func needSetarch(t *testing.T) {
	t.Helper()
	if err := exec.Command("setarch", "x86_64", "-R", "true").Run(); err != nil {
		t.Fatalf("setarch x86_64 -R (util-linux, in every Debian) does not work here: %v", err)
	}
}

// TestExactGo does the same on Go code: the entries the Go compiler
// emits (the stack check first, then the frame), a recursion that grows
// the stack, calls through func values and interfaces, a jump table;
// with return probes too (on the RET instructions, for Go). Only the
// arguments are fetched, at the first instruction after the stack check,
// and the return values: a function the runtime preempts through its
// stack guard starts again with its arguments restored and every other
// register as the scheduler left it, at a time sysmon chooses.
func TestExactGo(t *testing.T) {
	t.Parallel()
	needSetarch(t)
	path := goExactBin(t)
	funcs, _ := readFuncs(t, path, func(name string) bool { return slices.Contains(goExactFuncs, name) })
	if len(funcs) != len(goExactFuncs) {
		t.Fatalf("goexact: found %d of the functions %v", len(funcs), goExactFuncs)
	}
	const iters = "16"
	// Go's asynchronous preemption (SIGURG every 10 ms a goroutine runs)
	// stays on: signals landing in boosted slots are part of the test.
	base := untracedExact(t, path, nil, iters)
	calls := goExactCalls(t, base.stdout)
	checked := 0
	for _, f := range funcs {
		if check, _ := f.goStackCheck(); len(check) > 0 {
			checked++
		}
	}
	if checked < 3 {
		t.Fatalf("goexact: %d functions with a stack check, want at least 3 (main.drive, main.frame, main.rec)", checked)
	}
	for _, returns := range []bool{false, true} {
		t.Run(map[bool]string{false: "entry", true: "return"}[returns], func(t *testing.T) {
			t.Parallel()
			var specs []string
			for _, f := range funcs {
				_, body := f.goStackCheck()
				for _, in := range f.insns {
					switch {
					case in.text == "int3" || in.text == "ud2":
					case in.off == body:
						specs = append(specs, fmt.Sprintf("p:%s+%#x a=%%ax b=%%bx", f.name, in.off))
					default:
						specs = append(specs, fmt.Sprintf("p:%s+%#x", f.name, in.off))
					}
				}
				if returns {
					specs = append(specs, fmt.Sprintf("r:%s $retval", f.name))
				}
			}
			var seqs [2][]string
			for i, flags := range [][]string{nil, {"--no-boost"}} {
				run := runExact(t, path, nil, base, flags, specs, iters)
				got := countByLoc(run.evs)
				rets := map[string]int{}
				for _, e := range run.evs {
					if e.retFunc != "" {
						rets[e.retFunc]++
					}
				}
				for _, f := range funcs {
					_, body := f.goStackCheck()
					if n := got[f.loc(body)]; n != calls[f.name] {
						t.Errorf("%s %s: %d hits at %s, want %d (calls)", strings.Join(flags, " "), f.name, n, f.loc(body), calls[f.name])
					}
					if want := map[bool]int{true: calls[f.name]}[returns]; rets[f.name] != want {
						t.Errorf("%s r:%s: %d return events, want %d", strings.Join(flags, " "), f.name, rets[f.name], want)
					}
				}
				seqs[i] = goExactEvents(run.evs, funcs)
			}
			if d := firstDiff(seqs[0], seqs[1], "default", "--no-boost"); d != "" {
				t.Errorf("%s", d)
			}
		})
	}
}
