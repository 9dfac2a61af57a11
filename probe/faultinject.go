//go:build !probetest

package probe

// faultPoint is where tests built with -tags probetest inject a panic
// (faultinject_probetest.go); in the shipping binary it is nothing.
func faultPoint(where string) {}
