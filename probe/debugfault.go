package probe

import (
	"fmt"
	"os"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/probedbg/probe/tracee"
)

// debugFaults (PROBE_DEBUG_FAULTS set) has a fault the program is about
// to take described on standard error: where the thread was, what it
// touched, whether in code of ours, and the words at its sp. For
// finding what a rare crash under tracing was; nothing else changes.
var debugFaults = os.Getenv("PROBE_DEBUG_FAULTS") != ""

func (t *Tracer) describeFault(tid, sig int) {
	var regs unix.PtraceRegs
	if t.proc.GetRegs(tid, &regs) != nil {
		return
	}
	info, err := t.proc.Siginfo(tid)
	if err != nil {
		return
	}
	// si_addr follows si_signo, si_errno, si_code and padding.
	addr := *(*uint64)(unsafe.Add(unsafe.Pointer(&info), 16))
	where := ""
	switch {
	case t.inRecordCode(regs.PC()):
		where = " (in record code)"
	case t.jumps.detours[regs.PC()] != nil || t.jumps.inDetour(regs.PC()):
		where = " (in a detour)"
	}
	fmt.Fprintf(os.Stderr, "probe: debug: thread %d: signal %d (code %d) at %s%s, address %#x, sp %#x\n",
		tid, sig, info.Code, t.space.Describe(regs.PC()), where, addr, tracee.SP(&regs))
	for i := range 8 {
		if w, ok := t.readWord(tracee.SP(&regs) + uint64(8*i)); ok {
			fmt.Fprintf(os.Stderr, "probe: debug:   [sp+%#x] %#x %s\n", 8*i, w, t.space.Describe(w))
		}
	}
}

// inDetour reports whether rip is inside some detour's code.
func (j *jumpState) inDetour(rip uint64) bool {
	for _, o := range j.detours {
		if rip >= o.base && rip < o.copies+uint64(o.detour.Size()) {
			return true
		}
	}
	return false
}
