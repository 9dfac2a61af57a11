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
	if o.format == "" {
		return nil
	}
	f, ok := output.FormatNamed(o.format)
	if !ok {
		return fmt.Errorf("--format: unknown format %q (want %s)", o.format, output.FormatNames())
	}
	onlyStacks := ts.stack && !ts.graph && !ts.profile
	switch {
	case f.Collector && !output.IsOTLPTarget(o.out):
		return fmt.Errorf("--format %s: give the collector as -o otlp://HOST:PORT[/PATH] (OTLP/HTTP)", f.Name)
	case f.Needs == output.CallStacks && (ts.function || onlyStacks):
		// Their stacks are built from calls and returns (or come with
		// probe hits: stackFormatSource).
		return fmt.Errorf("--format %s: needs --tracer function_graph (calls and their returns), not %s", f.Name, o.tracers)
	case f.Needs == output.CallsAndReturns && !ts.graph && !ts.profile:
		return fmt.Errorf("--format %s: needs --tracer function_graph (calls and their returns)", f.Name)
	case f.Name != "text" && onlyStacks:
		return fmt.Errorf("--format %s: the stack tracer's report is text only", f.Name)
	case f.Binary && o.out == "" && isTerminal(os.Stdout):
		return fmt.Errorf("--format %s: the trace is binary; give -o FILE or redirect the output", f.Name)
	}
	return nil
}

// stackFormatSource checks that pprof and folded have call stacks to
// show: function_graph's (or the profile's) calls, or the stacks probe
// hits carry (the stacktrace action). probes says whether a probe has the
// stacktrace action, when the probes are known (a recording: only whether
// it has probes).
func stackFormatSource(o *options, ts tracers, probes bool) error {
	if f, ok := output.FormatNamed(o.format); ok && f.Needs == output.CallStacks && !ts.graph && !ts.profile && !probes {
		return fmt.Errorf("--format %s: no call stacks to show: give --tracer function_graph, or a probe with => stacktrace", o.format)
	}
	return nil
}

// checkInterval refuses --interval where no probe of defs keeps a table
// for it to print (count, hist, sum, avg, min, max).
func checkInterval(o *options, defs []*probeDef) error {
	if o.intervalClear && o.interval <= 0 {
		return fmt.Errorf("--interval-clear needs --interval D (the tables are emptied each D)")
	}
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
func formatWriter(w io.Writer, ts tracers, o *options, probes bool) output.Writer {
	if o.record {
		return output.NewRecorder(w, recordingInfo(o, probes))
	}
	format, ok := output.FormatNamed(o.format)
	if !ok || format.New == nil {
		return nil
	}
	opts := output.FormatOptions{Returns: ts.returns(), Clocks: output.NowClocks(), Program: programName(o), Target: o.out, Pid: o.pid, Notes: os.Stderr}
	if o.wallOffset != 0 {
		opts.Clocks = output.PerfettoClocks{Wall: o.wallOffset, Boot: o.bootOffset} // a recording's
	}
	fw, err := format.New(w, opts)
	if err != nil {
		// (checkFormat checked the target.) The first write says it.
		return output.Failing(err)
	}
	return fw
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
