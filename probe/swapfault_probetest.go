//go:build probetest

package probe

import "github.com/probedbg/probe/internal/fault"

// swapFaultArmed: PROBE_TEST_PANIC=swapped:N steps the thread of the Nth
// hooked call through its return-hook detour's swap and panics there, so
// that the emergency detach finds a thread past the swap, its return
// address already the trampoline (internal/fault).
var swapFaultArmed = fault.Armed("swapped")
