package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/probedbg/probe/output"
)

// cmdReport prints a recording (probe record) as the live trace would
// have, or converts it with --format.
func cmdReport(args []string) (int, error) {
	o := options{buffer: output.DefaultBuffer}
	fs := flag.NewFlagSet("report", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Var((*outputFlag)(&o.out), "o", "")
	fs.StringVar(&o.format, "format", "", "")
	var sel output.Selection
	var tids, timeRange string
	var info, fullNames bool
	fs.Var((*globList)(&sel.Filter), "filter", "")
	fs.Var((*globList)(&sel.Notrace), "notrace", "")
	fs.Var((*globList)(&sel.GraphFunction), "graph-function", "")
	fs.IntVar(&sel.Depth, "depth", 0, "")
	fs.IntVar(&sel.Depth, "max-depth", 0, "")
	fs.StringVar(&tids, "tid", "", "")
	fs.StringVar(&timeRange, "time-range", "", "")
	fs.BoolVar(&info, "info", false, "")
	fs.BoolVar(&fullNames, "full-names", false, "")
	fs.BoolVar(&o.summary, "c", false, "")
	o.callLines.flags(fs)
	files, err := parseInterleaved(fs, args)
	if err != nil {
		return bad("%v", flagError(err))
	}
	if len(files) > 1 {
		return bad("%q: one recording at a time (FILE given as %q already)", files[1], files[0])
	}
	if len(files) != 1 {
		return bad("usage: probe report [--format F] [-o OUT] [--info] [--tid T,...] [--time-range FROM~TO] [--filter G] [--notrace G] [--graph-function G] [--depth N] [--full-names] FILE")
	}
	if sel.Depth < 0 {
		return bad("--depth %d: want a positive depth", sel.Depth)
	}
	if sel.Tids, err = parseTids(tids); err != nil {
		return bad("%v", err)
	}
	span, err := parseTimeRange(timeRange)
	if err != nil {
		return bad("%v", err)
	}
	if info && (o.format != "" || sel.Active() || span.set()) {
		return bad("--info: it summarises the whole recording; give it alone (with -o)")
	}
	var in *os.File
	in, err = os.Open(files[0])
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return bad("%v", err)
		}
		return 1, err
	}
	defer in.Close()
	rec, err := output.OpenRecording(in)
	if err != nil {
		return bad("%s: %v (make one with probe record -o FILE)", files[0], err)
	}
	o.tracers, o.threshold, o.cpuWidth = rec.Info.Tracers, time.Duration(rec.Info.Threshold), rec.Info.CPUWidth
	if rec.Info.Calls {
		o.calls = globList{"(recorded)"} // what matters: the lines are ltrace's
	}
	ts, err := parseTracers(&o)
	if err == nil {
		err = stackFormatSource(&o, ts, rec.Info.Probes)
	}
	if err != nil {
		return bad("%v", err)
	}
	if sel.Active() || span.set() {
		if err := checkSelection(files[0], span.apply(sel)); err != nil {
			return bad("%v", err)
		}
	}
	out := os.Stdout
	if o.out != "" && !output.IsOTLPTarget(o.out) {
		if out, err = createOutput(o.out); err != nil {
			return failure(err)
		}
	}
	o.command, o.pid, o.wallOffset, o.bootOffset = rec.Info.Command, rec.Info.Pid, rec.Info.WallOffset, rec.Info.BootOffset
	if info {
		sum := rec.Summarize(rawReplay())
		sum.Path = files[0]
		_, err = sum.WriteTo(out)
	} else {
		primary, all := newWriter(out, ts, &o, rec.Info.Probes)
		if !fullNames {
			all = output.ShortNames(all)
		}
		if sel.Active() || span.set() {
			all = output.Select(all, span.apply(sel))
		}
		_, err = rec.Replay(all, primary, rawReplay())
		if errors.Is(err, unix.EPIPE) {
			err = nil // (a reader gone away: | head)
		}
	}
	if out != os.Stdout {
		if cerr := out.Close(); err == nil {
			err = cerr
		}
	}
	if errors.Is(err, output.ErrTruncated) {
		// What was whole is out; say the rest is missing.
		fmt.Fprintf(os.Stderr, "probe: %s: %v\n", files[0], err)
		return 0, nil
	}
	if err != nil {
		return 1, err
	}
	return 0, nil
}

// checkSelection refuses a selection that picks nothing of the recording
// at path (read once more for it), naming what picks nothing.
func checkSelection(path string, sel output.Selection) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	rec, err := output.OpenRecording(f)
	if err != nil {
		return err
	}
	return sel.Check(rec.Summarize(rawReplay()))
}

// parseTids reads --tid's comma list.
func parseTids(list string) ([]int, error) {
	var tids []int
	for _, f := range strings.Split(list, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		tid, err := strconv.Atoi(f)
		if err != nil || tid <= 0 {
			return nil, fmt.Errorf("--tid: bad thread id %q", f)
		}
		tids = append(tids, tid)
	}
	return tids, nil
}

// timeSpan is --time-range: each end a timestamp as the trace prints
// them (seconds since boot: 33226.055937) or a duration since the
// recording's first record (150ms); either may be left out.
type timeSpan struct {
	from, to       int64
	fromRel, toRel bool
	given          bool
}

func (s timeSpan) set() bool { return s.given }

func (s timeSpan) apply(sel output.Selection) output.Selection {
	sel.From, sel.To, sel.FromRelative, sel.ToRelative = s.from, s.to, s.fromRel, s.toRel
	return sel
}

func parseTimeRange(text string) (timeSpan, error) {
	var s timeSpan
	if text == "" {
		return s, nil
	}
	from, to, ok := strings.Cut(text, "~")
	if !ok {
		return s, fmt.Errorf("--time-range %q: want FROM~TO (a timestamp such as 3621.492467, or a time since the start such as 150ms; either may be left out)", text)
	}
	var err error
	if s.from, s.fromRel, err = parseTimePoint(from); err != nil {
		return s, fmt.Errorf("--time-range: %v", err)
	}
	if s.to, s.toRel, err = parseTimePoint(to); err != nil {
		return s, fmt.Errorf("--time-range: %v", err)
	}
	s.given = true
	return s, nil
}

// parseTimePoint reads one end of --time-range: ns, and whether it is
// since the start.
func parseTimePoint(p string) (int64, bool, error) {
	p = strings.TrimSpace(p)
	switch {
	case p == "":
		return 0, false, nil
	case strings.IndexFunc(p, func(r rune) bool { return r >= 'a' && r <= 'z' }) >= 0:
		d, err := time.ParseDuration(p)
		if err != nil || d < 0 {
			return 0, false, fmt.Errorf("bad duration %q (want e.g. 150ms, 2s)", p)
		}
		return int64(d), true, nil
	}
	sec, frac, _ := strings.Cut(p, ".")
	s, err1 := strconv.ParseInt(sec, 10, 64)
	ns := int64(0)
	var err2 error
	if frac != "" {
		if len(frac) > 9 {
			frac = frac[:9]
		}
		ns, err2 = strconv.ParseInt(frac+strings.Repeat("0", 9-len(frac)), 10, 64)
	}
	if err1 != nil || err2 != nil || s < 0 {
		return 0, false, fmt.Errorf("bad timestamp %q (want seconds as the trace prints them, e.g. 3621.492467)", p)
	}
	return s*1e9 + ns, false, nil
}
