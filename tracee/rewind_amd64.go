package tracee

import (
	"encoding/binary"
	"unsafe"

	"golang.org/x/sys/unix"
)

// ripOffset is rip's place in the user area (struct user_regs_struct).
var ripOffset = unsafe.Offsetof(unix.PtraceRegs{}.Rip)

// rewind puts thread tid, stopped for a SIGTRAP we have not yet taken,
// back on the breakpoint it trapped on if Rewind names its pc. A thread
// we stepped is left alone: its SIGTRAP is the step's.
func (p *Process) rewind(tid int) {
	t := p.threads[tid]
	if t == nil || t.Forked || t.stepped || t.rewound {
		return
	}
	var b [8]byte
	if _, err := unix.PtracePeekUser(tid, ripOffset, b[:]); err != nil {
		return
	}
	pc := binary.LittleEndian.Uint64(b[:])
	if !p.Rewind(pc) {
		return
	}
	binary.LittleEndian.PutUint64(b[:], pc-1)
	if _, err := unix.PtracePokeUser(tid, ripOffset, b[:]); err == nil {
		t.rewound = true
	}
}
