package integration

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestOutputFilesPrivate: every file probe creates (run -o, record -o,
// report -o, the REPL's -o and output FILE, the REPL history and its
// directory) is readable by its owner only, whatever the umask; a file
// that exists keeps the mode its owner gave it.
func TestOutputFilesPrivate(t *testing.T) {
	old := syscall.Umask(0) // with umask 0, os.Create would give 0666
	defer syscall.Umask(old)
	dir := t.TempDir()
	loop := bin("loop", o0pie)
	at := func(name string) string { return filepath.Join(dir, name) }
	wantMode := func(path string, want os.FileMode) {
		t.Helper()
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if got := fi.Mode().Perm(); got != want {
			t.Errorf("%s: mode %#o, want %#o", path, got, want)
		}
	}
	for _, args := range [][]string{
		{"run", "-o", at("run.txt"), "p:work", "--", loop, "3"},
		{"record", "-o", at("rec"), "p:work", "--", loop, "3"},
		{"report", "-o", at("report.txt"), at("rec")},
	} {
		if r := probe(t, args...); r.code != 0 {
			t.Fatalf("probe %q: %v", args, r)
		}
		wantMode(args[2], 0o600)
	}

	existing := at("existing.txt")
	if err := os.WriteFile(existing, []byte("old contents, longer than the trace will be................................................................................................................................................................"), 0o644); err != nil {
		t.Fatal(err)
	}
	if r := probe(t, "run", "-o", existing, "p:work", "--", loop, "1"); r.code != 0 {
		t.Fatalf("probe run -o existing: %v", r)
	}
	wantMode(existing, 0o644)
	if b, _ := os.ReadFile(existing); len(b) == 0 || string(b[:len("# tracer")]) != "# tracer" || len(parseEventsFile(t, existing)) != 1 {
		t.Errorf("existing file not truncated and rewritten:\n%s", b)
	}

	s := startSpin(t, o0pie, 1, 60*time.Second)
	state := at("state")
	env := []string{"XDG_STATE_HOME=" + state, "HOME=" + t.TempDir()}
	r := startREPL(t, env, true, "attach", "-o", at("repl-o.txt"), strconv.Itoa(s.pid()))
	r.send(t, "output "+at("repl-output.txt"))
	r.send(t, "stats")
	r.waitFor(t, `probe hits: 0\n`)
	r.send(t, "detach")
	if code := r.wait(t); code != 0 {
		t.Fatalf("probe: exit status %d; output:\n%s", code, limit(r.text()))
	}
	wantMode(at("repl-o.txt"), 0o600)
	wantMode(at("repl-output.txt"), 0o600)
	wantMode(filepath.Join(state, "probe"), 0o700)
	wantMode(filepath.Join(state, "probe", "history"), 0o600)
	if b, _ := os.ReadFile(filepath.Join(state, "probe", "history")); string(b) != "output "+at("repl-output.txt")+"\nstats\ndetach\n" {
		t.Errorf("history %q", b)
	}
	waitFree(t, s, nil)
	s.finish(t)
}

// TestOutputSymlinkRefused: an output path that is a symbolic link is not
// followed (O_NOFOLLOW): probe says so in one line, exits 2 before it
// starts or attaches to anything, and the file the link points to (or
// would create) is untouched. A symlinked history file is not written.
// TestOutputStandardStreams: "-" and /dev/stdout, /dev/stderr are the
// descriptors probe holds, not links it follows.
func TestOutputStandardStreams(t *testing.T) {
	loop := bin("loop", o0pie)
	for _, tc := range []struct {
		path   string
		stderr bool
	}{{"-", false}, {"/dev/stdout", false}, {"/dev/stderr", true}} {
		r := probe(t, "run", "-o", tc.path, "p:work", "--", loop, "3")
		trace, other := r.stdout, r.stderr
		if tc.stderr {
			trace, other = r.stderr, r.stdout
		}
		if r.code != 0 || strings.Count(trace, ": p_work_0: (work+0x0/") != 3 || strings.Contains(other, "p_work_0") {
			t.Errorf("probe run -o %s: want exit status 0 and the 3 hits on std%s only; got\n%v", tc.path, map[bool]string{false: "out", true: "err"}[tc.stderr], r)
		}
	}
	if _, err := os.Lstat("-"); !os.IsNotExist(err) {
		t.Errorf("-o - created a file named -: %v", err)
	}
}

func TestOutputSymlinkRefused(t *testing.T) {
	dir := t.TempDir()
	victim := filepath.Join(dir, "victim")
	if err := os.WriteFile(victim, []byte("not probe's\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link")
	dangling := filepath.Join(dir, "dangling")
	if err := os.Symlink(victim, link); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(dir, "created"), dangling); err != nil {
		t.Fatal(err)
	}
	rec := filepath.Join(dir, "rec")
	if r := probe(t, "record", "-o", rec, "p:work", "--", bin("loop", o0pie), "1"); r.code != 0 {
		t.Fatalf("probe record: %v", r)
	}
	s := startSpin(t, o0pie, 1, 60*time.Second)
	pid := strconv.Itoa(s.pid())
	for _, path := range []string{link, dangling} {
		for _, args := range [][]string{
			{"run", "-o", path, "p:work", "--", bin("loop", o0pie), "1"},
			{"record", "-o", path, "p:work", "--", bin("loop", o0pie), "1"},
			{"report", "-o", path, rec},
			{"attach", "-o", path, pid, "p:work"},
			{"attach", "--repl", "-o", path, pid},
		} {
			r := probe(t, args...)
			want := "probe: " + path + " is a symbolic link: probe does not write through one (give the path it points to)\n"
			if r.code != 2 || r.stderr != want || r.stdout != "" {
				t.Errorf("probe %q: want exit status 2, no stdout and stderr %q; got\n%v", args, want, r)
			}
			waitFree(t, s, nil)
		}
	}
	// A link as a directory of the path (etcdir -> a directory holding
	// the victim) is refused too, naming the link.
	etcdir := filepath.Join(dir, "etcdir")
	if err := os.Symlink(dir, etcdir); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"run", "-o", filepath.Join(etcdir, "victim"), "p:work", "--", bin("loop", o0pie), "1"},
		{"attach", "-o", filepath.Join(etcdir, "victim"), pid, "p:work"},
		{"report", "-o", filepath.Join(etcdir, "new"), rec},
	} {
		r := probe(t, args...)
		want := "probe: " + etcdir + " is a symbolic link: probe does not write through one (give the path it points to)\n"
		if r.code != 2 || r.stderr != want || r.stdout != "" {
			t.Errorf("probe %q: want exit status 2, no stdout and stderr %q; got\n%v", args, want, r)
		}
		waitFree(t, s, nil)
	}
	if _, err := os.Lstat(filepath.Join(dir, "new")); !os.IsNotExist(err) {
		t.Errorf("a file was created through the linked directory: %v", err)
	}
	if b, err := os.ReadFile(victim); err != nil || string(b) != "not probe's\n" {
		t.Errorf("the link's target changed: %q, %v", b, err)
	}
	if _, err := os.Lstat(filepath.Join(dir, "created")); !os.IsNotExist(err) {
		t.Errorf("the dangling link's target was created: %v", err)
	}

	// The history file a link: the session runs, keeps no history.
	state := t.TempDir()
	if err := os.Mkdir(filepath.Join(state, "probe"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(victim, filepath.Join(state, "probe", "history")); err != nil {
		t.Fatal(err)
	}
	r := startREPL(t, []string{"XDG_STATE_HOME=" + state, "HOME=" + t.TempDir()}, true, "attach", pid)
	r.send(t, "stats")
	r.waitFor(t, `probe hits: 0\n`)
	r.send(t, "detach")
	if code := r.wait(t); code != 0 {
		t.Fatalf("probe: exit status %d; output:\n%s", code, limit(r.text()))
	}
	if b, err := os.ReadFile(victim); err != nil || string(b) != "not probe's\n" {
		t.Errorf("history written through a link: %q, %v", b, err)
	}
	waitFree(t, s, nil)
	s.finish(t)
}
