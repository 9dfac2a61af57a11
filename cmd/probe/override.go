package main

import (
	"fmt"

	"github.com/probedbg/probe/fetch"
)

// failOptions are --fail-every, --fail-probability, --fail-times and
// --fail-seed: which calls o: probes make fail, as the kernel's
// fault_attr (interval, probability, times) chooses.
type failOptions struct {
	every       uint64
	probability float64
	times       int64
	seed        uint64
}

var failFlags = []string{"fail-every", "fail-probability", "fail-times", "fail-seed"}

func (o *options) failAttr() (fetch.FailAttr, error) {
	a := fetch.FailAttr{Interval: o.fail.every, Probability: o.fail.probability, Times: o.fail.times, Seed: o.fail.seed}
	return a, a.Check()
}

// applyFail gives the o: probes among defs the --fail-* settings; a
// setting with no o: probe to apply to is a mistake, except in the REPL,
// whose probes come later.
func applyFail(o *options, defs []*probeDef, later bool) error {
	a, err := o.failAttr()
	if err != nil {
		return err
	}
	overrides := 0
	for _, d := range defs {
		if d.Spec.Override != nil {
			d.Spec.Override.Fail = a
			overrides++
		}
	}
	if overrides == 0 && !later {
		for _, f := range failFlags {
			if o.set[f] {
				return fmt.Errorf("--%s: no o: probe to apply it to", f)
			}
		}
	}
	return nil
}
