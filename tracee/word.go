package tracee

import (
	"encoding/binary"
	"unsafe"

	"golang.org/x/sys/unix"
)

// ReadWord reads the 8 bytes at addr. Through a thread in a ptrace-stop it
// is one PTRACE_PEEKDATA, cheaper than a read of /proc/PID/mem (which
// allocates a bounce page per call); the hot path reads a return address
// per traced call.
func (p *Process) ReadWord(addr uint64) (uint64, error) {
	if tid, ok := p.peekThread(); ok {
		var w uint64
		if ptracePtr(unix.PTRACE_PEEKDATA, tid, uintptr(addr), unsafe.Pointer(&w)) == nil {
			return w, nil
		}
	}
	var b [8]byte
	if _, err := p.ReadAt(b[:], int64(addr)); err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint64(b[:]), nil
}

// WriteWord writes the 8 bytes at addr, as ReadWord reads them.
func (p *Process) WriteWord(addr, v uint64) error {
	if tid, ok := p.peekThread(); ok {
		if ptrace(unix.PTRACE_POKEDATA, tid, uintptr(addr), uintptr(v)) == nil {
			return nil
		}
	}
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], v)
	_, err := p.WriteAt(b[:], int64(addr))
	return err
}

// peekThread returns a thread through which PEEK/POKE requests may go: the
// last one reported stopped, if it still is (a thread parked with LISTEN is
// not in a ptrace-stop).
func (p *Process) peekThread() (int, bool) {
	t := p.threads[p.lastStop]
	return p.lastStop, t != nil && t.Stopped && !t.GroupStopped
}
