package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/probedbg/probe/output"
)

// cmdReport prints a recording (probe record) as the live trace would
// have, or converts it with --format.
func cmdReport(args []string) (int, error) {
	o := options{buffer: output.DefaultBuffer}
	fs := flag.NewFlagSet("report", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&o.out, "o", "", "")
	fs.StringVar(&o.format, "format", "", "")
	var files []string
	for {
		if err := fs.Parse(args); err != nil {
			return bad("%v", err)
		}
		if args = fs.Args(); len(args) == 0 {
			break
		}
		files, args = append(files, args[0]), args[1:]
	}
	if len(files) != 1 {
		return bad("usage: probe report [--format F] [-o OUT] FILE")
	}
	in, err := os.Open(files[0])
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
	ts, err := parseTracers(&o)
	if err == nil {
		err = stackFormatSource(&o, ts, rec.Info.Probes)
	}
	if err != nil {
		return bad("%v", err)
	}
	out := os.Stdout
	if o.out != "" {
		if out, err = createOutput(o.out); err != nil {
			return failure(err)
		}
	}
	primary, all := newWriter(out, ts, &o, rec.Info.Probes)
	_, err = rec.Replay(all, primary)
	if o.out != "" {
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
