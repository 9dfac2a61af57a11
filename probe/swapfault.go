//go:build !probetest

package probe

// swapFaultArmed is true only in test binaries (swapfault_probetest.go).
const swapFaultArmed = false
