package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Tests of exec and of -f (following forks and execs). The tracees are
// built from testdata/follow without PIE, so that the old program's probe
// addresses fall inside the new program's text: a write there would show
// in execd's check of its own text.

// followBins builds the named programs of testdata/follow into one
// directory and returns their paths.
func followBins(t *testing.T, names ...string) []string {
	t.Helper()
	dir := t.TempDir()
	var exes []string
	for _, name := range names {
		exe := filepath.Join(dir, name)
		src, _ := filepath.Abs(filepath.Join("testdata", "follow", name+".c"))
		if err := build(dir, "gcc", "-O2", "-g", "-no-pie", "-Wall", "-pthread", "-o", exe, src); err != nil {
			t.Fatal(err)
		}
		exes = append(exes, exe)
	}
	return exes
}

// execEvents checks the events of execer N then execd M: n hits of
// p_work_0 in execer, then m in execd, each at its own program's work (the
// address is fetched as ip=%ip), and one p_getppid_0 in libc per program
// that was traced.
func execEvents(t *testing.T, evs []event, execer, execd string, n, m int) {
	t.Helper()
	type prog struct {
		path string
		hits int
	}
	progs := []prog{{execer, n}, {execd, m}}
	var got, want []string
	for _, e := range evs {
		got = append(got, fmt.Sprintf("%s %s %s%s", e.comm, e.name, e.loc, e.rest))
	}
	for _, p := range progs {
		if p.hits < 0 {
			continue
		}
		work := funcSym(t, p.path, "work")
		for i := 0; i < p.hits; i++ {
			want = append(want, fmt.Sprintf("%s p_work_0 work+0x0/0x%x ip=0x%x", commOf(p.path), work.Size, work.Value))
		}
	}
	// getppid is called once after the work: its line comes between.
	var ordered []string
	i := 0
	for _, p := range progs {
		if p.hits < 0 {
			continue
		}
		ordered = append(ordered, want[i:i+p.hits]...)
		i += p.hits
		ordered = append(ordered, commOf(p.path)+" p_getppid_0 getppid")
	}
	for j := range got {
		if j < len(ordered) && strings.HasSuffix(ordered[j], " getppid") && strings.HasPrefix(got[j], ordered[j]+"+0x0/") {
			got[j] = ordered[j]
		}
	}
	if strings.Join(got, "\n") != strings.Join(ordered, "\n") {
		t.Errorf("events:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(ordered, "\n"))
	}
}

var execSpecs = []string{"p:work ip=%ip", "p:libc:getppid"}

// TestExecDropsProbes: without -f, a probed program that execs another
// loses its probes with one note; the new program runs to the end with
// its text untouched, and run reports its exit status.
func TestExecDropsProbes(t *testing.T) {
	t.Parallel()
	exes := followBins(t, "execer", "execd")
	execer, execd := exes[0], exes[1]
	want := runCmd(t, nil, execer, "3", execd, "4")
	if want.code != 7 || !strings.Contains(want.stdout, "execd text intact 1\n") {
		t.Fatalf("untraced run:\n%v", want)
	}
	ev := filepath.Join(t.TempDir(), "events")
	got := probe(t, append(append([]string{"run", "-o", ev}, execSpecs...), "--", execer, "3", execd, "4")...)
	if got.code != want.code || got.stdout != want.stdout {
		t.Fatalf("probe run:\n%v\nwant as untraced:\n%v", got, want)
	}
	note := regexp.MustCompile(`^probe: pid \d+ exec'd ` + regexp.QuoteMeta(execd) + `: its probes were dropped \(-f re-resolves them\)\n$`)
	if !note.MatchString(got.stderr) {
		t.Errorf("stderr %q, want the one note about dropped probes", got.stderr)
	}
	execEvents(t, parseEventsFile(t, ev), execer, execd, 3, -1)

	// A syscall probe names no address: it stays across the exec.
	got = probe(t, "run", "-o", ev, "p:sys_getppid", "p:work", "--", execer, "3", execd, "4")
	if got.code != 7 || got.stdout != want.stdout {
		t.Fatalf("probe run:\n%v\nwant as untraced:\n%v", got, want)
	}
	var lines []string
	for _, e := range parseEventsFile(t, ev) {
		if e.name == "p_sys_getppid_0" {
			lines = append(lines, e.comm+" "+e.loc)
		}
	}
	if w := []string{"execer sys_getppid", "execd sys_getppid"}; strings.Join(lines, ",") != strings.Join(w, ",") {
		t.Errorf("syscall probe events %q, want %q", lines, w)
	}
}

// TestExecFollowed: with -f, the probes are resolved again in the program
// exec'd (its own work and getppid in its libc): exactly N+M work hits.
func TestExecFollowed(t *testing.T) {
	t.Parallel()
	exes := followBins(t, "execer", "execd")
	execer, execd := exes[0], exes[1]
	ev := filepath.Join(t.TempDir(), "events")
	got := probe(t, append(append([]string{"run", "-f", "-o", ev}, execSpecs...), "--", execer, "3", execd, "4")...)
	// execd finds our breakpoint in its work: its text differs from its file.
	wantOut := "execer sum 12 ppid-ok 1\nexecd sum 38 ppid-ok 1\nexecd text intact 0\n"
	if got.code != 7 || got.stdout != wantOut || got.stderr != "" {
		t.Fatalf("probe run -f:\n%v\nwant exit 7, no stderr, stdout:\n%s", got, wantOut)
	}
	execEvents(t, parseEventsFile(t, ev), execer, execd, 3, 4)

	// A spec the new program lacks is noted once, not an error.
	got = probe(t, "run", "-f", "-o", ev, "p:work", "p:execer:main", "--", execer, "2", execd, "1")
	note := fmt.Sprintf("exec'd %s: probe/p_main_0 not installed: ", execd)
	if got.code != 7 || strings.Count(got.stderr, "\n") != 1 || !strings.Contains(got.stderr, note) {
		t.Errorf("probe run -f with a spec execd lacks:\n%v\nwant exit 7 and one note containing %q", got, note)
	}
	if c := countByName(parseEventsFile(t, ev)); c["p_work_0"] != 3 || c["p_main_0"] != 1 {
		t.Errorf("hits %v, want p_work_0:3 p_main_0:1", c)
	}
}

// TestExecAttachDetach: attached to a program that execs, probe detaches
// after the exec (Ctrl-C) without writing the old program's bytes into
// the new one; with -f it takes out the probes it put into the new one.
func TestExecAttachDetach(t *testing.T) {
	t.Parallel()
	exes := followBins(t, "execer", "execd")
	execer, execd := exes[0], exes[1]
	for _, follow := range []bool{false, true} {
		t.Run(fmt.Sprintf("follow=%v", follow), func(t *testing.T) {
			tr := startBg(t, nil, execer, "3", execd, "4", "wait")
			tr.waitStdout(t, "ready\n", 10*time.Second)
			ev := filepath.Join(t.TempDir(), "events")
			args := []string{"attach", "-o", ev}
			if follow {
				args = append(args, "-f")
			}
			pr := startProbe(t, append(append(args, fmt.Sprint(tr.pid())), execSpecs...)...)
			waitTracedBy(t, tr.pid(), pr.pid(), 20*time.Second)
			waitPatched(t, tr.pid(), funcSym(t, execer, "work").Value, 20*time.Second)
			tr.signal(t, syscall.SIGUSR1)
			tr.waitStdout(t, "done\n", 20*time.Second)
			pr.signal(t, syscall.SIGINT)
			res := pr.wait(t, 30*time.Second)
			if res.code != 0 {
				t.Fatalf("probe attach:\n%v", res)
			}
			waitUntraced(t, tr.pid(), 10*time.Second)
			tr.signal(t, syscall.SIGUSR1)
			out := tr.wait(t, 20*time.Second)
			wantOut := "ready\nexecer sum 12 ppid-ok 1\nexecd sum 38 ppid-ok 1\ndone\nexecd text intact 1\n"
			if out.code != 7 || out.stdout != wantOut {
				t.Errorf("tracee:\n%v\nwant exit 7 and:\n%s", out, wantOut)
			}
			evs := parseEventsFile(t, ev)
			if follow {
				if res.stderr != "" {
					t.Errorf("stderr %q, want none", res.stderr)
				}
				execEvents(t, evs, execer, execd, 3, 4)
			} else {
				if !strings.Contains(res.stderr, "its probes were dropped") {
					t.Errorf("stderr %q, want the note about dropped probes", res.stderr)
				}
				execEvents(t, evs, execer, execd, 3, -1)
			}
		})
	}
}

// waitPatched waits until probe has installed its probe at addr in pid's
// memory.
func waitPatched(t *testing.T, pid int, addr uint64, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var got [4]byte
	for {
		f, err := os.Open(fmt.Sprintf("/proc/%d/mem", pid))
		if err == nil {
			_, err = f.ReadAt(got[:], int64(addr))
			f.Close()
		}
		if err == nil && patched(got[:]) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("pid %d: bytes at %#x are % x (err %v) after %v, want a breakpoint or a jmp", pid, addr, got, err, timeout)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// waitUntraced waits until no thread of pid is traced.
func waitUntraced(t *testing.T, pid int, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		traced := false
		tids, err := taskIDs(pid)
		if err != nil {
			t.Fatalf("pid %d: %v", pid, err)
		}
		for _, tid := range tids {
			if tp, err := tracerPid(pid, tid); err != nil || tp != 0 {
				traced = true
			}
		}
		if !traced {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %v, pid %d is still traced:\n%s", timeout, pid, threadsReport(pid))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// runFollowed runs cmd under probe run with -o and the extra args, checks
// that its output and exit status are those of an untraced run, and
// returns the events.
func runFollowed(t *testing.T, args []string, cmd ...string) []event {
	t.Helper()
	want := runCmd(t, nil, cmd[0], cmd[1:]...)
	ev := filepath.Join(t.TempDir(), "events")
	all := append(append([]string{"run", "-o", ev}, args...), "--")
	got := probe(t, append(all, cmd...)...)
	if got.code != want.code || got.stdout != want.stdout || got.stderr != want.stderr {
		t.Fatalf("probe %q:\n%v\nwant the same as untraced:\n%v", all, got, want)
	}
	return parseEventsFile(t, ev)
}

// byTask groups events by tid, in order: each process here is single-threaded.
func byTask(evs []event) (order []int, lines map[int][]string, comm map[int]string) {
	lines, comm = map[int][]string{}, map[int]string{}
	for _, e := range evs {
		if lines[e.tid] == nil {
			order = append(order, e.tid)
		}
		lines[e.tid] = append(lines[e.tid], e.name)
		comm[e.tid] = e.comm
	}
	return order, lines, comm
}

// TestForkFollowed: with -f, every child of the forks tracee is traced
// with the probes and its lines carry its own pid and comm: a fork child
// (returning from spawn through its copy of the hijacked return, then
// work 5+2 times), a vfork child once it has exec'd this program (work 5
// times; before the exec it runs adopted, unreported), a posix_spawn
// child likewise. The parent's hits are its own; all finish as untraced.
func TestForkFollowed(t *testing.T) {
	t.Parallel()
	for _, v := range []variant{o0pie, o2nopie} {
		t.Run(v.String(), func(t *testing.T) {
			t.Parallel()
			exe := lifecycleBin(t, "forks", v)
			const rounds = 3
			evs := runFollowed(t, []string{"-f", "p:work", "r:spawn"}, exe, fmt.Sprint(rounds))
			order, lines, comm := byTask(evs)
			if len(order) == 0 {
				t.Fatal("no events")
			}
			parent := order[0]
			want := map[string]int{}
			for _, tid := range order {
				got := strings.Join(lines[tid], " ")
				kind := ""
				switch {
				case tid == parent:
					kind = "parent"
					w := strings.TrimSpace(strings.Repeat("p_work_0 ", 3) + strings.Repeat("r_spawn_0 ", rounds) + "p_work_0")
					if got != w || comm[tid] != "forks" {
						t.Errorf("parent %d (%s): %s\nwant forks: %s", tid, comm[tid], got, w)
					}
				case got == "r_spawn_0 "+strings.TrimSpace(strings.Repeat("p_work_0 ", 7)) && comm[tid] == "forks":
					kind = "fork child"
				case got == strings.TrimSpace(strings.Repeat("p_work_0 ", 5)) && comm[tid] == "exe":
					kind = "exec'd child" // vfork then exec, or posix_spawn
				default:
					t.Errorf("task %d (%s): unexpected events %s", tid, comm[tid], got)
				}
				want[kind]++
			}
			if want["parent"] != 1 || want["fork child"] != rounds || want["exec'd child"] != 2*rounds {
				t.Errorf("tasks %v, want 1 parent, %d fork children, %d exec'd children", want, rounds, 2*rounds)
			}
			for _, e := range evs {
				if e.name == "r_spawn_0" && e.retFunc != "spawn" {
					t.Errorf("return event %q, want one from spawn", e.line)
				}
			}
		})
	}
}

// TestGoForkChild: a Go program starting a child with os/exec (clone with
// CLONE_VM|CLONE_VFORK, so the child runs on the parent's probed memory
// until it execs): without -f the child finishes normally and only the
// parent's hits are reported; with -f the child's are too, with its pid.
func TestGoForkChild(t *testing.T) {
	t.Parallel()
	exe := filepath.Join(t.TempDir(), "gofork")
	if err := build(repoRoot, "go", "build", "-o", exe, "./integration/testdata/follow/gofork"); err != nil {
		t.Fatal(err)
	}
	for _, follow := range []bool{false, true} {
		args := []string{"p:main.work"}
		if follow {
			args = append(args, "-f")
		}
		evs := runFollowed(t, args, exe, "3", "4")
		// By comm: the Go runtime may run main on another thread after
		// the fork.
		var order []string
		hits := map[string]int{}
		for _, e := range evs {
			if hits[e.comm] == 0 {
				order = append(order, e.comm)
			}
			hits[e.comm]++
		}
		var got []string
		for _, c := range order {
			got = append(got, fmt.Sprintf("%s:%d", c, hits[c]))
		}
		want := "gofork:6"
		if follow {
			want = "gofork:6 exe:4"
		}
		if strings.Join(got, " ") != want {
			t.Errorf("follow=%v: hits by task %v, want %s", follow, got, want)
		}
	}
}

// TestAttachFollowDetach: attach -f to a process that forks after the
// attach; the child is traced with entry and return probes, and Ctrl-C
// lets both go cleanly, each finishing with every result right. With
// "orphan" the parent exits first: probe stays for the child, and its
// Ctrl-C reaches the child through the doorbell moved to it.
func TestAttachFollowDetach(t *testing.T) {
	t.Parallel()
	exe := followBins(t, "forkloop")[0]
	for _, c := range []struct{ orphan, inprocess bool }{{false, false}, {true, false}, {false, true}} {
		orphan := c.orphan
		t.Run(fmt.Sprintf("orphan=%v,inprocess=%v", orphan, c.inprocess), func(t *testing.T) {
			dir := t.TempDir()
			stop, out := filepath.Join(dir, "stop"), filepath.Join(dir, "out")
			args := []string{stop}
			if orphan {
				args = append(args, "orphan", out)
			}
			tr := startBg(t, nil, exe, args...)
			tr.waitStdout(t, "ready\n", 10*time.Second)
			ev := filepath.Join(dir, "events")
			flags := []string{"attach", "-f", "-o", ev}
			if !c.inprocess {
				flags = append(flags, "--no-inprocess")
			}
			pr := startProbe(t, append(flags, fmt.Sprint(tr.pid()), "p:work", "r:work")...)
			waitTracedBy(t, tr.pid(), pr.pid(), 20*time.Second)
			waitPatched(t, tr.pid(), funcSym(t, exe, "work").Value, 20*time.Second)
			tr.signal(t, syscall.SIGUSR1)
			tr.waitStdout(t, "child pid ", 20*time.Second)
			var child int
			fmt.Sscanf(tr.stdout.String()[strings.Index(tr.stdout.String(), "child pid "):], "child pid %d", &child)
			if orphan {
				if r := tr.wait(t, 20*time.Second); r.code != 0 {
					t.Fatalf("parent: %v", r)
				}
				waitFileHas(t, out, "child running\n", 30*time.Second)
				if pr.exited() {
					t.Fatalf("probe exited with the followed child still running:\n%v", pr.res)
				}
			} else {
				tr.waitStdout(t, "parent running\n", 30*time.Second)
				tr.waitStdout(t, "child running\n", 30*time.Second)
			}
			pr.signal(t, syscall.SIGINT)
			res := pr.wait(t, 30*time.Second)
			if res.code != 0 || res.stderr != "" {
				t.Fatalf("probe attach -f, then SIGINT:\n%v", res)
			}
			waitUntraced(t, child, 10*time.Second)
			if !orphan {
				waitUntraced(t, tr.pid(), 10*time.Second)
			}
			if err := os.WriteFile(stop, nil, 0o644); err != nil {
				t.Fatal(err)
			}
			if orphan {
				waitFileHas(t, out, "child bad 0\n", 30*time.Second)
			} else {
				r := tr.wait(t, 30*time.Second)
				for _, w := range []string{"parent bad 0\n", "child bad 0\n", "child exit 0\n"} {
					if r.code != 0 || !strings.Contains(r.stdout, w) {
						t.Errorf("tracee: %v\nwant exit 0 and %q", r, w)
					}
				}
			}
			// In the tracee, work() runs at full speed and outruns the
			// trace: records are lost (and counted), entries and returns
			// alike.
			lossy := c.inprocess && strings.Contains(readFile(t, ev), " events lost in the tracee")
			hits := map[string]int{}
			for _, e := range parseEventsFile(t, ev) {
				who := "parent"
				if e.tid == child {
					who = "child"
				} else if e.tid != tr.pid() {
					who = fmt.Sprint(e.tid)
				}
				hits[who+" "+e.name]++
			}
			for _, who := range []string{"parent", "child"} {
				if orphan && who == "parent" {
					continue
				}
				p, r := hits[who+" p_work_0"], hits[who+" r_work_0"]
				if p < 1000 || r < 1000 || !lossy && (r < p-1 || r > p) {
					t.Errorf("%s: %d entries, %d returns; want at least 1000, and a return for each but the last", who, p, r)
				}
			}
			if want := 2 + 2*boolInt(!orphan); len(hits) != want {
				t.Errorf("events by task %v, want only the parent's and the child's", hits)
			}
		})
	}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// waitFileHas waits until file contains s.
func waitFileHas(t *testing.T, file, s string, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		b, _ := os.ReadFile(file)
		if strings.Contains(string(b), s) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s does not contain %q after %v: %q", file, s, timeout, b)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestExecFromThread: a thread other than the leader execs while two
// others run through entry and return probes: the threads vanish, the
// execing one becomes the leader, and with -f the new program's probes
// fire exactly; without -f they are dropped. Both run to the end.
func TestExecFromThread(t *testing.T) {
	t.Parallel()
	exes := followBins(t, "threxec", "execd")
	threxec, execd := exes[0], exes[1]
	for _, follow := range []bool{false, true} {
		ev := filepath.Join(t.TempDir(), "events")
		args := []string{"run", "-o", ev, "p:work", "r:work"}
		if follow {
			args = append(args, "-f")
		}
		got := probe(t, append(args, "--", threxec, execd, "4")...)
		intact := map[bool]string{false: "1", true: "0"}[follow]
		if want := "execd sum 38 ppid-ok 1\nexecd text intact " + intact + "\n"; got.code != 7 || got.stdout != want {
			t.Fatalf("follow=%v: probe run:\n%v\nwant exit 7 and:\n%s", follow, got, want)
		}
		hits := map[string]int{}
		for _, e := range parseEventsFile(t, ev) {
			hits[e.comm+" "+e.name]++
		}
		if hits["threxec p_work_0"] < 100 || hits["threxec r_work_0"] < 100 {
			t.Errorf("follow=%v: hits %v, want at least 100 entries and returns in threxec", follow, hits)
		}
		if n := map[bool]int{false: 0, true: 4}[follow]; hits["execd p_work_0"] != n || hits["execd r_work_0"] != n {
			t.Errorf("follow=%v: hits %v, want %d entries and returns in execd", follow, hits, n)
		}
	}
}

// TestTracersFollowExec: with -f the function tracers go on into the
// program exec'd, its functions selected again there, as ltrace -f does:
// function_graph shows execer's 3 calls of work and execd's 4, each under
// its own comm; without -f it says where it stops. The programs compute
// what they do untraced.
func TestTracersFollowExec(t *testing.T) {
	t.Parallel()
	exes := followBins(t, "execer", "execd")
	execer, execd := exes[0], exes[1]
	want := runCmd(t, nil, execer, "3", execd, "4")
	out := filepath.Join(t.TempDir(), "graph")
	for _, follow := range []bool{true, false} {
		args := []string{"run", "--tracer", "function_graph", "-o", out}
		if follow {
			args = append(args, "-f")
		}
		got := probe(t, append(args, "--", execer, "3", execd, "4")...)
		note := "exec'd: the function tracer stops here (-f follows it into the new program)\n"
		wantOut := want.stdout
		if follow {
			// execd finds the tracer's jumps in its text.
			note, wantOut = "", strings.Replace(wantOut, "text intact 1", "text intact 0", 1)
		}
		if got.code != want.code || got.stdout != wantOut || !strings.HasSuffix(got.stderr, note) || strings.Count(got.stderr, "\n") != strings.Count(note, "\n") {
			t.Fatalf("probe %q:\n%v\nwant as untraced (%v) and stderr %q", args, got, want, note)
		}
		graph, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		calls := map[string]int{}
		for _, m := range regexp.MustCompile(`(?m)^ *\d+\) +(\w+)-\d+ +\|.*\|  +(work\(\);|main\(\) \{)$`).FindAllStringSubmatch(string(graph), -1) {
			calls[m[1]+" "+m[2]]++
		}
		wantCalls := map[string]int{"execer main() {": 1, "execer work();": 3}
		if follow {
			wantCalls["execd main() {"], wantCalls["execd work();"] = 1, 4
		}
		if !reflect.DeepEqual(calls, wantCalls) {
			t.Errorf("-f %v: calls %v, want %v; the graph:\n%s", follow, calls, wantCalls, graph)
		}
	}
}

// TestCallsFollowForkExec: --calls -f shows the calls of every child as
// ltrace -f does: a fork child's return from fork as "<... fork resumed>
// = 0", then its own calls; a child that exec'd this program again (vfork
// then exec, posix_spawn) its calls in the new program; the parent "fork()
// = PID" for each fork child.
func TestCallsFollowForkExec(t *testing.T) {
	t.Parallel()
	exe := lifecycleBin(t, "forks", o2pie)
	const rounds = 2
	want := runCmd(t, nil, exe, fmt.Sprint(rounds))
	out := filepath.Join(t.TempDir(), "calls")
	got := probe(t, "run", "-f", "--calls", "libc:fork,libc:printf", "-o", out, "--", exe, fmt.Sprint(rounds))
	if got.code != want.code || got.stdout != want.stdout || got.stderr != "" {
		t.Fatalf("probe run -f --calls:\n%v\nwant as untraced:\n%v", got, want)
	}
	text, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	byPid := map[string][]string{}
	var order []string
	for _, line := range strings.Split(strings.TrimSuffix(string(text), "\n"), "\n") {
		m := regexp.MustCompile(`^\[pid (\d+)\] (.*?) *= (.*)$`).FindStringSubmatch(line)
		if m == nil {
			t.Fatalf("line %q is not ltrace's; the trace:\n%s", line, text)
		}
		if byPid[m[1]] == nil {
			order = append(order, m[1])
		}
		byPid[m[1]] = append(byPid[m[1]], m[2]+" = "+m[3])
	}
	forked := map[string]bool{}
	var parent []string
	kinds := map[string]int{}
	for _, pid := range order {
		lines := strings.Join(byPid[pid], "\n")
		switch {
		case strings.HasPrefix(lines, "printf(\"%s child exit %d\\n\"") || strings.Contains(lines, "fork() = "):
			parent = byPid[pid]
			kinds["parent"]++
		case lines == "<... fork resumed> = 0\nprintf(\"fork child sum %d\\n\", 25) = 18":
			forked[pid] = true
			kinds["fork child"]++
		case lines == "printf(\"exec child sum %d\\n\", 25) = 18":
			kinds["exec'd child"]++
		default:
			t.Errorf("pid %s: unexpected calls\n%s", pid, lines)
		}
	}
	if kinds["parent"] != 1 || kinds["fork child"] != rounds || kinds["exec'd child"] != 2*rounds {
		t.Errorf("processes %v, want 1 parent, %d fork children, %d exec'd children; the trace:\n%s", kinds, rounds, 2*rounds, text)
	}
	forks := 0
	for _, l := range parent {
		if pid, ok := strings.CutPrefix(l, "fork() = "); ok {
			forks++
			if !forked[pid] {
				t.Errorf("parent: %q names no fork child of the trace", l)
			}
		}
	}
	if forks != rounds {
		t.Errorf("parent: %d fork() lines, want %d:\n%s", forks, rounds, strings.Join(parent, "\n"))
	}
}
