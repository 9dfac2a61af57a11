//go:build !probetest

// Package fault is where test binaries (built with -tags probetest)
// make probe fail on purpose, at named points: a panic in the ptrace
// thread, or probe's own death by SIGKILL (fault_probetest.go). In the
// shipping binary every point is nothing.
package fault

// Point is fault point where; nothing happens here.
func Point(where string) {}

// Armed reports whether the test binary's fault is at where; never.
func Armed(where string) bool { return false }
