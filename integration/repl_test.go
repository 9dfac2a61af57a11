package integration

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/creack/pty"
)

// Tests of the REPL (probe attach with no spec on a terminal, or --repl),
// driven through a pseudo-terminal and through piped stdin, on a running
// spin. The tracee must survive every session and count right after.

// replSession is the probe binary in REPL mode with its input and the
// output it has written so far (stdout and stderr together).
type replSession struct {
	cmd  *exec.Cmd
	in   io.WriteCloser
	out  syncBuf
	tty  bool
	done chan struct{}
	code int
}

func startREPL(t *testing.T, env []string, tty bool, args ...string) *replSession {
	t.Helper()
	r := &replSession{tty: tty, done: make(chan struct{})}
	r.cmd = exec.Command(probeBin, args...)
	r.cmd.Env = append(os.Environ(), env...)
	if tty {
		r.cmd.Env = append(r.cmd.Env, "TERM=xterm")
		ptmx, err := pty.StartWithSize(r.cmd, &pty.Winsize{Rows: 50, Cols: 250})
		if err != nil {
			t.Fatal(err)
		}
		r.in = ptmx
		go func() {
			// A terminal answers readline's cursor position query
			// (DSR, ESC [6n) with ESC [row;colR.
			buf := make([]byte, 64<<10)
			for {
				n, err := ptmx.Read(buf)
				r.out.Write(buf[:n])
				if strings.Contains(string(buf[:n]), "\x1b[6n") {
					io.WriteString(ptmx, "\x1b[1;1R")
				}
				if err != nil { // EIO once the child is gone
					break
				}
			}
			r.cmd.Wait()
			r.code = exitCode(r.cmd.ProcessState)
			ptmx.Close()
			close(r.done)
		}()
	} else {
		in, err := r.cmd.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		r.in = in
		r.cmd.Stdout, r.cmd.Stderr = &r.out, &r.out
		if err := r.cmd.Start(); err != nil {
			t.Fatal(err)
		}
		go func() {
			r.cmd.Wait()
			r.code = exitCode(r.cmd.ProcessState)
			close(r.done)
		}()
	}
	t.Cleanup(func() {
		select {
		case <-r.done:
		default:
			r.cmd.Process.Kill()
			<-r.done
		}
	})
	return r
}

// send types a line (on the terminal: and Enter).
func (r *replSession) send(t *testing.T, line string) {
	t.Helper()
	end := "\n"
	if r.tty {
		end = "\r"
	}
	if _, err := io.WriteString(r.in, archRegs(line)+end); err != nil {
		t.Fatalf("send %q: %v", line, err)
	}
}

// text is the output so far as a terminal would show it, every line
// kept (none scrolls away), prompts taken out. Without a terminal, the
// REPL moves no cursor: the output is the text (and may be hundreds of
// megabytes, which the terminal's play would take minutes over).
func (r *replSession) text() string {
	out := r.out.String()
	if r.tty {
		out = terminalLines(out)
	}
	return strings.ReplaceAll(out, "probe> ", "")
}

// terminalLines plays out what readline writes to a terminal: it clears
// the prompt's line before each write of ours and draws it again after,
// by moving the cursor and erasing, so the text without those moves
// would join a half-typed command to an event line.
func terminalLines(raw string) string {
	lines := [][]rune{nil}
	row, col := 0, 0
	put := func(c rune) {
		for len(lines[row]) < col {
			lines[row] = append(lines[row], ' ')
		}
		if col < len(lines[row]) {
			lines[row][col] = c
		} else {
			lines[row] = append(lines[row], c)
		}
		col++
	}
	in := []rune(raw)
	for i := 0; i < len(in); i++ {
		switch c := in[i]; c {
		case '\r':
			col = 0
		case '\n':
			row, col = row+1, 0
			if row == len(lines) {
				lines = append(lines, nil)
			}
		case '\b':
			col = max(col-1, 0)
		case '\x1b':
			// CSI: ESC [ parameters final-byte.
			if i+1 >= len(in) || in[i+1] != '[' {
				continue
			}
			j := i + 2
			for j < len(in) && (in[j] >= '0' && in[j] <= '9' || in[j] == ';' || in[j] == '?') {
				j++
			}
			if j == len(in) {
				i = j
				break
			}
			n, err := strconv.Atoi(string(in[i+2 : j]))
			if err != nil {
				n = 0
			}
			switch in[j] {
			case 'G': // cursor to column n
				col = max(n-1, 0)
			case 'A': // cursor up n lines
				row = max(row-max(n, 1), 0)
			case 'K': // erase to the end of the line (0), or all of it (2)
				if n == 2 {
					lines[row] = nil
				} else if col < len(lines[row]) {
					lines[row] = lines[row][:col]
				}
			case 'J': // erase to the end of the screen
				if col < len(lines[row]) {
					lines[row] = lines[row][:col]
				}
				lines = lines[:row+1]
			}
			i = j
		default:
			put(c)
		}
	}
	out := make([]string, len(lines))
	for i, l := range lines {
		out[i] = string(l)
	}
	return strings.Join(out, "\n")
}

// waitFor waits until the output matches re and returns the submatches
// of its last match.
func (r *replSession) waitFor(t *testing.T, re string) []string {
	t.Helper()
	rx := regexp.MustCompile(archRegs(re))
	deadline := time.Now().Add(20 * time.Second)
	for {
		if m := rx.FindAllStringSubmatch(r.text(), -1); m != nil {
			return m[len(m)-1]
		}
		select {
		case <-r.done:
			t.Fatalf("probe exited (status %d) before printing %q; output:\n%s", r.code, re, limit(r.text()))
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("probe did not print %q within 20s; output:\n%s", re, limit(r.text()))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// wholeLines is the output up to its last newline: the pipe may have
// handed over part of a line still being written, which would parse as
// an event with a value cut short.
func (r *replSession) wholeLines() string {
	out := r.text()
	return out[:strings.LastIndexByte(out, '\n')+1]
}

// events parses the event lines printed so far.
func (r *replSession) events() []event {
	var evs []event
	for _, line := range strings.Split(r.wholeLines(), "\n") {
		if ev, ok := parseEvent(line); ok {
			evs = append(evs, ev)
		}
	}
	return evs
}

func (r *replSession) waitEvents(t *testing.T, n int) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for len(r.events()) < n {
		if time.Now().After(deadline) {
			t.Fatalf("fewer than %d events within 20s; output:\n%s", n, limit(r.text()))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (r *replSession) wait(t *testing.T) int {
	t.Helper()
	select {
	case <-r.done:
		return r.code
	case <-time.After(20 * time.Second):
		t.Fatalf("probe did not exit within 20s; output:\n%s", limit(r.text()))
	}
	return -1
}

// replScenario is the whole session the issue asks for, on spin with one
// worker: add, events with exact content, list with hit counts that
// match, disable/enable, function_graph, del, a bad command and a bad
// spec, detach.
func replScenario(t *testing.T, r *replSession, s *spinProc, loc string) {
	r.send(t, "add p:work k=%di:s64")
	r.waitFor(t, `added p_work_0\n`)
	r.waitEvents(t, 20)
	r.send(t, "disable p_work_0")
	r.waitFor(t, `disabled p_work_0\n`)
	time.Sleep(200 * time.Millisecond) // the queued events are printed
	r.send(t, "list")
	hits, _ := strconv.Atoi(r.waitFor(t, `probe/p_work_0 +disabled +hits=(\d+) +`+regexp.QuoteMeta(loc)+` +p:work k=%di:s64  \((in-process|stops: [^)]+)\)\n`)[1])
	time.Sleep(200 * time.Millisecond)
	evs := r.events()
	if len(evs) != hits {
		t.Fatalf("%d events printed, list says hits=%d", len(evs), hits)
	}
	// Every call of work is seen while enabled: k counts up by one.
	first := -1
	for i, ev := range evs {
		var k int
		if _, err := fmt.Sscanf(ev.rest, " k=%d", &k); err != nil || ev.name != "p_work_0" || ev.loc != loc || ev.comm != "spin-w0" {
			t.Fatalf("event %d: %q, want spin-w0 ... p_work_0: (%s) k=N", i, ev.line, loc)
		}
		if i == 0 {
			first = k
		} else if k != first+i {
			t.Fatalf("event %d: k=%d, want %d (a call was missed): %q", i, k, first+i, ev.line)
		}
	}
	// Disabled: no more events; enabled again: they come back.
	time.Sleep(100 * time.Millisecond)
	if n := len(r.events()); n != hits {
		t.Fatalf("%d events while disabled", n-hits)
	}
	r.send(t, "enable p_work_0")
	r.waitFor(t, `enabled p_work_0\n`)
	r.waitEvents(t, hits+10)

	r.send(t, "filter work")
	r.send(t, "tracer function_graph")
	r.waitFor(t, `# tracer: function_graph\n`)
	r.waitFor(t, `\d\)\s+spin-w0-\d+\s+\|\s+[+!#*@$ ]\s*\d+\.\d+ us\s+\|\s+work\(\);\n`)
	r.send(t, "tracer nop")
	// A new nop section after the graph, where the probe's events go on.
	r.waitFor(t, `# tracer: function_graph\n`)
	afterGraph := func() string {
		text := r.text()
		return text[strings.LastIndex(text, "# tracer: function_graph\n"):]
	}
	deadline := time.Now().Add(20 * time.Second)
	for !regexp.MustCompile(`# tracer: nop\n#           TASK-PID     CPU#  TIMESTAMP  FUNCTION\n(?:.*\n)*?.*p_work_0: \(` + regexp.QuoteMeta(loc) + `\) k=\d+\n`).MatchString(afterGraph()) {
		if time.Now().After(deadline) {
			t.Fatalf("no nop section with events after function_graph; output:\n%s", limit(afterGraph()))
		}
		time.Sleep(10 * time.Millisecond)
	}

	r.send(t, "del p_work_0")
	r.waitFor(t, `deleted p_work_0 \(\d+ hits\)\n`)
	r.send(t, "frob")
	r.waitFor(t, `probe: unknown command "frob" \(type help\)\n`)
	r.send(t, "add p:nosuchfunc")
	r.waitFor(t, `probe: .*"nosuchfunc".*\n`)
	r.send(t, "list")
	r.waitFor(t, `no probes\n`)
	r.send(t, "detach")
	if code := r.wait(t); code != 0 {
		t.Fatalf("probe: exit status %d, want 0; output:\n%s", code, limit(r.text()))
	}
	checkSurvives(t, s)
}

// checkSurvives checks that spin runs on untraced and ends right.
func checkSurvives(t *testing.T, s *spinProc) {
	t.Helper()
	waitFree(t, s, nil)
	time.Sleep(200 * time.Millisecond)
	if s.exited() {
		t.Fatalf("spin exited after the detach:\n%v", s.res)
	}
	s.finish(t)
}

func TestREPLPiped(t *testing.T) {
	s := startSpin(t, o0pie, 1, 60*time.Second)
	r := startREPL(t, nil, false, "attach", "--repl", strconv.Itoa(s.pid()))
	replScenario(t, r, s, workLoc(t, bin("spin", o0pie), 0))
}

func TestREPLTerminal(t *testing.T) {
	s := startSpin(t, o2pie, 1, 60*time.Second)
	// No spec and a terminal: the REPL, without --repl.
	r := startREPL(t, []string{"XDG_STATE_HOME=" + t.TempDir(), "HOME=" + t.TempDir()}, true, "attach", strconv.Itoa(s.pid()))
	replScenario(t, r, s, workLoc(t, bin("spin", o2pie), 0))
}

// TestREPLPipedEOF: the end of the commands detaches cleanly.
func TestREPLPipedEOF(t *testing.T) {
	s := startSpin(t, o0nopie, 1, 60*time.Second)
	r := startREPL(t, nil, false, "attach", "--repl", strconv.Itoa(s.pid()), "p:work")
	r.waitEvents(t, 5)
	r.in.Close()
	if code := r.wait(t); code != 0 {
		t.Fatalf("probe: exit status %d, want 0; output:\n%s", code, limit(r.text()))
	}
	checkSurvives(t, s)
}

// TestREPLHistoryAndCompletion: history is kept across sessions, and Tab
// completes commands and function names.
func TestREPLHistoryAndCompletion(t *testing.T) {
	s := startSpin(t, o0pie, 1, 60*time.Second)
	state := t.TempDir()
	env := []string{"XDG_STATE_HOME=" + state, "HOME=" + t.TempDir()}
	pid := strconv.Itoa(s.pid())

	r := startREPL(t, env, true, "attach", pid)
	r.send(t, "stats")
	r.waitFor(t, `probe hits: 0\n`)
	// Tab completes "lis" to "list " and "p:wor" to the function work.
	io.WriteString(r.in, "lis\t\r")
	r.waitFor(t, `no probes\n`)
	io.WriteString(r.in, "add p:wor\t\r")
	r.waitFor(t, `added p_work_0\n`)
	r.waitEvents(t, 3)
	r.send(t, "detach")
	if code := r.wait(t); code != 0 {
		t.Fatalf("probe: exit status %d, want 0; output:\n%s", code, limit(r.text()))
	}
	hist, err := os.ReadFile(filepath.Join(state, "probe", "history"))
	if err != nil {
		t.Fatal(err)
	}
	if want := "stats\nlist \nadd p:work \ndetach\n"; string(hist) != want {
		t.Fatalf("history file %q, want %q", hist, want)
	}

	// A second session: Up, Up brings back "add p:work ".
	r = startREPL(t, env, true, "attach", pid)
	for deadline := time.Now().Add(20 * time.Second); !strings.Contains(r.out.String(), "probe> "); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no prompt within 20s; output:\n%s", limit(r.out.String()))
		}
	}
	io.WriteString(r.in, "\x1b[A\x1b[A\r")
	r.waitFor(t, `added p_work_0\n`)
	r.waitEvents(t, 3)
	r.send(t, "quit")
	if code := r.wait(t); code != 0 {
		t.Fatalf("probe: exit status %d, want 0; output:\n%s", code, limit(r.text()))
	}
	checkSurvives(t, s)
}

// TestREPLActionsAndSource: a YAML script sourced into a session adds its
// probe with its count action; stats draws the count, which equals the
// hits list reports; del takes the table away with the probe.
func TestREPLActionsAndSource(t *testing.T) {
	s := startSpin(t, o0pie, 1, 60*time.Second)
	yaml := filepath.Join(t.TempDir(), "count.yaml")
	if err := os.WriteFile(yaml, []byte(archRegs("probes:\n  - at: work\n    args: ['k=%di:s64']\n    actions: [count]\n")), 0o644); err != nil {
		t.Fatal(err)
	}
	r := startREPL(t, nil, false, "attach", "--repl", strconv.Itoa(s.pid()))
	r.send(t, "source "+yaml)
	r.waitFor(t, `added p_work_0\n`)
	time.Sleep(300 * time.Millisecond)
	r.send(t, "disable p_work_0")
	r.waitFor(t, `disabled p_work_0\n`)
	r.send(t, "list")
	hits := r.waitFor(t, `probe/p_work_0 +disabled +hits=(\d+) `)[1]
	r.send(t, "stats")
	table := r.waitFor(t, `# count of probe/p_work_0: (\d+) hits, 1 key\ntotal +(\d+) \|@+\|\n`)
	if table[1] != hits || table[2] != hits || hits == "0" {
		t.Errorf("stats counts %s (row %s), list says hits=%s", table[1], table[2], hits)
	}
	if evs := r.events(); len(evs) != 0 {
		t.Errorf("a count without print printed %d events, e.g. %q", len(evs), evs[0].line)
	}
	r.send(t, "del p_work_0")
	r.waitFor(t, `deleted p_work_0 `)
	r.send(t, "stats")
	r.waitFor(t, `probe hits: 0\n(.*\n){3}`)
	if n := strings.Count(r.text(), "# count of"); n != 1 {
		t.Errorf("after del, stats still draws the count (%d tables in all)", n)
	}
	r.send(t, "detach")
	if code := r.wait(t); code != 0 {
		t.Fatalf("probe: exit status %d, want 0; output:\n%s", code, limit(r.text()))
	}
	checkSurvives(t, s)
}

// TestREPLCompletionInLibraries: Tab completes a function of a library,
// named by MOD: or not, as p:SYM finds one.
func TestREPLCompletionInLibraries(t *testing.T) {
	s := startSpin(t, o0pie, 1, 60*time.Second)
	env := []string{"XDG_STATE_HOME=" + t.TempDir(), "HOME=" + t.TempDir()}
	r := startREPL(t, env, true, "attach", strconv.Itoa(s.pid()))
	io.WriteString(r.in, "add p:libc:getpp\t\r")
	r.waitFor(t, `added p_getppid_0\n`)
	io.WriteString(r.in, "add r:pthread_getattr_n\t\r")
	r.waitFor(t, `added r_pthread_getattr_np_0\n`)
	r.send(t, "detach")
	if code := r.wait(t); code != 0 {
		t.Fatalf("probe: exit status %d, want 0; output:\n%s", code, limit(r.text()))
	}
	checkSurvives(t, s)
}

// TestREPLSessionFixes: a refused add leaves nothing behind (no table at
// detach); the tables at detach are comments once ("# count...", not
// "# # count..."); a switch of output back to the terminal keeps the
// profile's table.
func TestREPLSessionFixes(t *testing.T) {
	s := startSpin(t, o0pie, 1, 60*time.Second)
	dir := t.TempDir()
	trace := filepath.Join(dir, "trace.txt")
	r := startREPL(t, nil, false, "attach", "--repl", "-o", trace, strconv.Itoa(s.pid()))
	r.send(t, "add p:work => count:comm")
	r.waitFor(t, `added p_work_0\n`)
	r.send(t, "add p:wrk => count:comm")
	r.waitFor(t, `unknown symbol "wrk"`)
	r.send(t, "add p:work k=%di => hist:nosuch")
	r.waitFor(t, `bad action "hist:nosuch"`)
	r.send(t, "detach")
	if code := r.wait(t); code != 0 {
		t.Fatalf("probe: exit status %d, want 0; output:\n%s", code, limit(r.text()))
	}
	b, err := os.ReadFile(trace)
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	if !strings.Contains(text, "\n# count:comm of probe/p_work_0: ") || strings.Contains(text, "# # ") || strings.Contains(text, "p_wrk_0") || strings.Count(text, "# count:") != 1 {
		t.Errorf("the trace's tables at detach: want one count table, of p_work_0, marked once; got\n%s", limit(text))
	}
	waitFree(t, s, nil)

	json := filepath.Join(dir, "p.json")
	r = startREPL(t, nil, false, "attach", "--repl", strconv.Itoa(s.pid()))
	r.send(t, "filter work")
	r.send(t, "tracer profile")
	r.send(t, "output "+json+" json")
	r.waitFor(t, `# tracer: profile\n`)
	// The json section must have calls before the switch back: wait for
	// the first to reach the file, not a fixed time (a loaded CI machine
	// wrote none in 200 ms).
	waitFor(t, "the json section", func() string {
		b, _ := os.ReadFile(json)
		return string(b)
	}, `"func":"work"`)
	r.send(t, "output -")
	time.Sleep(200 * time.Millisecond)
	r.send(t, "detach")
	if code := r.wait(t); code != 0 {
		t.Fatalf("probe: exit status %d, want 0; output:\n%s", code, limit(r.text()))
	}
	out := r.text()
	if strings.Contains(out, ": work\n") || strings.Count(out, "  Function  ") < 2 {
		t.Errorf("the profile on the terminal: want its tables (before the json and after), no line per call; got\n%s", limit(out))
	}
	if b, err := os.ReadFile(json); err != nil || !strings.Contains(string(b), `"func":"work"`) {
		t.Errorf("the json section: %v\n%s", err, limit(string(b)))
	}
	checkSurvives(t, s)
}

// TestREPLInProcess: probes added from the REPL after the attach, and
// the function tracer started there, record in the tracee as those given
// on the command line do: every thread is held for their jumps as at the
// start. Each thread's calls come in order with none missing; the
// process runs on untraced after the detach and finishes right.
func TestREPLInProcess(t *testing.T) {
	t.Parallel()
	p := startPiped(t, nil, seqBin(t), "loop", "2")
	p.waitStdout(t, "ready\n", 10*time.Second)
	r := startREPL(t, nil, false, "attach", "--repl", fmt.Sprint(p.pid()))
	r.send(t, "add p:work a=%di b=%si")
	r.waitFor(t, `added p_work_0\n`)
	// Counted and read by hand, not with parseEvent's regexp: the calls
	// come at ~100,000 a second for as long as the commands take, and
	// under load and -race that is minutes of regexp.
	for deadline := time.Now().Add(20 * time.Second); strings.Count(r.text(), " p_work_0: ") < 2000; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("fewer than 2000 events within 20s; output:\n%s", limit(r.text()))
		}
	}
	r.send(t, "list")
	r.waitFor(t, `probe/p_work_0 +enabled +hits=\d+ +work\+0x0/0x[0-9a-f]+ +p:work a=%di b=%si  \(in-process\)\n`)
	r.send(t, "del p_work_0")
	r.waitFor(t, `deleted p_work_0 \(\d+ hits\)\n`)
	type key struct {
		tid int
		a   int64
	}
	next := map[key]int64{}
	// Events drained after the deletion may still be coming.
	for line := range strings.SplitSeq(r.wholeLines(), "\n") {
		c, ok := parseSeqLine(strings.TrimPrefix(line, "probe> "))
		if !ok {
			if _, isEvent := parseEvent(line); isEvent {
				t.Fatalf("not a work() event: %q", line)
			}
			continue
		}
		k := key{c.tid, c.who}
		if n, ok := next[k]; ok && c.i != n {
			t.Fatalf("thread %d: work(%d, %d) after work(%d, %d): a call missing or out of order", c.tid, c.who, c.i, c.who, n-1)
		}
		next[k] = c.i + 1
	}
	if len(next) != 2 {
		t.Fatalf("calls of %d threads, want 2", len(next))
	}
	r.send(t, "filter work")
	r.send(t, "tracer function_graph")
	r.waitFor(t, `work\(\);\n`)
	r.send(t, "detach")
	if code := r.wait(t); code != 0 {
		t.Fatalf("probe: exit status %d, want 0; output:\n%s", code, limit(r.text()))
	}
	waitUntraced(t, p.pid(), 10*time.Second)
	p.in.Close()
	if res := p.wait(t, cmdTimeout); res.code != 0 || res.stdout != "ready\nthreads=2\n" {
		t.Fatalf("seq after the detach: want exit 0 and its output; got %v", res)
	}
}

// The race CI met: an event printed while a command was half typed.
func TestTerminalLines(t *testing.T) {
	raw := "probe> \x1b[0Kdisabl\x1b[1G\x1b[J" +
		"spin-w0-1 [000] 1.0: p_work_0: (work+0x0/0x17) k=260\r\n" +
		"probe> \x1b[0Kdisabl" + "e p_work_0\r\n" +
		"disabled p_work_0\r\nprobe> ab \b\b\x1b[0K\r\n"
	want := "spin-w0-1 [000] 1.0: p_work_0: (work+0x0/0x17) k=260\n" +
		"disable p_work_0\ndisabled p_work_0\na\n"
	if got := strings.ReplaceAll(terminalLines(raw), "probe> ", ""); got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}
