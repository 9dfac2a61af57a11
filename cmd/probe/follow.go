package main

import (
	"fmt"
	"os"

	"github.com/probedbg/probe/probe"
)

// setupFollow applies -f and sends the tracer's notes (probes dropped at
// an exec, specs a new program lacks) to stderr.
func setupFollow(t *probe.Tracer, o *options) error {
	if err := t.SetNotify(func(msg string) { fmt.Fprintf(os.Stderr, "probe: %s\n", msg) }); err != nil {
		return err
	}
	return t.SetFollow(o.follow)
}
