//go:build probetest

package fault

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// PROBE_TEST_PANIC=WHERE:N panics at the Nth time the ptrace thread
// passes fault point WHERE ("entry": before a probe's handler, "return":
// before a return probe's handler), to prove that a bug of ours in a
// handler still ends in a clean detach. PROBE_TEST_KILL=WHERE:N kills
// probe with SIGKILL there instead ("guarded-syscall": a thread set up
// to run an injected system call at the rescue's stub, not yet run;
// "guarded-syscall-ran": the call run, the thread's registers not yet
// back), to prove that the tracee outlives probe's death at that moment.
var (
	panicWhere, panicAt = armed("PROBE_TEST_PANIC")
	killWhere, killAt   = armed("PROBE_TEST_KILL")
	panicSeen, killSeen atomic.Int64
)

func armed(env string) (where string, at int64) {
	w, n, ok := strings.Cut(os.Getenv(env), ":")
	at, err := strconv.ParseInt(n, 10, 64)
	if !ok || err != nil || at <= 0 {
		return "", 0
	}
	return w, at
}

// Point panics or dies if the test asked for it at this pass of where.
func Point(where string) {
	if where == panicWhere && panicSeen.Add(1) == panicAt {
		panic(fmt.Sprintf("fault injected at %s %d", where, panicAt))
	}
	if where == killWhere && killSeen.Add(1) == killAt {
		unix.Kill(os.Getpid(), unix.SIGKILL)
		select {} // (SIGKILL is not instant for the rest of the process)
	}
}

// Armed reports whether PROBE_TEST_PANIC names where.
func Armed(where string) bool { return where == panicWhere }
