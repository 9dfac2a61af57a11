package probe

import (
	"encoding/binary"
	"errors"
	"fmt"

	"golang.org/x/sys/unix"

	"github.com/probedbg/probe/fetch"
	"github.com/probedbg/probe/symbols"
)

// errno is a thread-local variable of the C library: each thread's is at
// its thread pointer plus an offset that the dynamic linker wrote into the
// library's GOT (symbols.TLSSlot), the same for every thread of the
// process; in a static program, at the offset the TLS ABI gives the
// program's own block (symbols.ExecTLSOffset). glibc has it so; a C
// library that keeps errno elsewhere (musl: in its thread structure) has
// no errno probe can find.

// errnoPlace is the offset found for one address space.
type errnoPlace struct {
	space *symbols.Space
	off   uint64 // added to the thread pointer
	err   error
}

// errnoAddr is the address of stopped thread tid's errno (regs: its
// registers).
func (t *Tracer) errnoAddr(tid int, regs *unix.PtraceRegs) (uint64, error) {
	off, err := t.errnoOffset()
	if err != nil {
		return 0, err
	}
	tp, err := t.proc.ThreadPointer(tid, regs)
	if err != nil {
		return 0, fmt.Errorf("thread %d's thread pointer: %w", tid, err)
	}
	if tp == 0 {
		return 0, fmt.Errorf("thread %d has no thread pointer yet", tid)
	}
	return tp + off, nil
}

var errNoErrno = errors.New("no C library with a thread-local errno (glibc's libc.so.6) is loaded")

// errnoOffset is errno's offset from the thread pointer in the address
// space the process has now, found once for it.
func (t *Tracer) errnoOffset() (uint64, error) {
	if t.inject.errno.space != t.space {
		t.inject.errno = errnoPlace{space: t.space}
		t.inject.errno.off, t.inject.errno.err = t.findErrnoOffset()
	}
	return t.inject.errno.off, t.inject.errno.err
}

// findErrnoOffset reads errno's offset from the thread pointer out of the
// GOT of the module that defines it.
func (t *Tracer) findErrnoOffset() (uint64, error) {
	for _, m := range t.space.Mapped {
		slot, ok := m.TLSSlot("errno")
		if !ok {
			continue
		}
		var b [8]byte
		if _, err := t.proc.ReadAt(b[:], int64(slot+m.Bias)); err != nil {
			return 0, fmt.Errorf("read errno's GOT slot in %s: %w", m.Name, err)
		}
		return binary.LittleEndian.Uint64(b[:]), nil
	}
	if main := t.space.Main(); main != nil {
		if off, ok := main.ExecTLSOffset("errno"); ok {
			return uint64(off), nil // a static program's own errno
		}
	}
	return 0, errNoErrno
}

// setErrno writes value into stopped thread tid's errno.
func (t *Tracer) setErrno(tid int, regs *unix.PtraceRegs, value int32) error {
	addr, err := t.errnoAddr(tid, regs)
	if err != nil {
		return err
	}
	var b [4]byte
	binary.LittleEndian.PutUint32(b[:], uint32(value))
	if _, err := t.proc.WriteAt(b[:], int64(addr)); err != nil {
		return fmt.Errorf("write thread %d's errno at %#x: %w", tid, addr, err)
	}
	return nil
}

// readErrno reads stopped thread tid's errno.
func (t *Tracer) readErrno(tid int, regs *unix.PtraceRegs) (int32, error) {
	addr, err := t.errnoAddr(tid, regs)
	if err != nil {
		return 0, err
	}
	var b [4]byte
	if _, err := t.proc.ReadAt(b[:], int64(addr)); err != nil {
		return 0, fmt.Errorf("read thread %d's errno at %#x: %w", tid, addr, err)
	}
	return int32(binary.LittleEndian.Uint32(b[:])), nil
}

// replaying reports whether hit is a record the tracee made, replayed:
// no thread is stopped for it.
func (t *Tracer) replaying(hit *Hit) bool {
	in := t.inproc
	return in != nil && hit.Mem == fetch.Memory(&in.stack)
}

// hitErrno is errno as the thread at hit has it: at a stop, read from
// the thread; for a return the tracee recorded, what the trampoline
// recorded with it.
func (t *Tracer) hitErrno(hit *Hit) (int32, bool) {
	if t.replaying(hit) {
		return t.inproc.errno, t.inproc.errnoOff != 0
	}
	e, err := t.readErrno(hit.Tid, hit.regs)
	return e, err == nil
}
