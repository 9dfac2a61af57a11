package integration

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestRunStartsAsUntraced: a program launched by probe run starts with
// what it would have untraced: signal dispositions, mask and pending
// signals, every resource limit, the environment, the open descriptors
// and their flags, umask, working directory, nice value, personality and
// parent-death signal (startstate prints them), with no probe and with a
// probe on one of its functions. Started from this test (a Go program)
// and from startwith, a C launcher that ignores SIGHUP, blocks SIGUSR1
// and SIGALRM, lowers the soft limit of descriptors (which Go raises at
// start-up) and leaves an extra descriptor open. probe ignored SIGPIPE
// for its own writes and its programs inherited that: `yes | head -1`
// said "Broken pipe".
func TestRunStartsAsUntraced(t *testing.T) {
	t.Parallel()
	state := builtOnce(t, "startstate", filepath.Join("testdata", "launch", "startstate.c"), "-O2", "-g", "-Wall")
	with := builtOnce(t, "startwith", filepath.Join("testdata", "launch", "startwith.c"), "-O2", "-g", "-Wall")
	trace := filepath.Join(t.TempDir(), "trace")
	for _, start := range [][]string{nil, {with}} {
		// cmd runs args started as start says.
		cmd := func(args ...string) result {
			t.Helper()
			args = append(append([]string(nil), start...), args...)
			return runCmd(t, nil, args[0], args[1:]...)
		}
		want := cmd(state)
		if want.code != 0 || want.stderr != "" || !strings.Contains(want.stdout, "\nSigIgn:\t") || !strings.Contains(want.stdout, "\nrlimit NOFILE ") {
			t.Fatalf("untraced %q %s:\n%v", start, state, want)
		}
		for _, probes := range [][]string{nil, {"p:report"}} {
			args := append(append([]string{probeBin, "run", "-o", trace}, probes...), "--", state)
			got := cmd(args...)
			if got.code != 0 || got.stderr != "" || got.stdout != want.stdout {
				t.Errorf("%q %q: the program started otherwise than untraced:\n%s\n%v", start, args, lineDiff(want.stdout, got.stdout), got)
			}
			tr, err := os.ReadFile(trace)
			if err != nil {
				t.Fatal(err)
			}
			if hits := strings.Count(string(tr), "p_report_0:"); hits != len(probes) {
				t.Errorf("%q %q: %d hits of p:report in the trace, want %d:\n%s", start, args, hits, len(probes), tr)
			}
		}
	}

	r := probe(t, "run", "-o", trace, "--", "sh", "-c", "yes | head -1")
	if r.code != 0 || r.stdout != "y\n" || r.stderr != "" {
		t.Errorf("probe run -- sh -c 'yes | head -1': want y alone, exit status 0:\n%v", r)
	}
}

// TestOutputReaderGone: a reader of probe's output that goes away (probe
// ... | head) ends the trace, not probe: it detaches, says nothing and
// exits 0, and the program runs on untraced and right. probe catches
// SIGPIPE for this (a write to a standard output then fails with EPIPE)
// rather than ignore it, which its programs would inherit.
func TestOutputReaderGone(t *testing.T) {
	t.Parallel()
	s := startSpin(t, o2pie, 1, 60*time.Second)
	cmd := exec.Command(probeBin, archArgs(probeBin, []string{"attach", strconv.Itoa(s.pid()), "p:work k=%di"})...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(out)
	for n := 0; n < 5 && sc.Scan(); n++ {
	}
	out.Close()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(cmdTimeout):
		cmd.Process.Kill()
		t.Fatalf("probe attach went on for %v after its reader went away", cmdTimeout)
	}
	if code := exitCode(cmd.ProcessState); code != 0 || stderr.String() != "" {
		t.Errorf("probe attach, its reader gone: want exit status 0 and nothing on stderr, got %d:\n%s", code, stderr.String())
	}
	waitFree(t, s, nil)
	s.finish(t)
}

// TestRunOutputRefused: an output that cannot take the trace is refused
// before the program is started (it ran, and the run ended in an I/O
// error, with -o /proc/version as root), and -o to a FIFO works once
// its reader is there.
func TestRunOutputRefused(t *testing.T) {
	t.Parallel()
	fifo := filepath.Join(t.TempDir(), "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	for out, want := range map[string]string{
		"/proc/version": "probe: /proc/version: a file of the kernel's /proc or /sys, not one for a trace\n",
		"/dev/full":     "probe: /dev/full: no space left on device\n",
		"":              `probe: -o "": no file named (give a file, or - for standard output)` + "\n",
		fifo:            "probe: " + fifo + ": a FIFO with no reader (start its reader first)\n",
	} {
		r := probe(t, "run", "-o", out, "p:work", "--", "sh", "-c", "echo ran")
		if r.code != 2 || r.stdout != "" || r.stderr != want {
			t.Errorf("probe run -o %q: want exit status 2, the program not run, and\n%s\ngot\n%v", out, want, r)
		}
	}

	// A reader that is there (its descriptor open before probe opens
	// the FIFO; the trace fits in the pipe's buffer).
	rfd, err := syscall.Open(fifo, syscall.O_RDONLY|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	reader := os.NewFile(uintptr(rfd), fifo)
	defer reader.Close()
	loop := bin("loop", o0pie)
	r := probe(t, "run", "-o", fifo, "p:work", "--", loop, "10")
	if want := runCmd(t, nil, loop, "10"); r.code != 0 || r.stdout != want.stdout || r.stderr != want.stderr {
		t.Fatalf("probe run -o FIFO with its reader:\n%v\nwant as untraced:\n%v", r, want)
	}
	buf := make([]byte, 1<<16)
	n, err := syscall.Read(rfd, buf)
	if err != nil {
		t.Fatal(err)
	}
	if hits := strings.Count(string(buf[:n]), "p_work_0:"); hits != 10 {
		t.Errorf("the FIFO's reader read %d hits of p:work, want 10:\n%s", hits, buf[:n])
	}
}

// lineDiff lists the lines of got that are not at the same place in want,
// and the lines of want they replace.
func lineDiff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	var b strings.Builder
	for i := range max(len(w), len(g)) {
		var wl, gl string
		if i < len(w) {
			wl = w[i]
		}
		if i < len(g) {
			gl = g[i]
		}
		if wl != gl {
			b.WriteString("- " + wl + "\n+ " + gl + "\n")
		}
	}
	return b.String()
}
