package integration

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Tests of the process lifecycle under probes: children, syscalls,
// signals and thread churn. Each builds its own tracee from
// testdata/lifecycle.

// lifecycleBin builds testdata/lifecycle/NAME.c with v's flags.
func lifecycleBin(t *testing.T, name string, v variant) string {
	t.Helper()
	exe := filepath.Join(t.TempDir(), name)
	src, _ := filepath.Abs(filepath.Join("testdata", "lifecycle", name+".c"))
	if err := build(filepath.Dir(exe), "gcc", append(v.flags(), "-o", exe, src)...); err != nil {
		t.Fatal(err)
	}
	return exe
}

// TestForkChildrenNotFollowed: children of a probed process (fork, vfork,
// posix_spawn) run the probed code and finish exactly as untraced, a fork
// child returning through its copy of a hijacked return address; the
// parent's hits are exact and only the parent's.
func TestForkChildrenNotFollowed(t *testing.T) {
	t.Parallel()
	for _, v := range []variant{o0pie, o2nopie} {
		t.Run(v.String(), func(t *testing.T) {
			t.Parallel()
			exe := lifecycleBin(t, "forks", v)
			const rounds = 3
			evs := traced(t, nil, []string{"p:work", "r:spawn"}, exe, "3")
			got := countByName(evs)
			// The parent calls work 3 times before forking, once after.
			if got["p_work_0"] != 4 || got["r_spawn_0"] != rounds || len(got) != 2 {
				t.Errorf("hits %v, want p_work_0:4 r_spawn_0:%d", got, rounds)
			}
			if tids := countByTID(evs); len(tids) != 1 {
				t.Errorf("events from %v, want the parent only", tids)
			}
			for _, e := range evs {
				if e.name == "r_spawn_0" && e.retFunc != "spawn" {
					t.Errorf("return event %q, want one from spawn", e.line)
				}
			}
		})
	}
}

// TestSyscallProbes: p:/r:sys_openat and sys_open fire at the system
// call's entry and exit with its arguments and result; glibc's open() is
// the openat system call, the raw open system call is sys_open.
func TestSyscallProbes(t *testing.T) {
	t.Parallel()
	exe := lifecycleBin(t, "syscalls", o2pie)
	file := filepath.Join(t.TempDir(), "present")
	if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(t.TempDir(), "missing")
	specs := []string{
		`p:sys_openat dfd=$arg1:s32 path=+0($arg2):string flags=$arg3:x32`, `r:sys_openat $retval:s64`,
		`p:sys_open path=+0($arg1):string flags=$arg2:x32`, `r:sys_open $retval:s64`,
	}
	raw := []string{
		fmt.Sprintf(`p_sys_open_0: (sys_open) path="%s" flags=0x80000`, file),
		`r_sys_open_0: (syscall) <- sys_open arg1=4`,
	}
	if runtime.GOARCH == "arm64" {
		// No open system call: the raw call is an openat.
		specs = specs[:2]
		raw = []string{
			fmt.Sprintf(`p_sys_openat_0: (sys_openat) dfd=-100 path="%s" flags=0x80000`, file),
			`r_sys_openat_0: (syscall) <- sys_openat arg1=4`,
		}
	}
	evs := tracedSyscalls(t, specs, exe, file, missing)
	var got []string
	for _, e := range evs {
		line := e.name + ": (" + e.loc + ")" + e.rest
		if e.retFunc != "" {
			// Where the system call returned to is libc's business.
			line = fmt.Sprintf("%s: (%s) <- %s%s", e.name, e.sym, e.retFunc, e.rest)
		}
		got = append(got, line)
	}
	want := []string{
		fmt.Sprintf(`p_sys_openat_0: (sys_openat) dfd=-100 path="%s" flags=0x0`, file),
		`r_sys_openat_0: (%s) <- sys_openat arg1=3`,
		fmt.Sprintf(`p_sys_openat_0: (sys_openat) dfd=-100 path="%s" flags=0x0`, missing),
		`r_sys_openat_0: (%s) <- sys_openat arg1=-2`,
		raw[0], raw[1],
	}
	if len(got) != len(want) {
		t.Fatalf("events:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	for i := range want {
		w := want[i]
		if strings.Contains(w, "(%s)") {
			// glibc's open wrapper: open, open64 or __libc_open64.
			w = strings.Replace(w, "%s", evs[i].sym, 1)
			if !strings.Contains(evs[i].sym, "open") {
				t.Errorf("event %d returns to %q, want glibc's open", i, evs[i].sym)
			}
		}
		if got[i] != w {
			t.Errorf("event %d:\n got %s\nwant %s", i, got[i], w)
		}
	}
}

// tracedSyscalls is traced for syscall probes, whose entry location is
// the system call's name, not SYM+0xOFF/0xSIZE.
func tracedSyscalls(t *testing.T, specs []string, cmd ...string) []event {
	t.Helper()
	want := runCmd(t, nil, cmd[0], cmd[1:]...)
	ev := filepath.Join(t.TempDir(), "events")
	args := append(append(append([]string{"run", "-o", ev}, specs...), "--"), cmd...)
	got := probe(t, args...)
	if got.code != want.code || got.stdout != want.stdout || got.stderr != want.stderr {
		t.Fatalf("probe %q:\n%v\nwant the same as untraced:\n%v", args, got, want)
	}
	return eventsIn(t, ev)
}

// TestSyscallProbeAttachREADME: docs/probes.md's example, on a running process.
func TestSyscallProbeAttachREADME(t *testing.T) {
	t.Parallel()
	exe := lifecycleBin(t, "syscalls", o2pie)
	dir := t.TempDir()
	file, stop := filepath.Join(dir, "present"), filepath.Join(dir, "stop")
	if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	tr := startBg(t, nil, exe, "loop", file, stop)
	tr.waitStdout(t, "ready\n", 10*time.Second)
	r := probe(t, "attach", "--duration", "1s", strconv.Itoa(tr.pid()),
		`p:sys_openat dfd=$arg1:s32 path=+0($arg2):string flags=$arg3:x32`, `r:sys_openat $retval:s64`)
	if r.code != 0 {
		t.Fatalf("probe attach: %v", r)
	}
	_, evs, other := splitOutput(r.stdout)
	if len(other) != 0 {
		t.Errorf("lines that are not events: %q", other)
	}
	if len(evs) < 10 {
		t.Fatalf("%d events in 1s, want a pair per 20 ms:\n%v", len(evs), r)
	}
	// A pair per open; the first and last may be cut by attach and detach.
	for i, e := range evs {
		switch e.name {
		case "p_sys_openat_0":
			if want := fmt.Sprintf(` dfd=-100 path="%s" flags=0x80000`, file); e.loc != "sys_openat" || e.rest != want {
				t.Errorf("entry %q, want (sys_openat)%s", e.line, want)
			}
			if i+1 < len(evs) && evs[i+1].name != "r_sys_openat_0" {
				t.Errorf("entry not followed by its return: %q, %q", e.line, evs[i+1].line)
			}
		case "r_sys_openat_0":
			if e.retFunc != "sys_openat" || e.rest != " arg1=3" {
				t.Errorf("return %q, want <- sys_openat arg1=3", e.line)
			}
		default:
			t.Errorf("unexpected event %q", e.line)
		}
		if e.tid != tr.pid() {
			t.Errorf("event of thread %d, want %d", e.tid, tr.pid())
		}
	}
	os.WriteFile(stop, nil, 0o644)
	if res := tr.wait(t, 10*time.Second); res.code != 0 {
		t.Errorf("tracee after detach: %v", res)
	}
}

// TestThreadChurn: 1,000 short threads each hit a probe once; no hit is
// lost or doubled.
func TestThreadChurn(t *testing.T) {
	t.Parallel()
	exe := lifecycleBin(t, "churn", o2pie)
	evs := traced(t, nil, []string{"p:work"}, exe, "1000")
	if n := countByName(evs)["p_work_0"]; n != 1000 || len(evs) != 1000 {
		t.Errorf("%d work hits (%d events), want 1000", n, len(evs))
	}
	if n := len(countByTID(evs)); n != 1000 {
		t.Errorf("hits from %d threads, want 1000", n)
	}
}

// TestSignalLoad: SIGUSR1 sent to a thread spinning in probed code and
// SIGALRM from a timer reach their handlers, which are probed (entry and
// return), exactly as often as untraced.
func TestSignalLoad(t *testing.T) {
	t.Parallel()
	exe := lifecycleBin(t, "signals", o0pie) // at -O2 the handler tail-calls handled(), which then returns to libc's __restore_rt, a symbol without a size
	// work() spins: in the tracee its records would outrun the output
	// (and be dropped, counted); here every hit is a stop, as the
	// handlers' are.
	evs := traced(t, nil, []string{"--no-inprocess", "p:handled", "r:handled", "p:work"}, exe, "2000")
	got := countByName(evs)
	if got["p_handled_0"] != 2200 || got["r_handled_0"] != 2200 || got["p_work_0"] < 200 {
		t.Errorf("hits %v, want p_handled_0 and r_handled_0 2200 each, p_work_0 at least 200", got)
	}
}

// TestAttachTraceeKilled: a process killed by a signal while probes (and
// syscall stops) are in it is reported as such; probe exits cleanly.
func TestAttachTraceeKilled(t *testing.T) {
	t.Parallel()
	exe := lifecycleBin(t, "syscalls", o2pie)
	dir := t.TempDir()
	file := filepath.Join(dir, "present")
	os.WriteFile(file, nil, 0o644)
	tr := startBg(t, nil, exe, "loop", file, filepath.Join(dir, "stop"))
	tr.waitStdout(t, "ready\n", 10*time.Second)
	pr := startProbe(t, "attach", strconv.Itoa(tr.pid()), `p:sys_openat path=+0($arg2):string`, "p:main")
	pr.waitStdout(t, "p_sys_openat_0", 10*time.Second)
	tr.signal(t, syscall.SIGKILL)
	r := pr.wait(t, 10*time.Second)
	if want := fmt.Sprintf("probe: pid %d killed by SIGKILL\n", tr.pid()); r.code != 0 || r.stderr != want {
		t.Errorf("probe attach: %v\nwant exit 0 and stderr %q", r, want)
	}
	if res := tr.wait(t, 5*time.Second); res.code != 128+9 {
		t.Errorf("tracee: %v, want killed by SIGKILL", res)
	}
}

// TestSyscallProbeStopCont: SIGSTOP stops a process under syscall probes
// as it would untraced (no syscall runs, no event) and SIGCONT resumes it.
func TestSyscallProbeStopCont(t *testing.T) {
	t.Parallel()
	exe := lifecycleBin(t, "syscalls", o2pie)
	dir := t.TempDir()
	file, stop := filepath.Join(dir, "present"), filepath.Join(dir, "stop")
	os.WriteFile(file, nil, 0o644)
	tr := startBg(t, nil, exe, "loop", file, stop)
	tr.waitStdout(t, "ready\n", 10*time.Second)
	pr := startProbe(t, "attach", strconv.Itoa(tr.pid()), `p:sys_openat path=+0($arg2):string`)
	pr.waitStdout(t, "p_sys_openat_0", 10*time.Second)
	tr.signal(t, syscall.SIGSTOP)
	time.Sleep(200 * time.Millisecond)
	before := strings.Count(pr.stdout.String(), "\n")
	time.Sleep(300 * time.Millisecond)
	if after := strings.Count(pr.stdout.String(), "\n"); after != before {
		t.Errorf("%d events while the process was stopped", after-before)
	}
	tr.signal(t, syscall.SIGCONT)
	deadline := time.Now().Add(5 * time.Second)
	for strings.Count(pr.stdout.String(), "\n") < before+5 {
		if time.Now().After(deadline) {
			t.Fatalf("no events after SIGCONT:\n%s", pr.stdout.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	os.WriteFile(stop, nil, 0o644)
	if res := tr.wait(t, 10*time.Second); res.code != 0 {
		t.Errorf("tracee: %v", res)
	}
	if r := pr.wait(t, 10*time.Second); r.code != 0 || r.stderr != "" {
		t.Errorf("probe attach: %v", r)
	}
}

// TestThreadChurnMemory: probe's memory does not grow with the number of
// threads that came and went (thread state is dropped at each exit).
func TestThreadChurnMemory(t *testing.T) {
	t.Parallel()
	exe := lifecycleBin(t, "churn", o2pie)
	maxRSS := func(threads int) int64 {
		cmd := exec.Command(probeBin, "run", "-o", os.DevNull, "p:work", "--", exe, strconv.Itoa(threads))
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%v: %v\n%s", cmd.Args, err, out)
		}
		return cmd.ProcessState.SysUsage().(*syscall.Rusage).Maxrss
	}
	small, large := maxRSS(1000), maxRSS(10000)
	if large > small+small/4 {
		t.Errorf("probe's max RSS %d KiB after 10,000 threads, %d KiB after 1,000: it grows with the threads", large, small)
	}
}
