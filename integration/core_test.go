package integration

import (
	"fmt"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// Tests of "probe run", "probe list BINARY" and bad input to "probe run".
// They are independent of each other and run in parallel (after the
// sequential attach tests of attach_test.go).

// traced runs "probe run -o EV SPECS... -- CMD ARGS..." and the same
// command untraced, checks that the tracee's exit status, stdout and
// stderr are the same both ways, and returns the events.
func traced(t *testing.T, env []string, specs []string, cmd ...string) []event {
	t.Helper()
	want := runCmd(t, env, cmd[0], cmd[1:]...)
	ev := filepath.Join(t.TempDir(), "events")
	args := append([]string{"run", "-o", ev}, specs...)
	args = append(append(args, "--"), cmd...)
	w0 := monoMicros(t)
	got := probeEnv(t, env, args...)
	w1 := monoMicros(t)
	stderr := got.stderr
	if want.code > 128 {
		// Killed by a signal: probe may add one line about it.
		if rest, ok := strings.CutPrefix(stderr, want.stderr); ok && strings.HasPrefix(rest, "probe: ") &&
			!strings.Contains(strings.TrimSuffix(rest, "\n"), "\n") {
			stderr = want.stderr
		}
	}
	if got.code != want.code || got.stdout != want.stdout || stderr != want.stderr {
		t.Fatalf("probe %q:\n%v\nwant the same as untraced:\n%v", args, got, want)
	}
	evs := parseEventsFile(t, ev)
	checkCommon(t, evs, window{w0, w1}, fixedComm(commOf(cmd[0])))
	return evs
}

func workLoc(t *testing.T, path string, off uint64) string {
	t.Helper()
	return fmt.Sprintf("work+0x%x/0x%x", off, funcSym(t, path, "work").Size)
}

func TestRun(t *testing.T) {
	t.Parallel()
	for _, v := range cVariants {
		for _, exit := range []int{0, 3} {
			t.Run(fmt.Sprintf("%v/exit%d", v, exit), func(t *testing.T) {
				t.Parallel()
				loop := bin("loop", v)
				env := []string{fmt.Sprintf("LOOP_EXIT=%d", exit)}
				evs := traced(t, env, []string{"p:work"}, loop, "1000")
				wantEvents(t, evs, 1000, "p_work_0", workLoc(t, loop, 0))
				if n := len(countByTID(evs)); n != 1 {
					t.Errorf("events from %d threads, want 1: %v", n, countByTID(evs))
				}
			})
		}
	}
}

// TestRunSignals checks that signals reach the tracee as they would
// untraced, and that death by signal N gives exit status 128+N.
func TestRunSignals(t *testing.T) {
	t.Parallel()
	loop := bin("loop", o2pie)
	for _, tc := range []struct {
		name string
		env  []string
		code int
	}{
		{"usr1-handled", []string{"LOOP_USR1=5"}, 0},
		{"killed-by-SIGTERM", []string{"LOOP_KILL=15"}, 128 + 15},
		{"killed-by-SIGUSR1", []string{"LOOP_KILL=10"}, 128 + 10},
		{"usr1-handled-and-exit-7", []string{"LOOP_USR1=3", "LOOP_EXIT=7"}, 7},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if r := runCmd(t, tc.env, loop, "300"); r.code != tc.code {
				t.Fatalf("untraced loop: want exit status %d, got\n%v", tc.code, r)
			}
			evs := traced(t, tc.env, []string{"p:work"}, loop, "300")
			wantEvents(t, evs, 300, "p_work_0", workLoc(t, loop, 0))
		})
	}
}

// TestRunEventsToStdout: without -o the events go to stdout, mixed with
// the tracee's own output.
func TestRunEventsToStdout(t *testing.T) {
	t.Parallel()
	loop := bin("loop", o0pie)
	want := runCmd(t, nil, loop, "100")
	w0 := monoMicros(t)
	got := probe(t, "run", "p:work", "--", loop, "100")
	w1 := monoMicros(t)
	if got.code != 0 || got.stderr != want.stderr {
		t.Fatalf("want exit status 0 and the tracee's stderr, got\n%v", got)
	}
	header, evs, other := splitOutput(got.stdout)
	if len(header) == 0 || !strings.HasPrefix(got.stdout, "#") {
		t.Errorf("stdout does not start with a # header:\n%s", limit(got.stdout))
	}
	if strings.Join(other, "\n")+"\n" != want.stdout {
		t.Errorf("tracee's output in stdout: %q, want %q", other, want.stdout)
	}
	wantEvents(t, evs, 100, "p_work_0", workLoc(t, loop, 0))
	checkCommon(t, evs, window{w0, w1}, fixedComm(commOf(loop)))
}

// TestRunLongComm: the comm is the executable's name cut to 15 characters.
func TestRunLongComm(t *testing.T) {
	t.Parallel()
	if commOf(longLoop) != longLoopName[:15] {
		t.Fatalf("bad test setup: %q", commOf(longLoop))
	}
	evs := traced(t, nil, []string{"p:work"}, longLoop, "50")
	wantEvents(t, evs, 50, "p_work_0", workLoc(t, longLoop, 0))
}

func TestThreads(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		v       variant
		n, thrs int
	}{
		{o2pie, 2500, 4},
		{o0nopie, 1000, 3},
	} {
		t.Run(fmt.Sprintf("%v/%dx%d", tc.v, tc.thrs, tc.n), func(t *testing.T) {
			t.Parallel()
			loop := bin("loop", tc.v)
			evs := traced(t, nil, []string{"p:work"}, loop, strconv.Itoa(tc.n), strconv.Itoa(tc.thrs))
			wantEvents(t, evs, tc.n*tc.thrs, "p_work_0", workLoc(t, loop, 0))
			byTID := countByTID(evs)
			if len(byTID) != tc.thrs {
				t.Errorf("events from %d threads, want %d: %v", len(byTID), tc.thrs, byTID)
			}
			for tid, n := range byTID {
				if n != tc.n {
					t.Errorf("thread %d: %d events, want %d (all: %v)", tid, n, tc.n, byTID)
				}
			}
		})
	}
}

// TestSpecSpellings: the ways of writing the same entry probe.
func TestSpecSpellings(t *testing.T) {
	t.Parallel()
	loop := bin("loop", o0pie)
	for _, tc := range []struct {
		spec, name string
	}{
		{"p:work", "p_work_0"},
		{"p work", "p_work_0"},
		{"p:work+0", "p_work_0"},
		{"p:work+0x0", "p_work_0"},
		{"p:" + loop + ":work", "p_work_0"},
		{"p:grp/myevent work", "myevent"},
	} {
		t.Run(tc.spec, func(t *testing.T) {
			t.Parallel()
			evs := traced(t, nil, []string{tc.spec}, loop, "200")
			wantEvents(t, evs, 200, tc.name, workLoc(t, loop, 0))
		})
	}
}

// TestOffset: SYM+OFFS at an instruction boundary inside the function.
func TestOffset(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		v   variant
		idx int // instruction number in work
	}{
		{o0pie, 2},
		{o0nopie, 1},
		{o2pie, 1},
	} {
		loop := bin("loop", tc.v)
		offs, _ := insnOffsets(t, loop, "work")
		off := offs[tc.idx]
		name := fmt.Sprintf("p_work_%d", off)
		loc := workLoc(t, loop, off)
		for _, spec := range []string{fmt.Sprintf("p:work+%d", off), fmt.Sprintf("p:work+0x%x", off)} {
			t.Run(fmt.Sprintf("%v/%s", tc.v, spec), func(t *testing.T) {
				t.Parallel()
				evs := traced(t, nil, []string{spec}, loop, "300")
				wantEvents(t, evs, 300, name, loc)
			})
		}
		// Two probes in the same function.
		t.Run(fmt.Sprintf("%v/entry+%d", tc.v, off), func(t *testing.T) {
			t.Parallel()
			evs := traced(t, nil, []string{"p:work", fmt.Sprintf("p:work+%d", off)}, loop, "300", "2")
			if len(evs) != 1200 {
				t.Errorf("got %d events, want 1200", len(evs))
			}
			byName := countByName(evs)
			if len(byName) != 2 || byName["p_work_0"] != 600 || byName[name] != 600 {
				t.Errorf("events by name %v, want 600 p_work_0 and 600 %s", byName, name)
			}
			byLoc := countByLoc(evs)
			if byLoc[workLoc(t, loop, 0)] != 600 || byLoc[loc] != 600 {
				t.Errorf("events by location %v", byLoc)
			}
			// Per thread, each hit at the entry is followed by one at the offset.
			next := make(map[int]string)
			for _, e := range evs {
				if want := next[e.tid]; want != "" && e.name != want {
					t.Fatalf("thread %d: %s where %s was due: %q", e.tid, e.name, want, e.line)
				}
				if e.name == "p_work_0" {
					next[e.tid] = name
				} else {
					next[e.tid] = "p_work_0"
				}
			}
		})
	}
}

// TestLibc: probes on a shared library's function.
func TestLibc(t *testing.T) {
	t.Parallel()
	rand := funcSym(t, libcPath, "rand")
	loc := fmt.Sprintf("rand+0x0/0x%x", rand.Size)
	for _, tc := range []struct {
		v    variant
		spec string
	}{
		{o2pie, "p:libc:rand"},
		{o2pie, "p:libc.so.6:rand"},
		{o2pie, "p:" + libcPath + ":rand"},
		{o0nopie, "p:libc:rand"},
	} {
		t.Run(fmt.Sprintf("%v/%s", tc.v, tc.spec), func(t *testing.T) {
			t.Parallel()
			evs := traced(t, nil, []string{tc.spec}, bin("loop", tc.v), "10", "1", "500")
			wantEvents(t, evs, 500, "p_rand_0", loc)
		})
	}
	t.Run("with-work", func(t *testing.T) {
		t.Parallel()
		loop := bin("loop", o2pie)
		evs := traced(t, nil, []string{"p:work", "p:libc:rand"}, loop, "100", "1", "50")
		if got := countByName(evs); len(evs) != 150 || got["p_work_0"] != 100 || got["p_rand_0"] != 50 {
			t.Errorf("events by name %v, want 100 p_work_0 and 50 p_rand_0", got)
		}
		if got := countByLoc(evs); got[workLoc(t, loop, 0)] != 100 || got[loc] != 50 {
			t.Errorf("events by location %v", got)
		}
	})
}

// TestAddress: 0xADDR (runtime address) and PATH:0xOFFSET (file offset).
func TestAddress(t *testing.T) {
	t.Parallel()
	for _, v := range []variant{o0nopie, o2nopie} {
		loop := bin("loop", v)
		addr := funcSym(t, loop, "work").Value
		spec := fmt.Sprintf("p:0x%x", addr)
		t.Run(fmt.Sprintf("%v/%s", v, spec), func(t *testing.T) {
			t.Parallel()
			evs := traced(t, nil, []string{spec}, loop, "400")
			wantEvents(t, evs, 400, fmt.Sprintf("p_0x%x", addr), workLoc(t, loop, 0))
		})
	}
	for _, v := range []variant{o0pie, o2pie, o2nopie} {
		loop := bin("loop", v)
		off := fileOffset(t, loop, funcSym(t, loop, "work").Value)
		spec := fmt.Sprintf("p:%s:0x%x", loop, off)
		t.Run(fmt.Sprintf("%v/PATH:0x%x", v, off), func(t *testing.T) {
			t.Parallel()
			evs := traced(t, nil, []string{spec}, loop, "400")
			// The default name of such a probe is not part of the contract.
			wantEvents(t, evs, 400, "", workLoc(t, loop, 0))
			if c := countByName(evs); len(c) != 1 {
				t.Errorf("event names %v, want one name", c)
			}
		})
	}
}

func TestGo(t *testing.T) {
	t.Parallel()
	loc := fmt.Sprintf("main.work+0x0/0x%x", funcSym(t, goworkBin, "main.work").Size)
	t.Run("default-name", func(t *testing.T) {
		t.Parallel()
		evs := traced(t, nil, []string{"p:main.work"}, goworkBin, "1000")
		wantEvents(t, evs, 1000, "", loc)
		if c := countByName(evs); len(c) != 1 || (c["p_main.work_0"] != 1000 && c["p_main_work_0"] != 1000) {
			t.Errorf("event names %v, want all p_main.work_0 (or p_main_work_0)", c)
		}
	})
	t.Run("goroutines", func(t *testing.T) {
		t.Parallel()
		evs := traced(t, nil, []string{"p:go/gw main.work"}, goworkBin, "500", "4")
		wantEvents(t, evs, 2000, "gw", loc)
	})
	t.Run("verbose", func(t *testing.T) {
		// -v says why each probe stops the thread, return probes too
		// (they said "()": no reason).
		t.Parallel()
		r := probe(t, "run", "-v", "-o", "/dev/null", "p:main.work", "r:main.loop", "--", goworkBin, "10")
		want := "probe: probe/p_main_work_0: stops the thread (Go program)\n" +
			"probe: probe/r_main_loop_0: stops the thread (Go program)\n" +
			"gowork: done\n"
		if r.code != 0 || r.stderr != want {
			t.Errorf("probe run -v: %v\nwant stderr\n%s", r, want)
		}
	})
}

// badSpec is a SPEC that probe must reject with exit status 2 and one
// line on stderr that contains every string of contains and, if oneOf is
// not empty, one of oneOf.
type badSpec struct {
	spec     string
	contains []string
	oneOf    []string
}

// badSpecs returns bad SPECs for the tracee at path (a loop or spin
// binary, whose work function gives the offset that is not an
// instruction boundary).
func badSpecs(t *testing.T, path string) []badSpec {
	offs, _ := insnOffsets(t, path, "work")
	var mid uint64
	for i := 0; i+1 < len(offs); i++ {
		if offs[i+1]-offs[i] >= 2 {
			mid = offs[i] + 1
			break
		}
	}
	if mid == 0 {
		t.Fatalf("no multi-byte instruction in work: %v", offs)
	}
	return []badSpec{
		{spec: "q:work", contains: []string{"q:work"}},
		{spec: "p:", contains: []string{"p:"}},
		{spec: "p:work+zz", contains: []string{"zz"}},
		{spec: "p:wrk", contains: []string{"wrk", "work"}},
		{spec: "p:libnope:foo", contains: []string{"libnope"}},
		{spec: "p:libc:nosuchfn", contains: []string{"nosuchfn"}},
		{spec: "p:counter_data", contains: []string{"counter_data"}, oneOf: []string{"not a function", "data"}},
		{spec: fmt.Sprintf("p:work+%d", mid), contains: []string{"boundary"}},
	}
}

func (b badSpec) check(t *testing.T, r result) {
	t.Helper()
	if r.code != 2 {
		t.Errorf("want exit status 2, got\n%v", r)
	}
	line := oneLine(t, r)
	for _, s := range b.contains {
		// The spec's registers were made arm64's there (archArgs).
		if s = archRegs(s); !strings.Contains(line, s) {
			t.Errorf("stderr %q does not contain %q", line, s)
		}
	}
	if len(b.oneOf) > 0 {
		ok := false
		for _, s := range b.oneOf {
			ok = ok || strings.Contains(line, s)
		}
		if !ok {
			t.Errorf("stderr %q contains none of %q", line, b.oneOf)
		}
	}
}

func TestBadInputRun(t *testing.T) {
	t.Parallel()
	loop := bin("loop", o0pie)
	for _, b := range badSpecs(t, loop) {
		t.Run(b.spec, func(t *testing.T) {
			t.Parallel()
			// A good probe beside the bad one changes nothing.
			for _, specs := range [][]string{{b.spec}, {"p:work", b.spec}} {
				ev := filepath.Join(t.TempDir(), "events")
				args := append([]string{"run", "-o", ev}, specs...)
				r := probe(t, append(args, "--", loop, "10")...)
				b.check(t, r)
				if r.stdout != "" {
					t.Errorf("probe run %q: the tracee ran: stdout %q", specs, r.stdout)
				}
			}
		})
	}
}

// The optional fifth column: tracing sites, no-return-hook.
var listRE = regexp.MustCompile(`^0x([0-9a-f]{16}) 0x([0-9a-f]+) (\S+) (\S+)(?: \S+)?$`)

type listLine struct {
	addr, size uint64
	module     string
	name       string
}

// parseList parses the output of probe list.
func parseList(t *testing.T, out string) []listLine {
	t.Helper()
	var ls []listLine
	for _, line := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		m := listRE.FindStringSubmatch(line)
		if m == nil {
			t.Fatalf("probe list: bad line %q", line)
		}
		var l listLine
		l.addr, _ = strconv.ParseUint(m[1], 16, 64)
		l.size, _ = strconv.ParseUint(m[2], 16, 64)
		l.module, l.name = m[3], m[4]
		ls = append(ls, l)
	}
	return ls
}

// checkSorted checks that ls is sorted by module, then address.
func checkSorted(t *testing.T, ls []listLine) {
	t.Helper()
	for i := 1; i < len(ls); i++ {
		a, b := ls[i-1], ls[i]
		if a.module > b.module || (a.module == b.module && a.addr > b.addr) {
			t.Errorf("probe list: not sorted by module then address: %+v before %+v", a, b)
			return
		}
	}
}

func listEntry(addr, size uint64, module, name string) string {
	return fmt.Sprintf("0x%016x 0x%x %s %s", addr, size, module, name)
}

func TestListBinary(t *testing.T) {
	t.Parallel()
	for _, v := range []variant{o0pie, o2nopie} {
		t.Run(v.String(), func(t *testing.T) {
			t.Parallel()
			loop := bin("loop", v)
			work := funcSym(t, loop, "work")
			mainSym := funcSym(t, loop, "main")
			mod := filepath.Base(loop)

			r := probe(t, "list", loop, "wor*")
			if want := listEntry(work.Value, work.Size, mod, "work") + "\n"; r.code != 0 || r.stdout != want || r.stderr != "" {
				t.Errorf("probe list %s 'wor*': want exit status 0 and stdout %q, got\n%v", loop, want, r)
			}

			r = probe(t, "list", loop)
			if r.code != 0 || r.stderr != "" {
				t.Fatalf("probe list %s: want exit status 0, got\n%v", loop, r)
			}
			ls := parseList(t, r.stdout)
			checkSorted(t, ls)
			lines := "\n" + r.stdout
			for _, want := range []string{
				listEntry(work.Value, work.Size, mod, "work"),
				listEntry(mainSym.Value, mainSym.Size, mod, "main"),
			} {
				if !strings.Contains(lines, "\n"+want+"\n") {
					t.Errorf("probe list %s: no line %q in\n%s", loop, want, limit(r.stdout))
				}
			}
			for _, l := range ls {
				if l.module != mod {
					t.Errorf("probe list %s: line of module %q: %+v", loop, l.module, l)
				}
				if l.name == "counter_data" {
					t.Errorf("probe list %s: lists the data object counter_data", loop)
				}
			}
		})
	}
	t.Run("go", func(t *testing.T) {
		t.Parallel()
		work := funcSym(t, goworkBin, "main.work")
		r := probe(t, "list", goworkBin, "main.wor*")
		if want := listEntry(work.Value, work.Size, "gowork", "main.work") + "\n"; r.code != 0 || r.stdout != want {
			t.Errorf("probe list gowork 'main.wor*': want exit status 0 and stdout %q, got\n%v", want, r)
		}
		// As in ftrace, * runs over '/': Go's package paths have them.
		init0 := funcSym(t, goworkBin, "internal/bytealg.init.0")
		r = probe(t, "list", goworkBin, "internal*bytealg.init.0")
		if want := listEntry(init0.Value, init0.Size, "gowork", "internal/bytealg.init.0") + "\n"; r.code != 0 || r.stdout != want {
			t.Errorf("probe list gowork 'internal*bytealg.init.0': want exit status 0 and stdout %q, got\n%v", want, r)
		}
	})
}
