//go:build probetest

package probe

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
)

// PROBE_TEST_PANIC=WHERE:N panics at the Nth time the ptrace thread passes
// fault point WHERE ("entry": before a probe's handler, "return": before a
// return probe's handler), to prove that a bug of ours in a handler still
// ends in a clean detach. Only binaries built with -tags probetest have it.
var injected = func() (where string, at int64) {
	w, n, ok := strings.Cut(os.Getenv("PROBE_TEST_PANIC"), ":")
	at, err := strconv.ParseInt(n, 10, 64)
	if !ok || err != nil || at <= 0 {
		return "", 0
	}
	return w, at
}

var (
	faultWhere, faultAt = injected()
	faultSeen           atomic.Int64
)

func faultPoint(where string) {
	if where == faultWhere && faultSeen.Add(1) == faultAt {
		panic(fmt.Sprintf("fault injected at %s %d", where, faultAt))
	}
}
