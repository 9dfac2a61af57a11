// Command probe places kprobe-style probes in Linux user processes through
// ptrace. See README.md and docs/ for the grammar and examples.
package main

import (
	"bufio"
	"bytes"
	"cmp"
	"debug/elf"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"os/signal"
	"regexp"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"runtime/pprof"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/probedbg/probe/action"
	"github.com/probedbg/probe/fetch"
	"github.com/probedbg/probe/output"
	"github.com/probedbg/probe/probe"
	"github.com/probedbg/probe/ring"
	"github.com/probedbg/probe/script"
	"github.com/probedbg/probe/symbols"
	"github.com/probedbg/probe/tracee"
)

// usage is the help; {{formats}} and {{tracers}} stand for the formats'
// and the tracers' tables (usageText).
const usage = `usage:
  probe run [flags] [SPEC ...] -- CMD [ARGS ...]
        launch CMD and trace it
  probe attach [flags] PID[,PID...] [SPEC ...]
  probe attach [flags] --comm NAME [SPEC ...]
        attach to running processes: those given, or every one named NAME
        (no SPEC on a terminal, or --repl: an interactive session whose
        commands act on each of them; type help)
  probe run|attach --script FILE.yaml ...
        probes, tracer and output from a script (see docs/scripts.md)
  probe record -o FILE [flags] [SPEC ...] -- CMD
  probe record -o FILE [flags] PID[,PID...] [SPEC ...]
        record a trace of CMD, or of a running process, to FILE
  probe report [--format F] [-o OUT] [--info] [--tid T,..]
               [--time-range FROM~TO] [--filter G] [--notrace G]
               [--graph-function G] [--depth N] [--full-names] FILE
        print or convert a recorded trace; summarise it, or narrow it (see
        docs/formats.md)
  probe list PID|BINARY [GLOB]
        functions that can be probed (and their mcount/patchable sites)
  probe patch PID FUNC --with LIB:NEWFUNC [--wait D] [--inlined]
        replace FUNC by LIB's NEWFUNC, live, once no thread is in FUNC
        (docs/injection-and-patching.md); it stays after probe exits
  probe unpatch PID FUNC [--wait D]
        put FUNC back
  probe list --patches PID
        what is patched in PID
  probe --version
        the version and the commit probe was built from
  probe completion bash|zsh|fish
        a completion script for the shell (bash: source <(probe completion
        bash))

SPEC is a probe definition, e.g. 'p:work', 'p:libc:malloc', 'p:work+0x4',
'p:0x401136', 'p:/path/to/lib.so:0x1139', 'p:grp/event work',
'p:sys_openat' (a system call, when no symbol has that name).
'o:FUNC $retval=V [errno=E] [if FILTER]' makes calls of FUNC return V at
once, with errno E (error injection; see docs/injection-and-patching.md).
A fetch-arg may be worked out from those before it: 'total=n*size:u64'.
It may end with actions: 'SPEC [if FILTER] => ACTION ...', ACTION one of
print, printf("FORMAT", FIELD, ...), count[:KEY,...],
hist:FIELD[:log2|:linear=STEP], sum, avg, min, max, stacktrace, mark:NAME
(then @NAME, the time since, is a FIELD), traceon, traceoff, enable:EVENT,
disable:EVENT (see docs/scripts.md).

flags:
  -o FILE                   write events to FILE instead of standard output
  --record FILE             run, attach: keep a recording too, beside the live
                            trace (probe report FILE prints the same trace)
  --script FILE.yaml        probes, tracer and output from a script; flags
                            override it, SPECs add to its probes
  --buffer-size N           events held for the writer (default 65536); past
                            them events are dropped and counted
  --format F                the trace's format:
                            {{formats}}
  --duration D              detach after D (attach), e.g. 5s
  --comm NAME               attach: to every process named NAME (ps -o comm)
  --tracer T[,T]            {{tracers}}
  --filter GLOB             functions to trace (MOD:GLOB for a library's;
                            !GLOB or MOD:!GLOB leaves them out); default:
                            every function of the main executable
  --notrace GLOB            functions not to trace (function_graph: nor
                            anything they call)
  --graph-function GLOB     trace only inside these functions
  --max-depth N             trace calls nested at most N deep
  --graph-time-threshold D  show only calls lasting D or more, e.g. 50us
  --args                    show each traced C function's arguments and
                            return value, typed from DWARF
  --calls MOD:GLOB          the program's calls into a library, as ltrace:
                            func(args) = result, a line each (e.g. 'libc:*';
                            'libc:!free' leaves free out)
  -c                        with --calls: only ltrace -c's table at the end
                            (time, calls, errors per function)
  -t, -tt, -ttt             with --calls: each line begins with the time of
                            day, with microseconds, or seconds since the epoch
  -r                        with --calls: each line begins with the time since
                            the last one
  -T                        with --calls: each line ends with the time spent
                            in the call
  -n N                      with --calls: N spaces before a call for each call
                            it is made inside
  -s N                      with --calls: strings cut to N bytes, then "..."
  -A N                      with --calls: arrays (exec's argv) cut to N
                            elements (default 4), then "..."
  -S                        with --calls: the system calls too, each a line
                            SYS_name(args) = result (ltrace -S)
  -L                        with -S and no --calls: the system calls alone
  --interval D              print every count, hist, sum, avg, min and max
                            table each D while tracing (they add up)
  --interval-clear          ... and empty them once printed: each table is
                            one interval's (bpftrace's print, then clear)
  --fail-every N            o: probes fail only every Nth call their filter
                            passes (default 1)
  --fail-probability P      ... each with P percent (default 100)
  --fail-times N            ... at most N times in all (default -1: no limit)
  --fail-seed S             the seed of --fail-probability's choice
                            (default 1: a run is reproducible)
  --no-boost                single-step displaced instructions instead of
                            running them from a slot with a jump back
  --no-optimize             keep the int3 at every probe instead of a jump
                            to a detour (see docs/speed.md)
  --no-mailbox              read registers with ptrace at every hit instead
                            of from memory shared with the tracee
  --no-placement            do not move the tracer next to the tracee
                            thread it serves (see docs/speed.md)
  --no-inprocess            stop the thread at every hit, even for probes
                            that could record in the tracee (see
                            docs/inprocess.md)
  --ring-size KIB           each thread's ring for in-process probes, in
                            KiB, a power of two (default 4096 with
                            --no-drop, 16384 with --drop)
  --no-drop                 a thread whose ring is full waits for probe to
                            take its records: nothing is lost, the program
                            is slowed to probe's pace (run and record of a
                            command: the default)
  --drop                    a thread whose ring is full drops its record,
                            counted at the end: the program is never slowed
                            (attach, record of a running process: the default)
  -v                        say on standard error how each probe's hits are
                            taken: in-process, or with a stop and why
  -f                        follow forks and execs: children traced with the
                            same probes, probes re-resolved after an exec
  --repl                    attach: read commands (add, del, tracer, ...)
                            from standard input, terminal or not
`

// exitError carries the exit status for an error; bad input is 2.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }

func main() {
	// A reader of our output that goes away (probe ... | head) must end
	// the trace with a detach, not kill us with probes installed: with
	// SIGPIPE caught (not ignored: an ignored signal stays ignored across
	// exec, in the program we launch) the write fails with EPIPE and the
	// sink says so.
	signal.Notify(make(chan os.Signal, 1), unix.SIGPIPE)
	stopProfile := startProfile()
	if len(os.Args) > 1 && (os.Args[1] == "run" || os.Args[1] == "attach" || os.Args[1] == "record") {
		holdGC()
	}
	code, err := run(os.Args[1:])
	stopProfile()
	if err != nil {
		fmt.Fprintf(os.Stderr, "probe: %s\n", oneLine(err))
	}
	os.Exit(code)
}

// startProfile writes a CPU profile of this run to $PROBE_CPUPROFILE, if
// set (for the work on probe's own speed: docs/speed.md); it returns what
// ends it.
func startProfile() func() {
	path := os.Getenv("PROBE_CPUPROFILE")
	if path == "" {
		return func() {}
	}
	f, err := os.Create(path)
	if err == nil {
		err = pprof.StartCPUProfile(f)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "probe: PROBE_CPUPROFILE: %v\n", err)
		return func() {}
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}
}

func oneLine(err error) string {
	return strings.ReplaceAll(err.Error(), "\n", "; ")
}

func run(args []string) (code int, err error) {
	defer func() {
		if r := recover(); r != nil {
			code, err = 1, fmt.Errorf("internal error: %v", r)
		}
	}()
	if len(args) == 0 {
		fmt.Fprint(os.Stderr, usageText())
		return 2, nil
	}
	switch args[0] {
	case "run":
		return cmdRun(args[1:], false)
	case "attach":
		return cmdAttach(args[1:], false)
	case "list":
		if len(args) > 1 && args[1] == "--patches" {
			return cmdListPatches(args[2:])
		}
		return cmdList(args[1:])
	case "patch":
		return cmdPatch(args[1:])
	case "unpatch":
		return cmdUnpatch(args[1:])
	case "record":
		return cmdRecord(args[1:])
	case "report":
		return cmdReport(args[1:])
	case "help", "-h", "--help":
		fmt.Print(usageText())
		return 0, nil
	case "version", "--version":
		fmt.Println(version())
		return 0, nil
	case "completion":
		if len(args) != 2 {
			return 2, errors.New("usage: probe completion bash|zsh|fish")
		}
		script, err := completion(args[1])
		if err != nil {
			return 2, err
		}
		fmt.Print(script)
		return 0, nil
	}
	return 2, fmt.Errorf("unknown command %q (want run, attach, list, record, report, patch, unpatch, completion or help)", args[0])
}

// version is "probe VERSION [REVISION [(modified)]] GO": the module's
// version and the commit it was built from, from the build's info.
func version() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "probe (unknown) " + runtime.Version()
	}
	v := "probe " + info.Main.Version
	settings := map[string]string{}
	for _, s := range info.Settings {
		settings[s.Key] = s.Value
	}
	if rev := settings["vcs.revision"]; rev != "" {
		v += " " + rev[:min(12, len(rev))]
		if settings["vcs.modified"] == "true" {
			v += " (modified)"
		}
	}
	return v + " " + info.GoVersion
}

// usageText is the help, the formats' lines from their table.
func usageText() string {
	u := strings.Replace(usage, "{{formats}}", output.FormatHelp(helpColumn), 1)
	return strings.Replace(u, "{{tracers}}", strings.Join(script.Tracers, ", "), 1)
}

type options struct {
	out      string
	duration time.Duration

	tracers       string
	filter        globList
	notrace       globList
	graphFunc     globList
	maxDepth      int
	threshold     time.Duration
	args          bool          // --args
	calls         globList      // --calls: ltrace's library calls
	summary       bool          // -c: ltrace -c's table of them
	callLines     callLines     // -t, -tt, -ttt, -r, -T, -n, -s: ltrace's lines
	syscalls      bool          // -S: the system calls among --calls
	noLibCalls    bool          // -L: with -S, the system calls alone
	interval      time.Duration // --interval: print the tables this often
	intervalClear bool          // --interval-clear: and empty them once printed

	noBoost     bool
	noOptimize  bool
	noMailbox   bool
	noPlacement bool
	noInProcess bool
	ringKiB     int  // --ring-size; 0: the tracer's default, by waitForRoom
	drop        bool // --drop: full rings drop (attach's default)
	noDrop      bool // --no-drop: full rings wait (run's default)
	verbose     bool // -v: each probe's path
	fail        failOptions

	script string
	// scriptProbes are the script's probes, the first of the specs.
	scriptProbes []*script.Probe
	set          map[string]bool // the flags given, which a script does not override
	repl         bool
	format       string   // --format; "" is text
	record       bool     // probe record: the trace goes to a recording
	recordTo     string   // --record FILE (run, attach): a recording beside the live trace
	cpuWidth     int      // probe report: the recording machine's CPU column
	buffer       int      // --buffer-size: events held for the writer
	follow       bool     // -f: follow forks and execs
	command      []string // run: the command launched
	pid          int      // attach: the process; run: once launched
	morePids     []int    // attach: the processes after the first (PID,PID..., --comm)
	comm         string   // attach --comm: every process of this name
	wallOffset   int64    // report: the recording's monotonic-to-Unix offset
	bootOffset   int64    // report: its monotonic-to-boot-time offset
}

// globList is a flag that may be given many times.
type globList []string

func (g *globList) String() string     { return strings.Join(*g, ",") }
func (g *globList) Set(s string) error { *g = append(*g, s); return nil }

// parseFlags parses flags anywhere among the positional arguments, which
// Go's flag package alone does not. What follows "--" is returned apart,
// untouched: it is the command to run.
func parseFlags(args []string) (o options, pos, cmd []string, err error) {
	for i, a := range args {
		if a == "--" {
			args, cmd = args[:i], args[i+1:]
			break
		}
	}
	fs := flag.NewFlagSet("probe", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Var((*outputFlag)(&o.out), "o", "")
	fs.StringVar(&o.recordTo, "record", "", "")
	fs.Var((*durationFlag)(&o.duration), "duration", "")
	fs.StringVar(&o.tracers, "tracer", "", "")
	fs.Var(&o.filter, "filter", "")
	fs.Var(&o.notrace, "notrace", "")
	fs.Var(&o.graphFunc, "graph-function", "")
	fs.IntVar(&o.maxDepth, "max-depth", 0, "")
	fs.Var((*durationFlag)(&o.threshold), "graph-time-threshold", "")
	fs.BoolVar(&o.args, "args", false, "")
	fs.Var(&o.calls, "calls", "")
	fs.BoolVar(&o.summary, "c", false, "")
	o.callLines.flags(fs)
	fs.BoolVar(&o.syscalls, "S", false, "")
	fs.BoolVar(&o.noLibCalls, "L", false, "")
	fs.Var((*durationFlag)(&o.interval), "interval", "")
	fs.BoolVar(&o.intervalClear, "interval-clear", false, "")
	fs.BoolVar(&o.noBoost, "no-boost", false, "")
	fs.BoolVar(&o.noPlacement, "no-placement", false, "")
	fs.BoolVar(&o.noOptimize, "no-optimize", false, "")
	fs.BoolVar(&o.noMailbox, "no-mailbox", false, "")
	fs.BoolVar(&o.noInProcess, "no-inprocess", false, "")
	fs.IntVar(&o.ringKiB, "ring-size", 0, "")
	fs.BoolVar(&o.drop, "drop", false, "")
	fs.BoolVar(&o.noDrop, "no-drop", false, "")
	def := fetch.DefaultFailAttr()
	fs.Uint64Var(&o.fail.every, "fail-every", def.Interval, "")
	fs.Float64Var(&o.fail.probability, "fail-probability", def.Probability, "")
	fs.Int64Var(&o.fail.times, "fail-times", def.Times, "")
	fs.Uint64Var(&o.fail.seed, "fail-seed", def.Seed, "")
	fs.BoolVar(&o.verbose, "v", false, "")
	fs.StringVar(&o.script, "script", "", "")
	o.set = map[string]bool{}
	fs.BoolVar(&o.repl, "repl", false, "")
	fs.StringVar(&o.format, "format", "", "")
	fs.IntVar(&o.buffer, "buffer-size", output.DefaultBuffer, "")
	fs.BoolVar(&o.follow, "f", false, "")
	fs.StringVar(&o.comm, "comm", "", "")
	if pos, err = parseInterleaved(fs, args); err != nil {
		return o, nil, nil, flagError(err)
	}
	fs.Visit(func(f *flag.Flag) { o.set[f.Name] = true })
	return o, pos, cmd, nil
}

// parseInterleaved parses fs's flags anywhere among args and returns the
// positional arguments, in order.
func parseInterleaved(fs *flag.FlagSet, args []string) (pos []string, err error) {
	for len(args) > 0 {
		// A delete spec (-:EVENT) is positional, though it starts
		// with a dash: the flags are parsed up to the next one.
		if isDeleteSpec(args[0]) {
			pos, args = append(pos, args[0]), args[1:]
			continue
		}
		n := len(args)
		if i := slices.IndexFunc(args, isDeleteSpec); i >= 0 {
			n = i
		}
		if err := fs.Parse(args[:n]); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if len(rest) > 0 {
			pos = append(pos, rest[0])
			rest = rest[1:]
		}
		args = append(slices.Clip(rest), args[n:]...)
	}
	return pos, nil
}

func isDeleteSpec(arg string) bool { return strings.HasPrefix(arg, "-:") }

// outputFlag is -o's file: -o "" (an unset variable, say) would be
// standard output, silently.
type outputFlag string

func (f *outputFlag) String() string { return string(*f) }

func (f *outputFlag) Set(s string) error {
	if s == "" {
		return errors.New("no file named (give a file, or - for standard output)")
	}
	*f = outputFlag(s)
	return nil
}

// durationFlag is a positive duration with its unit: "5" alone is a
// mistake (seconds? milliseconds?), and so is a duration of nothing.
type durationFlag time.Duration

func (d *durationFlag) String() string { return time.Duration(*d).String() }

func (d *durationFlag) Set(s string) error {
	v, err := time.ParseDuration(s)
	switch {
	case err == nil && v <= 0:
		return errors.New("want a positive duration")
	case err == nil:
		*d = durationFlag(v)
		return nil
	}
	if _, nerr := strconv.ParseFloat(s, 64); nerr == nil {
		return errors.New("missing unit (e.g. 5s, 100ms)")
	}
	return errors.New("not a duration (e.g. 5s, 1m30s, 100ms)")
}

// flagError rewrites the flag package's "invalid value "5" for flag
// -duration: ..." as the flag is written: --duration "5": ...
func flagError(err error) error {
	if m := flagErrRE.FindStringSubmatch(err.Error()); m != nil {
		dash := "--"
		if len(m[2]) == 1 {
			dash = "-"
		}
		return fmt.Errorf("%s%s %s: %s", dash, m[2], m[1], m[3])
	}
	return err
}

var flagErrRE = regexp.MustCompile(`^invalid value ("(?:[^"\\]|\\.)*") for flag -(\S+): (.*)$`)

func bad(format string, a ...any) (int, error) { return 2, fmt.Errorf(format, a...) }

// failure maps an error to its exit status: 2 for the user's mistakes.
func failure(err error) (int, error) {
	if errors.Is(err, fetch.ErrBadInput) {
		return 2, err
	}
	return 1, err
}

func cmdRun(args []string, record bool) (int, error) {
	o, specs, argv, err := parseFlags(args)
	if err != nil {
		return bad("%v", err)
	}
	o.record, o.command = record, argv
	if o.comm != "" {
		return bad("--comm: for attach only (run traces the program it launches)")
	}
	if o.set["duration"] {
		return bad("--duration: for attach only (run traces until the program exits; Ctrl-C ends it)")
	}
	if len(argv) == 0 {
		return bad("missing -- CMD (usage: probe run [flags] [SPEC ...] -- CMD [ARGS ...])")
	}
	if o.script != "" {
		if specs, err = applyScript(&o, specs, false); err != nil {
			return bad("%v", err)
		}
	}
	parsed, err := parseSpecs(specs)
	if err != nil {
		return failure(err)
	}
	if err := applyFail(&o, parsed, false); err != nil {
		return bad("%v", err)
	}
	locateScriptProbes(parsed, &o)
	ts, err := parseTracers(&o)
	if err == nil {
		err = stackFormatSource(&o, ts, stacktraces(parsed))
	}
	if err == nil {
		err = checkInterval(&o, parsed)
	}
	if err != nil {
		return bad("%v", err)
	}
	// The output first: one that cannot take the trace is refused
	// before anything is started.
	out, err := openOutput(&o)
	if err != nil {
		return failure(err)
	}
	t, err := probe.Launch(argv, nil)
	if err != nil {
		return failure(err)
	}
	o.pid = t.Pid() // held before its first instruction
	sink := newSink(&o, ts, len(parsed) > 0, out)
	if err := setupFollow(t, &o); err != nil {
		t.Kill()
		return 1, err
	}
	if err := addAll(t, parsed, ts, &o, sink); err != nil {
		t.Kill() // it has not run a single instruction of its own
		return failure(err)
	}
	// Ctrl-C reaches the tracee from the terminal; we stay to the end.
	// SIGTERM and SIGHUP are passed on: the tracee decides.
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, unix.SIGINT, unix.SIGTERM, unix.SIGHUP)
	defer signal.Stop(sigs)
	go func() {
		for s := range sigs {
			if s != unix.SIGINT {
				unix.Kill(t.Pid(), s.(unix.Signal))
			}
		}
	}()
	syncWrites(t, sink)
	sink.stream.Sync()
	startVerbose(t, sink, o.verbose)
	var status probe.ExitStatus
	var loopErr error
	select {
	case <-t.Done():
		status, loopErr = t.Wait()
		if loopErr != nil && !status.Exited {
			// Our failure, detached from: the program goes on
			// untraced, and we stay its parent to the end.
			status = waitChild(t.Pid())
		}
	case <-sink.stream.Failed():
		// Nobody reads the trace: the program goes on untraced, and
		// we wait for it as its parent.
		t.Detach()
		status, loopErr = t.Wait()
		if !status.Exited {
			status = waitChild(t.Pid())
		}
	}
	if err := closeTrace(sink, t); err != nil {
		return 1, err
	}
	if loopErr != nil {
		return 1, loopErr
	}
	if status.Signaled {
		fmt.Fprintf(os.Stderr, "probe: %s killed by %s\n", argv[0], unix.SignalName(status.Signal))
		return 128 + int(status.Signal), nil
	}
	return status.Code, nil
}

func cmdAttach(args []string, record bool) (int, error) {
	o, pos, rest, err := parseFlags(args)
	if err != nil {
		return bad("%v", err)
	}
	o.record = record
	if len(rest) > 0 {
		return bad("unexpected -- %s: attach takes a PID, not a command", strings.Join(rest, " "))
	}
	var pids []int
	if o.comm != "" {
		if pids, err = pidsOfComm(o.comm); err != nil {
			return bad("%v", err)
		}
		pos = append([]string{""}, pos...) // (where a PID would be)
	} else {
		if len(pos) == 0 {
			return bad("missing PID (usage: probe attach [flags] PID[,PID...] [SPEC ...])")
		}
		if pids, err = parsePids(pos[0]); err != nil {
			return bad("%v", err)
		}
	}
	pid := pids[0]
	o.pid, o.morePids = pid, pids[1:]
	if o.script != "" {
		specs, err := applyScript(&o, pos[1:], true)
		if err != nil {
			return bad("%v", err)
		}
		pos = append(pos[:1], specs...)
	}
	ts, err := parseTracers(&o)
	if err == nil {
		// (A bad spec is reported where the specs are parsed below.)
		defs, perr := parseSpecs(pos[1:])
		err = stackFormatSource(&o, ts, perr != nil || stacktraces(defs))
		if err == nil && perr == nil && !replWanted(&o, pos[1:], ts) {
			err = checkInterval(&o, defs)
		}
	}
	if err != nil {
		return bad("%v", err)
	}
	interactive := replWanted(&o, pos[1:], ts)
	if len(pos) == 1 && !ts.any() && !interactive {
		return bad("no probes given (usage: probe attach [flags] PID[,PID...] SPEC ..., or --repl)")
	}
	parsed, err := parseSpecs(pos[1:])
	if err == nil {
		locateScriptProbes(parsed, &o)
	}
	if err != nil {
		return failure(err)
	}
	if err := applyFail(&o, parsed, interactive); err != nil {
		return bad("%v", err)
	}
	if interactive {
		return replAttach(&o, ts, parsed)
	}
	out, err := openOutput(&o)
	if err != nil {
		return failure(err)
	}
	sink := newSink(&o, ts, len(parsed) > 0, out)
	t, sigs, stopSignals, err := attachCatching(pid)
	var ended *probe.EndedError
	if errors.As(err, &ended) {
		// It ended as we attached: reported as when it ends later,
		// the probes' tables empty.
		sink.emptyTables(parsed)
		if err := closeTrace(sink, nil); err != nil {
			return 1, err
		}
		if ended.Status.Signaled {
			fmt.Fprintf(os.Stderr, "probe: %v\n", ended)
		}
		return 0, nil
	}
	if err != nil {
		return failure(err)
	}
	defer stopSignals()
	defer t.Detach() // also on a panic of ours
	if err := setupFollow(t, &o); err != nil {
		return 1, err
	}
	if err := addAll(t, parsed, ts, &o, sink); err != nil {
		t.Detach()
		if status, _ := t.Wait(); !status.Exited {
			return failure(err)
		}
		// The process ended (was killed) while the probes went in:
		// that, not the install, is what happened; reported below,
		// with the tables of the probes that had not gone in, empty.
		sink.emptyTables(parsed)
	}
	if err := adoptMore(t, &o); err != nil {
		return failure(err)
	}
	syncWrites(t, sink)
	sink.stream.Sync()
	startVerbose(t, sink, o.verbose)
	var timeout <-chan time.Time
	if o.duration > 0 {
		timeout = time.After(o.duration)
	}
	select {
	case <-sigs:
	case <-timeout:
	case <-t.Done():
	case <-sink.stream.Failed():
	}
	if err := t.Detach(); err != nil {
		return 1, err
	}
	status, loopErr := t.Wait()
	if err := closeTrace(sink, t); err != nil {
		return 1, err
	}
	if loopErr != nil {
		return 1, loopErr
	}
	if status.Signaled {
		// Not our failure, but worth saying: the trace ends here.
		fmt.Fprintf(os.Stderr, "probe: pid %d killed by %s\n", pid, unix.SignalName(status.Signal))
	}
	return 0, nil
}

// adoptMore attaches t to the other processes, o.morePids, before any runs
// with the probes: one that cannot be traced leaves them all as they
// were (detached).
func adoptMore(t *probe.Tracer, o *options) error {
	for _, more := range o.morePids {
		if err := t.Adopt(more); err != nil {
			t.Detach()
			t.Wait()
			return err
		}
	}
	return nil
}

// parsePids reads attach's PID[,PID...]: processes that exist, each once.
func parsePids(arg string) ([]int, error) {
	var pids []int
	for f := range strings.SplitSeq(arg, ",") {
		pid, err := strconv.Atoi(f)
		if err != nil || pid <= 0 {
			return nil, fmt.Errorf("bad PID %q", f)
		}
		if slices.Contains(pids, pid) {
			return nil, fmt.Errorf("PID %d given twice", pid)
		}
		if pid == os.Getpid() {
			return nil, fmt.Errorf("PID %d: probe itself", pid)
		}
		if _, err := os.Stat(fmt.Sprintf("/proc/%d/task", pid)); err != nil && len(arg) > len(f) {
			// (One PID alone: attach says what is wrong with it.)
			return nil, fmt.Errorf("PID %d: no such process", pid)
		}
		pids = append(pids, pid)
	}
	return pids, nil
}

// pidsOfComm lists the processes whose name (comm, as ps shows it: the
// first 15 bytes) is name, in the order of their PIDs; probe itself is
// never one.
func pidsOfComm(name string) ([]int, error) {
	if name == "" || strings.Contains(name, "/") {
		return nil, fmt.Errorf("--comm %q: a process name (as ps -o comm shows it)", name)
	}
	short := name[:min(len(name), 15)] // TASK_COMM_LEN - 1
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
		if err != nil || strings.TrimSuffix(string(b), "\n") != short {
			continue
		}
		// (A zombie's name stays until it is reaped: nothing to trace.)
		if stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err == nil {
			if i := bytes.LastIndexByte(stat, ')'); i > 0 && i+2 < len(stat) && stat[i+2] == 'Z' {
				continue
			}
		}
		pids = append(pids, pid)
	}
	if len(pids) == 0 {
		return nil, fmt.Errorf("--comm %s: no process of that name", name)
	}
	slices.Sort(pids)
	return pids, nil
}

// attachCatching attaches to pid with SIGINT, SIGTERM and SIGHUP caught
// first, so that none can kill us with probes installed; stop ends the
// catching.
func attachCatching(pid int) (t *probe.Tracer, sigs <-chan os.Signal, stop func(), err error) {
	c := make(chan os.Signal, 4)
	signal.Notify(c, unix.SIGINT, unix.SIGTERM, unix.SIGHUP)
	if t, err = probe.Attach(pid); err != nil {
		signal.Stop(c)
		return nil, nil, nil, err
	}
	return t, c, func() { signal.Stop(c) }, nil
}

// sink is where events go: a formatter fed off the ptrace thread.
type sink struct {
	file      *os.File
	recording *os.File      // --record's, or nil
	writer    output.Writer // notes go here
	all       output.Writer // events go here
	stream    *output.Stream
	traced    *probe.FuncTraceInfo // what the function tracer installed
	acts      *action.Session      // the probes' actions (actions.go)
	added     []*probe.Probe       // the probes added, for -v
	// noRecord: some probe's actions switch others (traceon/off,
	// enable/disable), so none records in the tracee.
	noRecord bool
	stack    bool           // the stack tracer's report is owed
	calls    bool           // --calls: the trace is ltrace's
	text     bool           // the trace is ftrace's text: the stack report may follow it
	json     bool           // the trace is JSON lines: the probes' paths end it
	pending  []*probe.Probe // probes that waited for their library (pending.go)
	// withTables are the probes whose actions have their tables.
	withTables map[*probeDef]bool
	// stopEvery ends the tables printed every --interval.
	stopEvery func()
	raw       *rawSink // probe record's raw capture, if asked for (raw.go)
	rawWanted bool     // the recording may be raw: its probes' hits too
}

// syncWrites keeps ltrace's lines (--calls) in order with the program's
// own output where both go to one terminal (sharedTerminal): its users
// read them as one story, and pay a stop a system call for it, as under
// ltrace; other traces are not slowed so. (A tracer that has ended
// fails it, and says so where it is waited for.)
func syncWrites(t *probe.Tracer, s *sink) {
	if !s.calls {
		return
	}
	if fds := sharedTerminal(t.Pid(), s.file); fds != nil {
		t.SyncWrites(fds, s.stream.Sync)
	}
}

// traceFiles are the files a trace goes to: -o's (or standard output),
// and --record's recording beside it, if asked for.
type traceFiles struct {
	out, recording *os.File
}

// openOutput opens -o's file, or gives standard output, and --record's.
func openOutput(o *options) (traceFiles, error) {
	files := traceFiles{out: os.Stdout}
	var err error
	if o.out != "" && !output.IsOTLPTarget(o.out) {
		if files.out, err = createOutput(o.out); err != nil {
			return files, err
		}
	}
	if o.recordTo != "" {
		if files.recording, err = createOutput(o.recordTo); err != nil {
			if files.out != os.Stdout {
				files.out.Close()
			}
			return files, err
		}
	}
	return files, nil
}

// newSink makes the sink writing to files. o.pid is the process's, known.
func newSink(o *options, ts tracers, probes bool, files traceFiles) *sink {
	primary, all := newWriter(files.out, ts, o, probes)
	if files.recording != nil {
		// The recording takes what the live trace takes, notes
		// included: its report is the live trace.
		rec := output.NewRecorder(files.recording, recordingInfo(o, probes))
		primary, all = output.Tee(primary, rec), output.Tee(all, rec)
	}
	return &sink{file: files.out, recording: files.recording, writer: primary, all: all, stream: output.NewStreamSize(all, o.buffer),
		acts: action.NewSession(), text: o.textFormat(), json: o.format == "json"}
}

// closeTrace closes s. A reader gone away (EPIPE) or a collector that
// failed ended the trace early, not the run: the program's status
// stands, and the collector's error is said.
func closeTrace(s *sink, t *probe.Tracer) error {
	err := s.close(t)
	switch {
	case errors.Is(err, unix.EPIPE):
		return nil
	case errors.Is(err, output.ErrCollector):
		fmt.Fprintf(os.Stderr, "probe: %v\n", err)
		return nil
	}
	return err
}

// close ends the trace: the stream, the tables, the notes of what was
// lost. t is nil when there was never a tracer (the process ended as we
// attached).
func (s *sink) close(t *probe.Tracer) error {
	if s.stopEvery != nil {
		s.stopEvery()
	}
	s.raw.flush(t)
	err := s.stream.Close()
	if e := s.all.Finish(); err == nil {
		err = e
	}
	if s.stack && s.text && t != nil {
		if e := output.WriteStack(s.file, stackReport(t.StackUsage())); err == nil {
			err = e
		}
	}
	if e := s.drawActions(); err == nil {
		err = e
	}
	if t != nil {
		s.tracerNotes(t)
	}
	if s.json {
		// A program reading the trace learns how each probe was
		// served, as -v says it on stderr.
		for _, line := range pathLines(s.added) {
			s.writer.Comment(line)
		}
	}
	s.writer.Flush()
	if s.file != os.Stdout {
		if e := s.file.Close(); err == nil {
			err = e
		}
	}
	if s.recording != nil {
		if e := s.recording.Close(); err == nil {
			err = e
		}
	}
	if t != nil {
		debugCounts(t)
	}
	return err
}

// tracerNotes ends the trace with what the tracer skipped and lost.
func (s *sink) tracerNotes(t *probe.Tracer) {
	if s.traced != nil {
		_, skipped, noArgs, loaded := s.traced.Now()
		if s.calls {
			// ltrace's view: the program's calls that go unseen, not
			// the library's functions that could not be hooked.
			skipped = slices.DeleteFunc(slices.Clone(skipped), func(sk probe.SkippedFunc) bool { return !sk.Imported })
		}
		if len(skipped) > 0 {
			s.writer.Comment(skippedNote(skipped))
		}
		if n := len(noArgs); n > 0 {
			s.writer.Comment(fmt.Sprintf("--args: %d functions traced without their arguments (no DWARF, no prototype): %s", n, firstNames(noArgs, 5)))
		}
		for _, lib := range s.traced.Waiting {
			if !slices.Contains(loaded, lib) {
				s.writer.Comment(fmt.Sprintf("no function of %s was traced: it was not loaded", lib))
			}
		}
	}
	s.pendingSummary()
	stats := t.Stats()
	if lost := stats.LostHits; lost > 0 {
		s.writer.Comment(fmt.Sprintf("%d hits lost while detaching", lost))
	}
	if lost := s.stream.Lost(); lost > 0 {
		s.writer.Comment(output.LostNote(lost))
	}
	if l := t.RecordsLost(); l.Total() > 0 {
		s.writer.Comment(recordsLostNote(l))
	}
	if d := t.RecordsWaited(); d >= time.Millisecond {
		s.writer.Comment(fmt.Sprintf("%s waited by the threads for room in their rings (--drop: never, losing events instead)", d.Round(time.Millisecond)))
	}
	if s.raw != nil && s.raw.on {
		// Known once the records are decoded (probe report).
		s.raw.rec.DecoderNotes()
		return
	}
	for _, note := range returnNotes(stats, s.calls) { // (--calls shows each lost: "<no return ...>")
		s.writer.Comment(note)
	}
}

// recordsLostNote says what the in-process probes' rings dropped, as
// ftrace's "[LOST N EVENTS]": by thread for full rings, in sum for hits
// that found no ring.
func recordsLostNote(l ring.Lost) string {
	var parts []string
	for _, tid := range slices.Sorted(maps.Keys(l.Full)) {
		if n := l.Full[tid]; n > 0 {
			parts = append(parts, fmt.Sprintf("tid %d: %d", tid, n))
		}
	}
	note := fmt.Sprintf("%d events lost in the tracee", l.Total())
	if len(parts) > 0 {
		note += fmt.Sprintf(", rings full (%s; --no-drop, --ring-size)", strings.Join(parts, ", "))
	}
	if l.NoRing > 0 {
		note += fmt.Sprintf(", %d of threads that found no ring free", l.NoRing)
	}
	if l.NoTid > 0 {
		note += fmt.Sprintf(", %d of threads without a thread control block", l.NoTid)
	}
	return note
}

// The start (symbols, the branch sweep of each library probed, the
// stubs) builds most of what probe keeps, ~20-50 MB, from a heap of 4:
// the collector ran once each time it doubled, ~10 ms of a 50 ms start.
// Until the probes are placed it does not run, unless the heap passes
// startHeap (a program with DWARF of hundreds of MB): from there on it
// runs as usual (a memory limit alone would have it run again and again
// on a live heap above it).
const startHeap = 192 << 20

var gcHeld atomic.Bool

// holdGC holds the collector back for the start.
func holdGC() {
	gcHeld.Store(true)
	debug.SetGCPercent(-1)
	go func() {
		sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
		for gcHeld.Load() {
			metrics.Read(sample)
			if sample[0].Value.Kind() == metrics.KindUint64 && sample[0].Value.Uint64() > startHeap {
				letGCRun()
				return
			}
			time.Sleep(2 * time.Millisecond)
		}
	}()
}

// releaseGC lets the collector run once t has placed its probes (or
// ended): when what probe holds has doubled, as it would had a
// collection just run, then as usual. Most of the start's heap is live
// (30 of 38 MB under function_graph on Lua): a collection right away
// found little to free and cost ~10 ms of CPU, as much as the traced
// program of a short run.
func releaseGC(t *probe.Tracer) {
	if !gcHeld.Load() {
		return
	}
	go func() {
		select {
		case <-t.Ready():
		case <-t.Done():
		}
		if !gcHeld.CompareAndSwap(true, false) {
			return
		}
		// Off, as now, with a memory limit that the heap reaches when
		// it has doubled: the collection it brings turns the percent
		// back on.
		sample := []metrics.Sample{{Name: "/memory/classes/total:bytes"}, {Name: "/memory/classes/heap/objects:bytes"}}
		metrics.Read(sample)
		if sample[0].Value.Kind() != metrics.KindUint64 || sample[1].Value.Kind() != metrics.KindUint64 {
			debug.SetGCPercent(100)
			return
		}
		total, heap := sample[0].Value.Uint64(), sample[1].Value.Uint64()
		limit := debug.SetMemoryLimit(-1) // (GOMEMLIMIT's, if set)
		runtime.AddCleanup(&gcSentinel{}, func(limit int64) {
			debug.SetGCPercent(100)
			debug.SetMemoryLimit(limit)
		}, limit)
		debug.SetMemoryLimit(min(limit, int64(total+heap)))
	}()
}

// gcSentinel is an object whose cleanup runs after the first collection
// once the start's hold is off.
type gcSentinel struct{ _ *int }

func letGCRun() {
	if gcHeld.CompareAndSwap(true, false) {
		debug.SetGCPercent(100)
	}
}

// startVerbose starts t; with -v it says how each probe's hits are
// taken before the process runs on (a launched program's output comes
// after), or, if it ended while the probes went in, once it has.
func startVerbose(t *probe.Tracer, s *sink, verbose bool) {
	releaseGC(t)
	if !verbose {
		t.Start()
		return
	}
	printed := make(chan struct{})
	t.StartThen(func() {
		printPaths(t, s)
		close(printed)
	})
	select {
	case <-printed:
	case <-t.Done():
		select {
		case <-printed:
		default:
			printPaths(t, s)
		}
	}
}

// printPaths says on stderr, for -v, how each probe's hits are taken.
func printPaths(t *probe.Tracer, s *sink) {
	select {
	case <-t.Ready():
	case <-t.Done():
	}
	for _, line := range pathLines(s.added) {
		fmt.Fprintf(os.Stderr, "probe: %s\n", line)
	}
	if s.traced != nil {
		in, ways, stops := t.FuncPaths()
		fmt.Fprintf(os.Stderr, "probe: function tracer: %d functions in-process%s%s\n", in, waysNote(ways), stopsNote(stops))
		if line := stoppingNote(t.FuncStops()); line != "" {
			fmt.Fprintf(os.Stderr, "probe: function tracer: these stop the thread: %s\n", line)
		}
	}
	if _, raw := t.RawCapture(); raw {
		fmt.Fprintf(os.Stderr, "probe: recorded raw: the records as the tracee makes them, decoded by probe report\n")
	}
}

// stopsNote is ", N stop the thread (WHY: n, ...)", the most frequent
// reason first, or "".
func stopsNote(stops map[string]int) string {
	if len(stops) == 0 {
		return ""
	}
	n, parts := tally(stops)
	return fmt.Sprintf(", %d stop the thread (%s)", n, parts)
}

// stoppingNames is how many functions stoppingNote names for each
// reason: --no-inprocess stops them all.
const stoppingNames = 12

// stoppingNote names the functions that stop the thread, those of the
// most frequent reason first: "f, g (WHY); h and 3 more (WHY)".
func stoppingNote(stopping map[string][]string) string {
	whys := slices.SortedFunc(maps.Keys(stopping), func(a, b string) int {
		return cmp.Or(cmp.Compare(len(stopping[b]), len(stopping[a])), cmp.Compare(a, b))
	})
	var parts []string
	for _, why := range whys {
		names := stopping[why]
		list := strings.Join(names[:min(len(names), stoppingNames)], ", ")
		if more := len(names) - stoppingNames; more > 0 {
			list += fmt.Sprintf(" and %d more", more)
		}
		parts = append(parts, fmt.Sprintf("%s (%s)", list, why))
	}
	return strings.Join(parts, "; ")
}

// waysNote says where the functions in-process that are not hooked at
// their first instruction are hooked, and how many are hooked there
// before their call of mcount: " (past the call of mcount: 7, at the
// entry, before the call of mcount: 1)".
func waysNote(ways map[string]int) string {
	if len(ways) == 0 {
		return ""
	}
	_, parts := tally(ways)
	return fmt.Sprintf(" (%s)", parts)
}

// tally is counts' sum, and "what: n, ..." most first.
func tally(counts map[string]int) (int, string) {
	keys := slices.Collect(maps.Keys(counts))
	slices.SortFunc(keys, func(a, b string) int { return cmp.Or(counts[b]-counts[a], strings.Compare(a, b)) })
	n, parts := 0, make([]string, len(keys))
	for i, k := range keys {
		n += counts[k]
		parts[i] = fmt.Sprintf("%s: %d", k, counts[k])
	}
	return n, strings.Join(parts, ", ")
}

// inProcessText says how an in-process probe's hits are taken (how:
// Path's note).
func inProcessText(how string) string {
	if how != "" {
		return "in-process, " + how
	}
	return "in-process"
}

// pathLines says for each probe, by name, how its hits are taken.
func pathLines(added []*probe.Probe) []string {
	ps := slices.Clone(added)
	slices.SortFunc(ps, func(a, b *probe.Probe) int { return strings.Compare(a.Name(), b.Name()) })
	var lines []string
	for _, p := range ps {
		if in, why := p.Path(); in {
			lines = append(lines, p.Name()+": "+inProcessText(why))
		} else if p.Pending() && why == "" {
			lines = append(lines, p.Name()+": pending (its library is not loaded yet)")
		} else {
			lines = append(lines, fmt.Sprintf("%s: stops the thread (%s)", p.Name(), why))
		}
	}
	return lines
}

// debugCounts says on stderr, for tests, which fast paths ran: the sites
// jump-optimised (PROBE_DEBUG_JUMPS), the stops served from the mailbox
// (PROBE_DEBUG_MAILBOX).
func debugCounts(t *probe.Tracer) {
	stats := t.Stats()
	if os.Getenv("PROBE_DEBUG_JUMPS") != "" {
		fmt.Fprintf(os.Stderr, "probe: %d sites jump-optimised, %d threads moved out of detours\n", stats.JumpOptimized, stats.DetourExits)
		if n := stats.CopyFaults; n > 0 {
			fmt.Fprintf(os.Stderr, "probe: %d copies of memory by stubs faulted and went to the system call\n", n)
		}
		if n := stats.ReturnHookJumps; n > 0 {
			fmt.Fprintf(os.Stderr, "probe: %d of them hook returns in the detour, %d threads moved out after the swap\n", n, stats.SwappedExits)
		}
		if refused := stats.JumpsRefused; len(refused) > 0 {
			fmt.Fprintf(os.Stderr, "probe: %d sites keep their int3, something else lands inside the jump:\n", len(refused))
			for _, why := range refused {
				fmt.Fprintf(os.Stderr, "probe:   %s\n", why)
			}
		}
	}
	if os.Getenv("PROBE_DEBUG_MAILBOX") != "" {
		fmt.Fprintf(os.Stderr, "probe: %d stops served from the mailbox\n", stats.MailboxStops)
	}
}

// waitForRoom says whether threads whose ring is full wait (--no-drop)
// rather than drop their records (--drop): by default they wait in a
// command probe launched, and drop in a process attached to, which its
// tracer must not slow.
func (o *options) waitForRoom() bool {
	if o.drop || o.noDrop {
		return o.noDrop
	}
	return len(o.command) > 0
}

// recordOutput is the stream as the drain of the rings sees it: with
// reserve records of its room kept for the hits that stop a thread.
type recordOutput struct {
	*output.Stream
	reserve int
}

func (r recordOutput) Room() int { return r.Stream.Room() - r.reserve }

// addAll installs the probes, then the function tracer.
func addAll(t *probe.Tracer, specs []*probeDef, ts tracers, o *options, s *sink) error {
	tu := probe.Tuning{NoBoost: o.noBoost, NoOptimize: o.noOptimize, NoMailbox: o.noMailbox, NoPlacement: o.noPlacement,
		NoInProcess: o.noInProcess, RingSize: o.ringKiB << 10, WaitForRoom: o.waitForRoom()}
	if err := t.SetTuning(tu); err != nil {
		return err
	}
	// The rings hold what the output has no room for yet; a quarter of
	// the buffer stays for the hits that stop a thread, which cannot
	// wait there.
	if err := t.SetRecordOutput(recordOutput{s.stream, o.buffer / 4}); err != nil {
		return err
	}
	s.rawWanted = wantsRaw(ts, o, s)
	if err := addProbes(t, specs, s); err != nil {
		return err
	}
	if err := addTracer(t, ts, o, s); err != nil {
		return err
	}
	if err := setupRaw(t, ts, o, s); err != nil {
		return err
	}
	if s.stopEvery == nil {
		s.stopEvery = s.printEvery(o.interval, o.intervalClear, t.Ready())
	}
	return nil
}

func cmdList(args []string) (int, error) {
	if len(args) < 1 || len(args) > 2 {
		return bad("usage: probe list PID|BINARY [GLOB]")
	}
	glob := "*"
	if len(args) == 2 {
		glob = args[1]
	}
	var space *symbols.Space
	var err error
	pid, perr := strconv.Atoi(args[0])
	if perr == nil {
		space, err = symbols.LoadProcess(pid)
	} else {
		space, err = symbols.LoadBinary(args[0])
	}
	var pathErr *os.PathError
	switch {
	case err == nil:
	case perr == nil && errors.Is(err, os.ErrNotExist):
		return bad("pid %d: no such process", pid)
	case perr == nil && errors.Is(err, os.ErrPermission):
		// As attach says it: reading another process's maps takes the
		// same permission as tracing it.
		return bad("pid %d: not permitted to read its memory map (%s)", pid, tracee.PermissionHint(pid))
	case errors.As(err, &pathErr) && (errors.Is(err, os.ErrNotExist) || errors.Is(err, os.ErrPermission)):
		return bad("%v", pathErr)
	case errors.As(err, new(*elf.FormatError)):
		return bad("%s: not an ELF file", args[0])
	default:
		return 1, err
	}
	defer space.Close()
	w := bufio.NewWriter(os.Stdout)
	defer w.Flush()
	mods := append([]*symbols.Mapped(nil), space.Mapped...)
	sort.SliceStable(mods, func(i, j int) bool { return mods[i].Name < mods[j].Name })
	if sdtGlob, ok := strings.CutPrefix(glob, "sdt:"); ok {
		return listSDT(w, mods, sdtGlob)
	}
	for _, m := range mods {
		// A function's tracing sites (mcount calls, fentry nops, patchable
		// nops), by the function's link address: "KIND@+0xOFF".
		sites := make(map[uint64][]string)
		for _, s := range m.PatchSites() {
			if s.Func == "" {
				continue
			}
			sign, off := "+", s.Offset
			if off < 0 {
				sign, off = "-", -off
			}
			fnAddr := s.Addr - uint64(s.Offset)
			sites[fnAddr] = append(sites[fnAddr], fmt.Sprintf("%s@%s0x%x", s.Kind, sign, off))
		}
		// Go returns are probes on RET instructions: no return address
		// is ever touched there.
		_, goModule := m.Lookup("runtime.main")
		for _, fn := range m.Functions() {
			if !fetch.GlobMatch(glob, fn.Name) {
				continue
			}
			fmt.Fprintf(w, "0x%016x 0x%x %s %s", fn.Addr+m.Bias, fn.Size, m.Name, fn.Name)
			marks := sites[fn.Addr]
			if ok, _ := m.CallEntry(fn); !ok && !goModule {
				marks = append(marks, "no-return-hook")
			}
			if len(marks) > 0 {
				fmt.Fprintf(w, " %s", strings.Join(marks, ","))
			}
			fmt.Fprintln(w)
		}
	}
	return 0, nil
}

// listSDT lists the SDT probes whose PROVIDER:NAME matches glob (a
// provider glob alone: all its probes): the site's address, the
// semaphore's or -, the module, sdt:PROVIDER:NAME and its arguments as
// the note spells them.
func listSDT(w io.Writer, mods []*symbols.Mapped, glob string) (int, error) {
	loc := fetch.Location{SDT: true}
	var ok bool
	if loc.Provider, loc.Name, ok = strings.Cut(glob, ":"); !ok {
		loc.Name = "*"
	}
	for _, m := range mods {
		notes, err := m.SDTProbes()
		if err != nil {
			return 1, err
		}
		for _, n := range notes {
			if !loc.MatchesSDT(n.Provider, n.Name) {
				continue
			}
			sem := "-"
			if n.Semaphore != 0 {
				sem = fmt.Sprintf("0x%x", n.Semaphore+m.Bias)
			}
			fmt.Fprintf(w, "0x%016x %s %s sdt:%s:%s %s\n", n.PC+m.Bias, sem, m.Name, n.Provider, n.Name, n.Args)
		}
	}
	return 0, nil
}

// waitChild reaps a launched program we have detached from.
func waitChild(pid int) probe.ExitStatus {
	var ws unix.WaitStatus
	for {
		_, err := unix.Wait4(pid, &ws, 0, nil)
		if err != unix.EINTR {
			break
		}
	}
	es := probe.ExitStatus{Exited: true, Code: ws.ExitStatus()}
	if ws.Signaled() {
		es.Signaled, es.Signal = true, ws.Signal()
	}
	return es
}
