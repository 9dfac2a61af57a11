package integration

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Tests of "probe attach" and "probe list PID". They depend on timing, so
// none of them runs in parallel (they all run before the parallel tests).

// checkAttachEvents checks the events of an attach to spin: at least one,
// all named name at location loc, from every worker thread and only from
// workers, each with its worker's own comm.
func checkAttachEvents(t *testing.T, evs []event, workers map[int]string, w window, name, loc string) {
	t.Helper()
	if len(evs) == 0 {
		t.Fatalf("no events")
	}
	wantEvents(t, evs, len(evs), name, loc)
	byTID := countByTID(evs)
	for tid := range byTID {
		if _, ok := workers[tid]; !ok {
			t.Errorf("events from tid %d, which is not a worker of spin %v", tid, workers)
		}
	}
	if len(byTID) != len(workers) {
		t.Errorf("events from %d threads %v, want from all %d workers %v", len(byTID), byTID, len(workers), workers)
	}
	checkCommon(t, evs, w, func(tid int) string { return workers[tid] })
}

func TestAttachDuration(t *testing.T) {
	// Spin's own limit far beyond the test's few seconds, even under the
	// whole suite's load (it once ran out at 30 s before the check).
	s := startSpin(t, o0pie, 4, 120*time.Second)
	workers := s.workers(t)
	ev := filepath.Join(t.TempDir(), "events")
	w0 := monoMicros(t)
	r := probe(t, "attach", "--duration", "2s", "-o", ev, strconv.Itoa(s.pid()), "p:work")
	w1 := monoMicros(t)
	if r.code != 0 {
		t.Fatalf("probe attach: want exit status 0, got\n%v", r)
	}
	noAlarm(t, r)
	if r.elapsed < 1900*time.Millisecond || r.elapsed > 10*time.Second {
		t.Errorf("probe attach --duration 2s took %v", r.elapsed)
	}
	waitFree(t, s, nil)
	evs := parseEventsFile(t, ev)
	checkAttachEvents(t, evs, workers, window{w0, w1}, "p_work_0", workLoc(t, bin("spin", o0pie), 0))
	// Detached, spin goes on by itself.
	time.Sleep(300 * time.Millisecond)
	if s.exited() {
		t.Fatalf("spin exited after the detach:\n%v", s.res)
	}
	if total := s.finish(t); total < len(evs) {
		t.Errorf("spin made %d calls but there are %d events", total, len(evs))
	}
}

func TestAttachSignal(t *testing.T) {
	for _, tc := range []struct {
		sig os.Signal
		v   variant
	}{
		{os.Interrupt, o0pie},
		{syscall.SIGTERM, o2nopie},
		{syscall.SIGHUP, o2pie},
	} {
		t.Run(fmt.Sprintf("%v/%v", tc.sig, tc.v), func(t *testing.T) {
			s := startSpin(t, tc.v, 4, 30*time.Second)
			workers := s.workers(t)
			ev := filepath.Join(t.TempDir(), "events")
			w0 := monoMicros(t)
			p := startProbe(t, "attach", "-v", "-o", ev, strconv.Itoa(s.pid()), "p:work")
			// -v says how the probe's hits are taken once it is in: a
			// second of hits from there (not from the seize, which a
			// loaded machine may take most of the second to follow).
			waitStderr(t, p, "p_work_0", 30*time.Second*timeScale)
			time.Sleep(time.Second)
			if p.exited() {
				t.Fatalf("probe attach exited by itself:\n%v", p.res)
			}
			p.signal(t, tc.sig)
			r := p.wait(t, 10*time.Second)
			w1 := monoMicros(t)
			if r.code != 0 {
				t.Fatalf("probe attach, then %v: want exit status 0, got\n%v", tc.sig, r)
			}
			noAlarm(t, r)
			waitFree(t, s, nil)
			evs := parseEventsFile(t, ev)
			checkAttachEvents(t, evs, workers, window{w0, w1}, "p_work_0", workLoc(t, bin("spin", tc.v), 0))
			time.Sleep(200 * time.Millisecond)
			if total := s.finish(t); total < len(evs) {
				t.Errorf("spin made %d calls but there are %d events", total, len(evs))
			}
		})
	}
}

// TestAttachAddressAndOffset: a runtime address in a PIE and SYM+OFFS
// inside the function, when attaching.
func TestAttachAddressAndOffset(t *testing.T) {
	spin := bin("spin", o0pie)
	s := startSpin(t, o0pie, 2, 30*time.Second)
	workers := s.workers(t)
	addr := loadBias(t, s.pid(), spin) + funcSym(t, spin, "work").Value
	offs, _ := insnOffsets(t, spin, "work")
	off := offs[2]
	ev := filepath.Join(t.TempDir(), "events")
	w0 := monoMicros(t)
	r := probe(t, "attach", "--duration", "1s", "-o", ev, strconv.Itoa(s.pid()),
		fmt.Sprintf("p:0x%x", addr), fmt.Sprintf("p:work+%d", off))
	w1 := monoMicros(t)
	if r.code != 0 {
		t.Fatalf("probe attach: want exit status 0, got\n%v", r)
	}
	noAlarm(t, r)
	waitFree(t, s, nil)
	evs := parseEventsFile(t, ev)
	var atAddr, atOff []event
	for _, e := range evs {
		if e.name == fmt.Sprintf("p_0x%x", addr) {
			atAddr = append(atAddr, e)
		} else {
			atOff = append(atOff, e)
		}
	}
	checkAttachEvents(t, atAddr, workers, window{w0, w1}, fmt.Sprintf("p_0x%x", addr), workLoc(t, spin, 0))
	checkAttachEvents(t, atOff, workers, window{w0, w1}, fmt.Sprintf("p_work_%d", off), workLoc(t, spin, off))
	// Every call hits both; only a call under way at the attach or the
	// detach may hit just one.
	if d := len(atAddr) - len(atOff); d > len(workers) || -d > len(workers) {
		t.Errorf("%d events at the entry, %d at +%d", len(atAddr), len(atOff), off)
	}
	s.finish(t)
}

// TestAttachTraceeExits: the tracee exits while probe is attached: probe
// exits 0 soon after.
func TestAttachTraceeExits(t *testing.T) {
	// Long enough for probe to attach first (TCG: a second or more).
	s := startSpin(t, o0pie, 2, 1500*time.Millisecond*timeScale)
	workers := s.workers(t)
	ev := filepath.Join(t.TempDir(), "events")
	w0 := monoMicros(t)
	p := startProbe(t, "attach", "--duration", "30s", "-o", ev, strconv.Itoa(s.pid()), "p:work")
	total := s.check(t, s.wait(t, 20*time.Second))
	r := p.wait(t, 5*time.Second)
	w1 := monoMicros(t)
	if r.code != 0 {
		t.Fatalf("probe attach to a process that exits: want exit status 0, got\n%v", r)
	}
	noAlarm(t, r)
	evs := parseEventsFile(t, ev)
	checkAttachEvents(t, evs, workers, window{w0, w1}, "p_work_0", workLoc(t, bin("spin", o0pie), 0))
	if total < len(evs) {
		t.Errorf("spin made %d calls but there are %d events", total, len(evs))
	}
}

// TestAttachBadInput: bad input leaves the process untouched.
func TestAttachBadInput(t *testing.T) {
	spin := bin("spin", o0pie)
	s := startSpin(t, o0pie, 2, 30*time.Second)
	pid := strconv.Itoa(s.pid())
	for _, b := range badSpecs(t, spin) {
		t.Run(b.spec, func(t *testing.T) {
			for _, specs := range [][]string{{b.spec}, {"p:work", b.spec}} {
				r := probe(t, append([]string{"attach", "--duration", "1s", pid}, specs...)...)
				b.check(t, r)
				waitFree(t, s, nil)
			}
		})
	}
	for _, tc := range []struct {
		name string
		args []string
		bad  string
	}{
		{"bad-duration", []string{"attach", "--duration", "xyz", pid, "p:work"}, "xyz"},
		{"bad-pid", []string{"attach", "--duration", "1s", "notapid", "p:work"}, "notapid"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := probe(t, tc.args...)
			badSpec{contains: []string{tc.bad}}.check(t, r)
			waitFree(t, s, nil)
		})
	}
	if s.exited() {
		t.Fatalf("spin exited:\n%v", s.res)
	}
	s.finish(t)
}

func TestAttachNonexistentPID(t *testing.T) {
	cmd := exec.Command(bin("loop", o0pie), "1")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	pid := strconv.Itoa(cmd.ProcessState.Pid())
	r := probe(t, "attach", "--duration", "1s", pid, "p:work")
	badSpec{contains: []string{pid}}.check(t, r)
}

// TestAttachTracedByProbe: a second probe attach to the same process fails
// and leaves the first one working.
func TestAttachTracedByProbe(t *testing.T) {
	s := startSpin(t, o0pie, 2, 30*time.Second)
	workers := s.workers(t)
	ev1 := filepath.Join(t.TempDir(), "events1")
	ev2 := filepath.Join(t.TempDir(), "events2")
	pid := strconv.Itoa(s.pid())
	w0 := monoMicros(t)
	p := startProbe(t, "attach", "-o", ev1, pid, "p:work")
	waitTracedBy(t, s.pid(), p.pid(), 10*time.Second)
	time.Sleep(300 * time.Millisecond)

	r := probe(t, "attach", "--duration", "1s", "-o", ev2, pid, "p:work")
	mid := monoMicros(t)
	badSpec{contains: []string{"traced"}}.check(t, r)
	waitTracedBy(t, s.pid(), p.pid(), time.Second)

	time.Sleep(700 * time.Millisecond)
	p.signal(t, os.Interrupt)
	r = p.wait(t, 10*time.Second)
	w1 := monoMicros(t)
	if r.code != 0 {
		t.Fatalf("first probe attach: want exit status 0, got\n%v", r)
	}
	noAlarm(t, r)
	waitFree(t, s, nil)
	evs := parseEventsFile(t, ev1)
	checkAttachEvents(t, evs, workers, window{w0, w1}, "p_work_0", workLoc(t, bin("spin", o0pie), 0))
	later := 0
	for _, e := range evs {
		if e.usec > mid {
			later++
		}
	}
	if later == 0 {
		t.Errorf("the first probe recorded no event after the second one failed")
	}
	s.finish(t)
}

// TestAttachTracedBySeize: a thread of the process is traced by another
// tracer: probe fails and leaves every thread as it was.
func TestAttachTracedBySeize(t *testing.T) {
	for _, which := range []string{"main", "worker"} {
		t.Run(which, func(t *testing.T) {
			s := startSpin(t, o0pie, 3, 30*time.Second)
			tid := s.pid()
			if which == "worker" {
				for w := range s.workers(t) {
					tid = max(tid, w)
				}
			}
			stop := filepath.Join(t.TempDir(), "stop-seize")
			z := startBg(t, nil, seizeBin, strconv.Itoa(tid), stop)
			z.waitStdout(t, "seized\n", 10*time.Second)

			r := probe(t, "attach", "--duration", "1s", strconv.Itoa(s.pid()), "p:work")
			badSpec{contains: []string{"traced"}}.check(t, r)
			waitFree(t, s, map[int]int{tid: z.pid()})

			if err := os.WriteFile(stop, nil, 0o644); err != nil {
				t.Fatal(err)
			}
			if zr := z.wait(t, 10*time.Second); zr.code != 0 {
				t.Fatalf("seize: %v", zr)
			}
			waitFree(t, s, nil)
			s.finish(t)
		})
	}
}

// TestAttachNotPermitted: probe run as an unprivileged user against a
// root process gets EPERM from the kernel, says how to get permission, and
// leaves the process alone.
func TestAttachNotPermitted(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("this test drops privileges with setpriv: run the suite as root")
	}
	// A copy of probe that the unprivileged user may execute.
	dir, err := os.MkdirTemp("", "probe-eperm-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	nobodyProbe := filepath.Join(dir, "probe")
	data, err := os.ReadFile(probeBin)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(nobodyProbe, data, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	s := startSpin(t, o0pie, 2, 30*time.Second)
	r := runCmd(t, nil, "setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
		nobodyProbe, "attach", "--duration", "1s", strconv.Itoa(s.pid()), "p:work")
	badSpec{contains: []string{"not permitted", "CAP_SYS_PTRACE"}}.check(t, r)
	waitFree(t, s, nil)
	s.finish(t)
}

// TestListPID: probe list PID gives runtime addresses, libraries included.
func TestListPID(t *testing.T) {
	spin := bin("spin", o0pie)
	s := startSpin(t, o0pie, 1, 30*time.Second)
	pid := strconv.Itoa(s.pid())
	work := funcSym(t, spin, "work")
	rand := funcSym(t, libcPath, "rand")
	wantWork := listEntry(loadBias(t, s.pid(), spin)+work.Value, work.Size, filepath.Base(spin), "work")
	wantRand := listEntry(loadBias(t, s.pid(), libcPath)+rand.Value, rand.Size, filepath.Base(libcPath), "rand")

	for _, tc := range []struct {
		glob string
		want []string
	}{
		{"ran*", []string{wantRand}},
		{"wor*", []string{wantWork}},
		{"", []string{wantRand, wantWork}},
	} {
		args := []string{"list", pid}
		if tc.glob != "" {
			args = append(args, tc.glob)
		}
		r := probe(t, args...)
		if r.code != 0 || r.stderr != "" {
			t.Fatalf("probe %q: want exit status 0, got\n%v", args, r)
		}
		ls := parseList(t, r.stdout)
		checkSorted(t, ls)
		for _, w := range tc.want {
			if !strings.Contains("\n"+r.stdout, "\n"+w+"\n") {
				t.Errorf("probe %q: no line %q in\n%s", args, w, limit(r.stdout))
			}
		}
		if tc.glob != "" {
			for _, l := range ls {
				if ok, _ := filepath.Match(tc.glob, l.name); !ok {
					t.Errorf("probe %q: %q does not match", args, l.name)
				}
			}
		}
		waitFree(t, s, nil)
	}
	s.finish(t)
}
