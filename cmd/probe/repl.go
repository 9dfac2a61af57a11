package main

// The REPL: `probe attach PID[,PID...]` or `--comm NAME` with no spec on a
// terminal, or with --repl (commands then come from stdin, terminal or
// not). The processes keep running while commands add and remove probes
// and switch tracers in each of them (replfamily.go); events stream above
// the prompt.

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/ergochat/readline"
	"golang.org/x/sys/unix"
	"golang.org/x/term"

	"github.com/probedbg/probe/action"
	"github.com/probedbg/probe/fetch"
	"github.com/probedbg/probe/output"
	"github.com/probedbg/probe/probe"
	"github.com/probedbg/probe/script"
	"github.com/probedbg/probe/symbols"
)

const replHelp = `commands (each acts on every process traced):
  add SPEC                  add a probe (the full grammar, e.g. p:work x=%di:s32)
  del EVENT                 remove a probe
  enable EVENT | disable EVENT
                            turn a probe's events on or off (it stays installed)
  list                      probes with their hit counts (each process's)
  functions [GLOB]          functions that can be probed (MOD:GLOB for a library's)
  tracer NAME               switch the tracer: nop, function, function_graph, profile
  filter [GLOB|-]           functions the tracer traces (- : all); none: show
  graph-function [GLOB|-]   trace only inside these functions (- : everywhere)
  stats                     hits, lost returns, events not printed
  output FILE|- [FORMAT]    write events to FILE (- : back here); FORMAT text|json
  pause | resume            stop / restart printing events
  source FILE               run a file of commands, one a line, or a
                            probe script (FILE.yaml: see docs/scripts.md)
  detach | quit             let the processes go and leave (also Ctrl-D)
  help                      this text
`

// replCommands are the command names, for completion.
var replCommands = []string{"add", "del", "enable", "disable", "list", "functions", "tracer",
	"filter", "graph-function", "stats", "output", "pause", "resume", "source", "detach", "quit", "help"}

// replWanted says whether attach opens the REPL: --repl, or neither a spec
// nor a tracer with a terminal on stdin.
func replWanted(o *options, specs []string, ts tracers) bool {
	return o.repl || len(specs) == 0 && !ts.any() && term.IsTerminal(int(os.Stdin.Fd()))
}

// session is one REPL on the processes attached to (and, with -f, their
// children).
type session struct {
	t    *probe.Tracer // the first process's, which serves them all
	fam  family        // every process traced now
	o    options       // the current tracer's filters
	ts   tracers       // the current tracer
	sink *sink
	gate *gate

	term   io.Writer // the terminal (through readline when it draws a prompt)
	events io.Writer // the trace's way there: term, in whole lines at a prompt
	errs   io.Writer
	file   *os.File // output FILE, or nil: events go to term
	format string

	mu    sync.Mutex              // guards probes: completion reads it from readline's goroutine
	specs map[string]string       // event -> spec text, as typed
	plans map[string]*action.Plan // event -> its actions, added in the REPL
	funcs []string                // the main executable's functions, for completion
	// modFuncs are the function names of each module, for completion of
	// add (functionNames), made on first use.
	modFuncs map[string][]string

	exits exitNotes // processes that have ended, to be said

	quit bool
}

// exitNotes are the ends of traced processes, told on the ptrace thread
// (SetExitNotify) and said by the session's loop.
type exitNotes struct {
	mu    sync.Mutex
	ended []exitNote
	ready chan struct{} // a note is waiting
}

type exitNote struct {
	pid  int
	text string
}

func (e *exitNotes) add(pid int, st probe.ExitStatus) {
	how := fmt.Sprintf("exited with status %d", st.Code)
	if st.Signaled {
		how = "killed by " + unix.SignalName(st.Signal)
	}
	e.mu.Lock()
	e.ended = append(e.ended, exitNote{pid, fmt.Sprintf("pid %d %s", pid, how)})
	e.mu.Unlock()
	select {
	case e.ready <- struct{}{}:
	default:
	}
}

func (e *exitNotes) take() []exitNote {
	e.mu.Lock()
	defer e.mu.Unlock()
	ended := e.ended
	e.ended = nil
	return ended
}

// sayExits says which processes have ended and which are traced on.
// The processes first, then the notes: a process gone from the first
// has its note in already (the tracer tells of an end as it lets the
// process go), so that two ends close together are said at once, not
// each as the session's last (TestREPLFollowFork, 1 run in 6); one that
// ended in between is among the notes, and not traced on.
func (s *session) sayExits() {
	procs := s.t.Processes()
	ended := s.exits.take()
	if len(ended) == 0 {
		return
	}
	var pids []int
	for _, tr := range procs {
		if !slices.ContainsFunc(ended, func(n exitNote) bool { return n.pid == tr.Pid() }) {
			pids = append(pids, tr.Pid())
		}
	}
	on := "the session ends"
	if len(pids) > 0 {
		on = "tracing " + pidList(pids) + " on"
	}
	texts := make([]string, len(ended))
	for i, n := range ended {
		texts[i] = n.text
	}
	fmt.Fprintf(s.errs, "probe: %s; %s\n", strings.Join(texts, ", "), on)
}

// gate is the trace writer of a section: events pass unless printing is
// paused, when they are counted instead.
type gate struct {
	mu        sync.Mutex
	w         output.Writer
	paused    bool
	unprinted uint64
}

func (g *gate) Write(r *output.Record) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.paused {
		g.unprinted++
		return nil
	}
	return g.w.Write(r)
}

func (g *gate) Comment(s string) error { g.mu.Lock(); defer g.mu.Unlock(); return g.w.Comment(s) }
func (g *gate) Flush() error           { g.mu.Lock(); defer g.mu.Unlock(); return g.w.Flush() }
func (g *gate) Finish() error          { g.mu.Lock(); defer g.mu.Unlock(); return g.w.Finish() }

// replAttach attaches to o.pid and o.morePids and runs the REPL until
// detach, EOF or the end of every process. specs and the tracer of the
// command line are installed first.
func replAttach(o *options, ts tracers, specs []*probeDef) (int, error) {
	if o.out != "" {
		f, err := createOutput(o.out)
		if err != nil {
			return failure(err)
		}
		defer f.Close()
		return replRun(o, ts, specs, f)
	}
	return replRun(o, ts, specs, nil)
}

func replRun(o *options, ts tracers, specs []*probeDef, file *os.File) (int, error) {
	t, sigs, stopSignals, err := attachCatching(o.pid)
	if err != nil {
		return failure(err)
	}
	defer stopSignals()
	defer t.Detach() // also on a panic of ours
	if err := setupFollow(t, o); err != nil {
		return 1, err
	}
	s := &session{t: t, fam: family{root: t, hits: &hitCounts{of: map[string][]*probe.Probe{}}}, o: *o, ts: ts, file: file, format: "text", specs: map[string]string{}, plans: map[string]*action.Plan{},
		exits: exitNotes{ready: make(chan struct{}, 1)}}
	if err := t.SetExitNotify(s.exits.add); err != nil {
		return 1, err
	}
	if main := t.Symbols().Main(); main != nil {
		for _, fn := range main.Functions() {
			s.funcs = append(s.funcs, fn.Name)
		}
		sort.Strings(s.funcs)
	}
	lines, closeInput, err := s.openInput()
	if err != nil {
		return 1, err
	}
	defer closeInput()
	s.openSection()
	if err := addAll(t, specs, ts, o, s.sink); err != nil {
		s.closeSection()
		return failure(err)
	}
	for _, sp := range specs {
		s.specs[sp.Spec.Event] = sp.Text
	}
	s.fam.hits.note(s.sink.added...) // (those of the processes adopted count with them)
	if err := adoptMore(t, o); err != nil {
		s.closeSection()
		return failure(err)
	}
	releaseGC(t)
	t.Start()
	for !s.quit {
		select {
		case line, ok := <-lines:
			if !ok {
				s.quit = true // EOF: detach cleanly
				break
			}
			s.exec(line)
		case <-s.exits.ready:
			s.sayExits()
		case <-sigs:
			s.quit = true
		case <-t.Done():
			s.quit = true
		case <-s.sink.stream.Failed():
			s.quit = true
		}
	}
	s.sayExits()
	if err := t.Detach(); err != nil {
		return 1, err
	}
	_, loopErr := t.Wait()
	s.sink.file = os.Stdout // the stack report, if any, comes here
	if s.file != nil {
		s.sink.file = s.file
	}
	if err := closeTrace(s.sink, t); err != nil {
		return 1, err
	}
	if loopErr != nil {
		return 1, loopErr
	}
	return 0, nil
}

// openInput starts reading commands: with line editing, history and
// completion on a terminal, plain lines otherwise.
func (s *session) openInput() (<-chan string, func(), error) {
	lines := make(chan string)
	stop := make(chan struct{})
	if !term.IsTerminal(int(os.Stdin.Fd())) {
		// The trace in whole lines, and command output between them:
		// one write of a long run of lines to a pipe may be split, and
		// a message of ours must not land inside one of them.
		trace := &wholeLines{w: os.Stdout}
		s.term, s.errs = &lockedWriter{mu: &trace.mu, w: os.Stdout}, os.Stderr
		s.events = trace
		go func() {
			defer close(lines)
			r := bufio.NewReaderSize(os.Stdin, maxLine)
			for {
				line, err := readLine(r)
				if errors.Is(err, errLineTooLong) {
					fmt.Fprintf(s.errs, "probe: %v: skipped\n", err)
					continue
				}
				if err != nil {
					return
				}
				select {
				case lines <- line:
				case <-stop:
					return
				}
			}
		}()
		return lines, func() { close(stop) }, nil
	}
	rl, err := readline.NewFromConfig(&readline.Config{
		Prompt:       "probe> ",
		HistoryFile:  historyPath(), // outfile.go
		AutoComplete: completer{s},
	})
	if err != nil {
		return nil, nil, err
	}
	s.term, s.errs = rl.Stdout(), rl.Stderr()
	// Readline clears the prompt's line before each write and draws
	// the prompt again after it: a write of the trace that ended inside
	// a line would have that line's start erased by the next write, or
	// joined to a message of ours.
	s.events = &wholeLines{w: rl.Stdout()}
	go func() {
		defer close(lines)
		for {
			line, err := rl.ReadLine()
			switch {
			case errors.Is(err, readline.ErrInterrupt):
				continue // Ctrl-C clears the line, as shells do
			case err != nil: // Ctrl-D, or closed
				return
			}
			select {
			case lines <- line:
			case <-stop:
				return
			}
		}
	}()
	return lines, func() { close(stop); rl.Close() }, nil
}

// wholeLines passes on only whole lines, each write ending with a
// newline; the rest waits for the write that ends it.
type wholeLines struct {
	mu   sync.Mutex
	w    io.Writer
	tail []byte
}

func (l *wholeLines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.tail = append(l.tail, p...)
	i := bytes.LastIndexByte(l.tail, '\n')
	if i < 0 {
		return len(p), nil
	}
	_, err := l.w.Write(l.tail[:i+1])
	l.tail = append(l.tail[:0], l.tail[i+1:]...)
	return len(p), err
}

// lockedWriter writes to w holding mu.
type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// maxLine bounds a command line read from a pipe or file: a longer one
// (an endless one: /dev/zero) is skipped with an error, never kept.
const maxLine = 64 << 10

var errLineTooLong = fmt.Errorf("a command line longer than %d KiB", maxLine>>10)

// readLine reads one line from r without its newline; a line longer than
// r's buffer is read to its end and dropped: errLineTooLong.
func readLine(r *bufio.Reader) (string, error) {
	line, err := r.ReadSlice('\n')
	if errors.Is(err, bufio.ErrBufferFull) {
		for errors.Is(err, bufio.ErrBufferFull) {
			_, err = r.ReadSlice('\n')
		}
		if err == nil || err == io.EOF {
			return "", errLineTooLong
		}
		return "", err
	}
	if err == io.EOF && len(line) > 0 {
		err = nil // a last line with no newline
	}
	return strings.TrimSuffix(string(line), "\n"), err
}

// exec runs one command line; its errors are reported and the session
// goes on.
func (s *session) exec(line string) {
	if err := s.run(line); err != nil {
		fmt.Fprintf(s.errs, "probe: %s\n", oneLine(err))
	}
}

func (s *session) run(line string) error {
	line = strings.TrimSpace(line)
	if line == "" || strings.HasPrefix(line, "#") {
		return nil
	}
	cmd, rest, _ := strings.Cut(line, " ")
	rest = strings.TrimSpace(rest)
	args := strings.Fields(rest)
	switch cmd {
	case "add":
		return s.add(rest)
	case "del", "enable", "disable":
		if len(args) != 1 {
			return fmt.Errorf("usage: %s EVENT", cmd)
		}
		return s.onEvent(cmd, args[0])
	case "list":
		return s.list()
	case "functions":
		return s.functions(args)
	case "tracer":
		if len(args) != 1 {
			return fmt.Errorf("usage: tracer nop|function|function_graph|profile (now %s)", s.ts.name())
		}
		o := s.o
		o.tracers = args[0]
		return s.retrace(o)
	case "filter", "graph-function":
		return s.setGlobs(cmd, args)
	case "stats":
		return s.stats()
	case "output":
		return s.output(args)
	case "pause", "resume":
		// Events hit before the command are on their way to the gate:
		// they count as the command found them (printed before a
		// pause, counted until a resume), as stats counts them.
		s.sink.stream.Sync()
		s.gate.mu.Lock()
		s.gate.paused = cmd == "pause"
		n := s.gate.unprinted
		s.gate.unprinted = 0
		s.gate.mu.Unlock()
		if cmd == "resume" && n > 0 {
			fmt.Fprintf(s.term, "%d events were not printed while paused\n", n)
		}
		return nil
	case "source":
		if len(args) != 1 {
			return errors.New("usage: source FILE")
		}
		return s.source(args[0])
	case "detach", "quit", "exit":
		s.quit = true
		return nil
	case "help", "?":
		io.WriteString(s.term, replHelp)
		return nil
	}
	return fmt.Errorf("unknown command %q (type help)", cmd)
}

// add installs one probe. The whole text goes to the spec parser: the
// grammar, filters and actions are its business.
func (s *session) add(text string) error {
	if text == "" {
		return errors.New("usage: add SPEC")
	}
	d, err := parseProbeDef(text)
	if err != nil {
		return err
	}
	if err := applyFail(&s.o, []*probeDef{d}, true); err != nil {
		return err
	}
	defs, err := expandSDT(s.t, []*probeDef{d}) // (sdt:python:*: each probe)
	if err != nil {
		return err
	}
	for _, d := range defs {
		p, pl, err := addProbe(s.fam, d, s.sink)
		if err != nil {
			return err
		}
		// enable:/disable: may name any probe of the session, added before.
		if err := pl.Bind(s.lookup); err != nil {
			pl.Remove()
			s.fam.Remove(p)
			return err
		}
		s.mu.Lock()
		s.specs[p.Event] = text
		s.plans[p.Event] = pl
		s.mu.Unlock()
		fmt.Fprintf(s.term, "added %s\n", p.Event)
	}
	return nil
}

// lookup finds the probes of EVENT or GROUP/EVENT: each process's that
// has one (an action's enable:/disable: switches the name session-wide,
// as the enable and disable commands do).
func (s *session) lookup(name string) []*probe.Probe {
	all := s.fam.probes()
	full, ok := fullName(all, name)
	if !ok {
		return nil
	}
	var ps []*probe.Probe
	for _, pp := range all {
		if p := pp.probes[full]; p != nil && !slices.Contains(ps, p) {
			ps = append(ps, p) // (a fork child's, given its parent's, too)
		}
	}
	return ps
}

// fullName finds GROUP/EVENT by EVENT or GROUP/EVENT among every
// process's probes.
func fullName(all []processProbes, name string) (string, bool) {
	for _, full := range names(all) {
		if full == name || eventOf(full) == name {
			return full, true
		}
	}
	return "", false
}

// eventOf is the EVENT of GROUP/EVENT.
func eventOf(full string) string { return full[strings.IndexByte(full, '/')+1:] }

// findProbe finds a probe's GROUP/EVENT by EVENT or GROUP/EVENT.
func (s *session) findProbe(name string) (string, error) {
	all := s.fam.probes()
	if full, ok := fullName(all, name); ok {
		return full, nil
	}
	var events []string
	for _, full := range names(all) {
		events = append(events, eventOf(full))
	}
	sort.Strings(events)
	if len(events) == 0 {
		return "", fmt.Errorf("no event %q: no probes yet", name)
	}
	return "", fmt.Errorf("no event %q (have %s)", name, strings.Join(events, ", "))
}

func (s *session) onEvent(cmd, name string) error {
	full, err := s.findProbe(name)
	if err != nil {
		return err
	}
	event := eventOf(full)
	switch cmd {
	case "del":
		hits, err := s.fam.remove(full)
		s.mu.Lock()
		delete(s.specs, event)
		if pl := s.plans[event]; pl != nil {
			pl.Remove() // its counts and histograms go with it
			delete(s.plans, event)
		}
		s.mu.Unlock()
		fmt.Fprintf(s.term, "deleted %s (%d hits)\n", event, hits)
		return err // (where it could not be taken out)
	default:
		s.t.DrainRecords() // what it recorded while enabled is printed
		s.fam.setEnabled(full, cmd == "enable")
		fmt.Fprintf(s.term, "%sd %s\n", cmd, event)
	}
	return nil
}

// list draws a line a probe: its state, where it is and how its hits are
// taken in the first process that has it, and its hits in all. With
// several processes a line for each follows, with its hits and what
// differs from the first.
func (s *session) list() error {
	all := s.fam.probes()
	ns := names(all)
	if len(ns) == 0 {
		fmt.Fprintln(s.term, "no probes")
		return nil
	}
	var b strings.Builder
	for _, name := range ns {
		ps, pids := copies(all, name)
		p := ps[0]
		s.mu.Lock()
		text := s.specs[p.Event]
		s.mu.Unlock()
		fmt.Fprintf(&b, "%-20s %-8s hits=%-8d %-24s %s  (%s)\n", p.Name(), enabledText(p), s.fam.hits.total(name), p.Where, text, pathText(p))
		if len(all) == 1 {
			continue
		}
		for i, q := range ps {
			line := fmt.Sprintf("  %s: hits=%d", pidList(pids[i]), q.Hits())
			for _, d := range [][2]string{{enabledText(q), enabledText(p)}, {q.Where, p.Where}, {pathText(q), pathText(p)}} {
				if d[0] != d[1] {
					line += ", " + d[0]
				}
			}
			fmt.Fprintln(&b, line)
		}
		var without []int
		for _, pp := range all {
			if pp.probes[name] == nil {
				without = append(without, pp.pid)
			}
		}
		if len(without) > 0 {
			fmt.Fprintf(&b, "  %s: not installed\n", pidList(without))
		}
	}
	io.WriteString(s.term, b.String())
	return nil
}

func enabledText(p *probe.Probe) string {
	if p.Enabled() {
		return "enabled"
	}
	return "disabled"
}

// pathText says how p's hits are taken, as list shows it.
func pathText(p *probe.Probe) string {
	in, why := p.Path()
	if !in {
		return "stops: " + why
	}
	return inProcessText(why)
}

func (s *session) functions(args []string) error {
	if len(args) > 1 {
		return errors.New("usage: functions [GLOB]")
	}
	space := s.t.Symbols()
	m, glob := space.Main(), "*"
	if len(args) == 1 {
		glob = args[0]
		if i := strings.IndexByte(glob, ':'); i > 0 && !strings.HasPrefix(glob[i:], "::") {
			var err error
			if m, err = space.FindModule(glob[:i]); err != nil {
				return err
			}
			glob = glob[i+1:]
		}
	}
	var b strings.Builder
	n := 0
	for _, fn := range m.Functions() {
		if fetch.GlobMatch(glob, fn.Name) {
			fmt.Fprintf(&b, "%s\n", fn.Name)
			n++
		}
	}
	if n == 0 {
		return fmt.Errorf("no function of %s matches %q", m.Name, glob)
	}
	io.WriteString(s.term, b.String())
	return nil
}

// setGlobs sets --filter or --graph-function and, when a tracer runs,
// restarts it with them, as a write to set_ftrace_filter applies at once.
func (s *session) setGlobs(cmd string, args []string) error {
	o := s.o
	list := &o.filter
	if cmd == "graph-function" {
		list = &o.graphFunc
	}
	switch {
	case len(args) == 0:
		if len(*list) == 0 {
			fmt.Fprintf(s.term, "%s: all\n", cmd)
		} else {
			fmt.Fprintf(s.term, "%s: %s\n", cmd, list.String())
		}
		return nil
	case len(args) == 1 && args[0] == "-":
		*list = nil
	default:
		*list = append(globList(nil), args...)
	}
	if use := applicable(o, s.ts); !s.ts.any() || equalGlobs(use.filter, applicable(s.o, s.ts).filter) && equalGlobs(use.graphFunc, applicable(s.o, s.ts).graphFunc) {
		// Nothing the running tracer uses changed: kept for the next.
		s.o = o
		return nil
	}
	return s.retrace(o)
}

func equalGlobs(a, b globList) bool { return a.String() == b.String() }

// retrace switches to the tracer and filters of o. Like ftrace, which
// resets the buffer, the new tracer starts a new section with its own
// header. On failure the previous tracer runs on.
func (s *session) retrace(o options) error {
	ts, err := parseTracers(&options{tracers: o.tracers, format: o.format, buffer: o.buffer, out: o.out})
	if err != nil {
		return err
	}
	if ts.stack && !s.ts.stack {
		return errors.New("tracer stack: give --tracer stack on the command line (its report comes at detach)")
	}
	// Filters stay set across tracers, as ftrace's files do; a tracer
	// is given those that apply to it.
	use := applicable(o, ts)
	if _, err := parseTracers(&use); err != nil {
		return err
	}
	return s.newSection(func() error {
		if err := addTracer(s.fam, ts, &use, s.sink); err != nil {
			return err
		}
		s.o, s.ts = o, ts
		return nil
	}, ts, &o)
}

// applicable drops from o the filters tracer ts has no use for.
func applicable(o options, ts tracers) options {
	if !ts.any() {
		o.filter, o.notrace = nil, nil
	}
	if !ts.returns() {
		o.graphFunc, o.maxDepth, o.threshold = nil, 0, 0
	}
	return o
}

// newSection ends the current section of the trace and starts another
// with start, which installs the tracer; if start fails the previous
// tracer is put back. The function tracer is off and every probe quiet
// while the sink changes: their handlers read it at each hit.
func (s *session) newSection(start func() error, ts tracers, o *options) error {
	s.t.DrainRecords() // what the tracee recorded until now belongs to the old section
	var quieted []*probe.Probe
	for _, pp := range s.fam.probes() {
		for _, p := range pp.probes {
			if p.Enabled() {
				p.SetEnabled(false)
				quieted = append(quieted, p)
			}
		}
	}
	defer func() {
		for _, p := range quieted {
			p.SetEnabled(true)
		}
	}()
	s.t.Probes() // a round trip of the ptrace thread (one serves all): no handler runs now
	if err := s.fam.StopTracingFunctions(); err != nil {
		return err
	}
	s.closeSection()
	prevO, prevTs := s.o, s.ts
	s.o, s.ts = *o, ts
	s.openSection()
	if err := start(); err != nil {
		// Nothing was written to the new section: give it the
		// previous tracer's writer back and restart that tracer.
		s.o, s.ts = prevO, prevTs
		primary, all := s.newWriter()
		s.gate.w, s.sink.writer = all, primary
		use := applicable(s.o, s.ts)
		if e := addTracer(s.fam, s.ts, &use, s.sink); e != nil {
			return fmt.Errorf("%w; and the previous tracer could not be restarted: %v", err, e)
		}
		return err
	}
	return nil
}

// out is where events go now.
func (s *session) out() io.Writer {
	if s.file != nil {
		return s.file
	}
	return s.events
}

// openSection starts a section of the trace for the current tracer.
func (s *session) openSection() {
	primary, all := s.newWriter()
	paused := s.gate != nil && s.gate.paused
	s.gate = &gate{w: all, paused: paused}
	if s.sink == nil {
		s.sink = &sink{acts: action.NewSession()}
	}
	// The same sink, changed in place: the probes' handlers hold it.
	s.sink.writer, s.sink.all, s.sink.stream, s.sink.stack = primary, s.gate, output.NewStream(s.gate), s.ts.stack
}

// newWriter makes the current section's writer, in the format of the
// last output command.
func (s *session) newWriter() (primary, all output.Writer) {
	o := applicable(s.o, s.ts)
	return newWriter(s.out(), s.ts, &o, true)
}

// closeSection writes out what the section's stream holds.
func (s *session) closeSection() {
	s.sink.stream.Close()
	s.gate.Finish()
	if s.sink.traced != nil {
		if _, skipped, _, _ := s.sink.traced.Now(); len(skipped) > 0 {
			s.gate.Comment(skippedNote(skipped))
			s.gate.Flush()
		}
	}
	s.sink.traced = nil
}

func (s *session) stats() error {
	s.t.DrainRecords()
	s.sink.stream.Sync() // the events sent so far counted, as pause and resume do
	var b strings.Builder
	var total uint64
	all := s.fam.probes()
	for _, name := range names(all) {
		n := s.fam.hits.total(name)
		fmt.Fprintf(&b, "%-20s hits=%d\n", name, n)
		total += n
	}
	fmt.Fprintf(&b, "probe hits: %d\n", total)
	if len(all) > 1 {
		pids := make([]int, len(all))
		for i, pp := range all {
			pids[i] = pp.pid
		}
		fmt.Fprintf(&b, "traced: %s\n", pidList(pids))
	}
	fmt.Fprintf(&b, "tracer: %s\n", s.ts.name())
	fmt.Fprintf(&b, "lost returns: %d\n", s.t.Stats().LostReturns)
	s.gate.mu.Lock()
	fmt.Fprintf(&b, "events not printed (paused): %d\n", s.gate.unprinted)
	s.gate.mu.Unlock()
	io.WriteString(s.term, b.String())
	return s.sink.acts.Draw(s.term)
}

// output moves the trace to FILE ("-": back to the terminal) in a new
// section.
func (s *session) output(args []string) error {
	if len(args) < 1 || len(args) > 2 {
		return errors.New("usage: output FILE|- [FORMAT]")
	}
	format := "text"
	if len(args) == 2 {
		format = args[1]
	}
	// A session's trace is made of sections (one per tracer): formats
	// that are one document for a whole trace are for run and record.
	if f, ok := output.FormatNamed(format); !ok || !f.Sectioned {
		return fmt.Errorf("output: format %q: the REPL writes %s (the others: use probe record, then probe report)", format, sectionedFormats())
	}
	var f *os.File
	if args[0] != "-" {
		var err error
		if f, err = createOutput(args[0]); err != nil {
			return err
		}
	}
	// The old section ends in the old file; the new one opens on f.
	old := s.file
	s.file, s.format, s.o.format = f, format, format
	o, ts := s.o, s.ts
	use := applicable(o, ts)
	err := s.newSection(func() error { return addTracer(s.fam, ts, &use, s.sink) }, ts, &o)
	if old != nil {
		old.Close()
	}
	return err
}

// source runs a file of REPL commands, one a line, stopping at the first
// that fails.
func (s *session) source(name string) error {
	if ext := filepath.Ext(name); ext == ".yaml" || ext == ".yml" {
		return sourceYAML(s, name)
	}
	data, err := script.ReadFile(name)
	if err != nil {
		return err
	}
	for i, line := range strings.Split(string(data), "\n") {
		if s.quit {
			return nil
		}
		if err := s.run(line); err != nil {
			return fmt.Errorf("%s:%d: %w", name, i+1, err)
		}
	}
	return nil
}

// sourceYAML applies a probe script to the running session: its filters
// and tracer as the filter, graph-function and tracer commands would, its
// output as the output command, then its probes as add. It is checked
// whole first, so a bad script changes nothing.
func sourceYAML(s *session, name string) error {
	sc, err := script.Load(name, validateProbeText)
	if err != nil {
		return err
	}
	if sc.DurationPos.Line != 0 {
		return fmt.Errorf("%s: duration: not for a REPL session (detach when done)", sc.DurationPos)
	}
	var cmds []string
	for _, g := range sc.Tracer.Filter {
		cmds = append(cmds, "filter "+g)
	}
	for _, g := range sc.Tracer.GraphFunction {
		cmds = append(cmds, "graph-function "+g)
	}
	if len(sc.Tracer.Names) > 0 {
		cmds = append(cmds, "tracer "+strings.Join(sc.Tracer.Names, ","))
	}
	if sc.Output.File != "" {
		cmds = append(cmds, strings.TrimSpace("output "+sc.Output.File+" "+sc.Output.Format))
	}
	for _, p := range sc.Probes {
		cmds = append(cmds, "add "+p.Text)
	}
	for _, c := range cmds {
		if err := s.run(c); err != nil {
			return fmt.Errorf("%s: %s: %w", name, c, err)
		}
	}
	return nil
}

// name is the tracer's name as the tracer command takes it.
func (ts tracers) name() string {
	var names []string
	for _, n := range []struct {
		on   bool
		name string
	}{{ts.function, "function"}, {ts.graph, "function_graph"}, {ts.profile, "profile"}, {ts.stack, "stack"}} {
		if n.on {
			names = append(names, n.name)
		}
	}
	if len(names) == 0 {
		return "nop"
	}
	return strings.Join(names, ",")
}

// completer completes command names, then each command's argument:
// function names, event names, tracer names.
type completer struct{ s *session }

// functionNames lists the functions of module mod for completion, or
// with no mod those of the first module with one that starts with prefix
// (the program, then its libraries: where p:SYM looks); made once per
// module.
func (s *session) functionNames(mod, prefix string) []string {
	space := s.t.Symbols()
	if space == nil {
		return nil
	}
	mods := space.Mapped
	if mod != "" {
		m, err := space.FindModule(mod)
		if err != nil {
			return nil
		}
		mods = []*symbols.Mapped{m}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.modFuncs == nil {
		s.modFuncs = map[string][]string{}
	}
	for _, m := range mods {
		names, ok := s.modFuncs[m.Name]
		if !ok {
			for _, fn := range m.Functions() {
				names = append(names, fn.Name)
			}
			sort.Strings(names)
			s.modFuncs[m.Name] = names
		}
		if i := sort.SearchStrings(names, prefix); i < len(names) && strings.HasPrefix(names[i], prefix) {
			return names
		}
	}
	return nil
}

func (c completer) Do(line []rune, pos int) ([][]rune, int) {
	text := string(line[:pos])
	i := strings.LastIndexByte(text, ' ')
	word := text[i+1:]
	var cands []string
	if i < 0 {
		cands = replCommands
	} else {
		cmd, _, _ := strings.Cut(strings.TrimSpace(text), " ")
		switch cmd {
		case "add":
			if rest, ok := strings.CutPrefix(word, "sdt:"); ok && i == len("add") {
				// sdt:PROVIDER:NAME, completed whole.
				word = rest
				cands = c.s.sdtNames()
				break
			}
			// p:FUNC, r:FUNC, p:GRP/EVENT FUNC, p:MOD:FUNC: complete
			// after the last ':', in MOD's functions when one is named,
			// else in the program's and its libraries'.
			mod := ""
			if j := strings.LastIndexByte(word, ':'); j >= 0 {
				if k := strings.LastIndexByte(word[:j], ':'); k >= 0 {
					mod = word[k+1 : j]
				} else if !strings.HasPrefix(word, "p:") && !strings.HasPrefix(word, "r:") {
					mod = word[:j]
				}
				word = word[j+1:]
			}
			cands = c.s.functionNames(mod, word)
		case "functions", "filter", "graph-function":
			cands = c.s.funcs
		case "del", "enable", "disable":
			c.s.mu.Lock()
			for ev := range c.s.specs {
				cands = append(cands, ev)
			}
			c.s.mu.Unlock()
			sort.Strings(cands)
		case "tracer":
			cands = []string{"nop", "function", "function_graph", "profile"}
		}
	}
	var out [][]rune
	seen := map[string]bool{} // a name in several modules is offered once
	for _, cand := range cands {
		if strings.HasPrefix(cand, word) && !seen[cand] {
			seen[cand] = true
			out = append(out, []rune(cand[len(word):]+" "))
		}
	}
	return out, len([]rune(word))
}

// sectionedFormats names the formats the REPL can write: "text or json".
func sectionedFormats() string {
	return strings.Join(output.FormatsWhere(func(f *output.Format) bool { return f.Sectioned }), " or ")
}

// sdtNames are the process's static probes, PROVIDER:NAME, for
// completion of add sdt:.
func (s *session) sdtNames() []string {
	notes, _ := s.t.SDTMatches(fetch.Location{SDT: true, Provider: "*", Name: "*"})
	var names []string
	for _, n := range notes {
		names = append(names, n.Provider+":"+n.Name)
	}
	sort.Strings(names)
	return names
}
