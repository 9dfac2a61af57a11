package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"time"

	"golang.org/x/sys/unix"

	"github.com/probedbg/probe/action"
	"github.com/probedbg/probe/output"
	"github.com/probedbg/probe/probe"
)

// checkFormat checks --format against the tracers and the destination.
func checkFormat(o *options, ts tracers) error {
	if o.buffer < 1 {
		return fmt.Errorf("--buffer-size %d: want at least 1 event", o.buffer)
	}
	if k := o.ringKiB; o.set["ring-size"] && (k < 4 || k&(k-1) != 0 || k > 1<<20) {
		return fmt.Errorf("--ring-size %d: want a power of two from 4 to 1048576 (KiB)", k)
	}
	if o.drop && o.noDrop {
		return fmt.Errorf("--drop and --no-drop: choose one")
	}
	if o.set["record"] && (o.record || o.recordTo == "") {
		if o.record {
			return fmt.Errorf("--record %s: probe record records already (to -o FILE)", o.recordTo)
		}
		return fmt.Errorf("--record: no file named")
	}
	if output.IsOTLPTarget(o.out) {
		if o.format == "" {
			o.format = "otlp"
		}
		if o.format != "otlp" {
			return fmt.Errorf("-o %s: a collector takes --format otlp, not %s", o.out, o.format)
		}
		if err := output.CheckOTLPTarget(o.out); err != nil {
			return err
		}
	}
	switch o.format {
	case "otlp":
		if !output.IsOTLPTarget(o.out) {
			return fmt.Errorf("--format otlp: give the collector as -o otlp://HOST:PORT[/PATH] (OTLP/HTTP)")
		}
	case "", "text", "json", "chrome", "perfetto":
	case "pprof", "folded":
		// Their stacks are built from calls and returns (or come with
		// probe hits: stackFormatSource).
		if ts.function || ts.stack && !ts.graph && !ts.profile {
			return fmt.Errorf("--format %s: needs --tracer function_graph (calls and their returns), not %s", o.format, o.tracers)
		}
	case "graph", "profile":
		if !ts.graph && !ts.profile {
			return fmt.Errorf("--format %s: needs --tracer function_graph (calls and their returns)", o.format)
		}
	default:
		return fmt.Errorf("--format: unknown format %q (want text, json, chrome, perfetto, pprof, folded, graph, profile or otlp)", o.format)
	}
	if o.format != "" && o.format != "text" && ts.stack && !ts.graph && !ts.profile {
		return fmt.Errorf("--format %s: the stack tracer's report is text only", o.format)
	}
	if o.format == "pprof" && o.out == "" && isTerminal(os.Stdout) {
		return fmt.Errorf("--format pprof: the profile is binary; give -o FILE or redirect the output")
	}
	return nil
}

// stackFormatSource checks that pprof and folded have call stacks to
// show: function_graph's (or the profile's) calls, or the stacks probe
// hits carry (the stacktrace action). probes says whether a probe has the
// stacktrace action, when the probes are known (a recording: only whether
// it has probes).
func stackFormatSource(o *options, ts tracers, probes bool) error {
	if (o.format == "pprof" || o.format == "folded") && !ts.graph && !ts.profile && !probes {
		return fmt.Errorf("--format %s: no call stacks to show: give --tracer function_graph, or a probe with => stacktrace", o.format)
	}
	return nil
}

// checkInterval refuses --interval where no probe of defs keeps a table
// for it to print (count, hist, sum, avg, min, max).
func checkInterval(o *options, defs []*probeDef) error {
	if o.interval <= 0 {
		return nil
	}
	for _, d := range defs {
		for _, a := range d.Actions {
			switch a.Kind {
			case action.Count, action.Hist, action.Sum, action.Avg, action.Min, action.Max:
				return nil
			}
		}
	}
	return fmt.Errorf("--interval %v: no probe keeps a table to print (=> count, hist:FIELD, sum:FIELD...)", o.interval)
}

// stacktraces reports whether a probe of defs has the stacktrace action.
func stacktraces(defs []*probeDef) bool {
	for _, d := range defs {
		for _, a := range d.Actions {
			if a.Kind == action.Stacktrace {
				return true
			}
		}
	}
	return false
}

func isTerminal(f *os.File) bool {
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

// textFormat reports whether the trace is ftrace's text.
func (o *options) textFormat() bool { return (o.format == "" || o.format == "text") && !o.record }

// formatWriter returns the writer of a format other than text, or nil.
func formatWriter(f io.Writer, ts tracers, o *options, probes bool) output.Writer {
	if o.record {
		return output.NewRecorder(f, recordingInfo(o, probes))
	}
	switch o.format {
	case "json":
		return output.NewJSON(f)
	case "chrome":
		return output.NewChrome(f, ts.returns())
	case "perfetto":
		clocks := output.NowClocks()
		if o.wallOffset != 0 {
			clocks = output.PerfettoClocks{Wall: o.wallOffset, Boot: o.bootOffset} // a recording's
		}
		return output.NewPerfetto(f, clocks)
	case "pprof":
		return output.NewPprof(f)
	case "folded":
		return output.NewFolded(f)
	case "graph":
		return output.NewCallGraph(f, programName(o))
	case "profile":
		// uftrace's report: the profile tracer's table, of any
		// recording of calls and returns.
		return output.NewProfile(f)
	case "otlp":
		wall := o.wallOffset
		if wall == 0 {
			wall = output.MonoToWall()
		}
		w, err := output.NewOTLP(o.out, programName(o), o.pid, wall)
		if err != nil {
			// (checkFormat checked the target.) The first export says it.
			return output.Failing(err)
		}
		return w
	}
	return nil
}

// cpuWidth is the digits of function_graph's CPU column: this machine's,
// or for a report the recording machine's.
func cpuWidth(o *options) int {
	if o.cpuWidth > 0 {
		return o.cpuWidth
	}
	return len(strconv.Itoa(runtime.NumCPU() - 1))
}

// returnEntry is when a return probe's call began, 0 for an entry probe
// or when unknown.
func returnEntry(h *probe.Hit) int64 {
	if h.Return == nil {
		return 0
	}
	return h.Return.EntryTime
}

// recordingInfo is a recording's header: how to render it, and what
// probe report --info tells of where it was made.
func recordingInfo(o *options, probes bool) output.RecordingInfo {
	info := output.RecordingInfo{
		Tracers: o.tracers, Calls: len(o.calls) > 0, Threshold: int64(o.threshold), Probes: probes, CPUWidth: cpuWidth(o),
		Command: o.command, Pid: o.pid, Attached: o.command == nil, Arch: runtime.GOARCH, Started: time.Now(),
	}
	clocks := output.NowClocks()
	info.WallOffset, info.BootOffset = clocks.Wall, clocks.Boot
	info.Host, _ = os.Hostname()
	var u unix.Utsname
	if unix.Uname(&u) == nil {
		info.Kernel = unix.ByteSliceToString(u.Release[:])
	}
	return info
}

// programName names the root of the call graph: the program's file name.
func programName(o *options) string {
	if len(o.command) > 0 {
		return filepath.Base(o.command[0])
	}
	if o.pid > 0 {
		if exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", o.pid)); err == nil {
			return filepath.Base(exe)
		}
		return strconv.Itoa(o.pid)
	}
	return "program"
}
