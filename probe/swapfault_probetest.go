//go:build probetest

package probe

// swapFaultArmed: PROBE_TEST_PANIC=swapped:N steps the thread of the Nth
// hooked call through its return-hook detour's swap and panics there, so
// that the emergency detach finds a thread past the swap, its return
// address already the trampoline (probe/faultinject_probetest.go).
var swapFaultArmed = faultWhere == "swapped"
