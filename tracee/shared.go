package tracee

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// MapShared maps size bytes of memory shared by the tracee and us,
// read-write on both sides, as close to near as a free gap allows (near
// 0: where the kernel places the program's own mappings): a
// memfd the stopped thread tid creates, which we take with pidfd_getfd
// (Linux 5.6; we are its tracer, which is the permission it asks) and
// which the tracee then maps and closes. It returns the tracee's address
// and our mapping. Nothing is left behind on failure. The tracee's mapping
// is never removed, as MapExecutable's: code that uses it may still run.
// A forked child shares it.
func (p *Process) MapShared(tid int, near, size uint64) (addr uint64, mem []byte, err error) {
	return p.MapSharedNamed(tid, "probe", near, size)
}

// MapSharedNamed is MapShared with the memory file named name (at most 15
// bytes), as the tracee's /proc/PID/maps shows it: "/memfd:NAME (deleted)".
func (p *Process) MapSharedNamed(tid int, name string, near, size uint64) (addr uint64, mem []byte, err error) {
	return p.mapShared(tid, name, size, false, func(theirs uint64) (uint64, error) {
		if near != 0 {
			return p.mapNear(tid, near, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED, theirs, nil)
		}
		// Anywhere: where the kernel puts the program's own mappings,
		// high, out of the way of addresses a program may hold unmapped.
		addr, err := p.InjectSyscall(tid, unix.SYS_MMAP, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED, theirs, 0)
		if err == nil {
			err = syscallErr(addr)
		}
		return addr, err
	})
}

// MapSharedAt is MapShared at addr, over what the tracee has there: a
// fork child's own memory where its copy of its parent's shared mapping
// was. Once the tracee's mapping is made it stays, even on an error.
func (p *Process) MapSharedAt(tid int, addr, size uint64) (mem []byte, err error) {
	_, mem, err = p.mapShared(tid, "probe", size, true, func(theirs uint64) (uint64, error) {
		got, err := p.InjectSyscall(tid, unix.SYS_MMAP, addr, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_FIXED, theirs, 0)
		if err == nil {
			err = syscallErr(got)
		}
		if err == nil && got != addr {
			err = fmt.Errorf("mmap at %#x gave %#x", addr, got)
		}
		return got, err
	})
	return mem, err
}

// mapShared makes a memory file of size bytes in the tracee, which place
// maps there (given its descriptor there), and maps it here too; fixed:
// place mapped it over something, and its mapping stays whatever fails.
func (p *Process) mapShared(tid int, name string, size uint64, fixed bool, place func(theirs uint64) (uint64, error)) (addr uint64, mem []byte, err error) {
	if len(name) > 15 {
		return 0, nil, fmt.Errorf("memory file name %q: longer than 15 bytes", name)
	}
	var regs unix.PtraceRegs
	if err := p.GetRegs(tid, &regs); err != nil {
		return 0, nil, err
	}
	// memfd_create wants a name in the tracee's memory: put one on its
	// stack, well below anything live, and the old bytes back after.
	at := (SP(&regs) - 1024) &^ 7
	var old, text [16]byte
	copy(text[:], name)
	if _, err := p.ReadAt(old[:], int64(at)); err != nil {
		return 0, nil, err
	}
	if _, err := p.WriteAt(text[:], int64(at)); err != nil {
		return 0, nil, err
	}
	ret, err := p.InjectSyscall(tid, unix.SYS_MEMFD_CREATE, at, unix.MFD_CLOEXEC)
	p.WriteAt(old[:], int64(at))
	if err == nil {
		err = syscallErr(ret)
	}
	if err != nil {
		return 0, nil, fmt.Errorf("memfd_create in pid %d: %w", p.Pid, err)
	}
	theirs := ret
	defer p.InjectSyscall(tid, unix.SYS_CLOSE, theirs)
	ours, err := p.takeFd(int(theirs))
	if err != nil {
		return 0, nil, err
	}
	defer unix.Close(ours)
	if err := unix.Ftruncate(ours, int64(size)); err != nil {
		return 0, nil, err
	}
	if addr, err = place(theirs); err != nil {
		return 0, nil, err
	}
	p.DontDump(tid, addr, size)
	mem, err = unix.Mmap(ours, 0, int(size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		if !fixed {
			p.InjectSyscall(tid, unix.SYS_MUNMAP, addr, size)
		}
		return 0, nil, err
	}
	return addr, mem, nil
}

// takeFd duplicates the tracee's descriptor fd into our process.
func (p *Process) takeFd(fd int) (int, error) {
	pidfd, err := unix.PidfdOpen(p.Pid, 0)
	if err != nil {
		return -1, os.NewSyscallError("pidfd_open", err)
	}
	defer unix.Close(pidfd)
	ours, err := unix.PidfdGetfd(pidfd, fd, 0)
	if err != nil {
		return -1, os.NewSyscallError("pidfd_getfd", err)
	}
	return ours, nil
}

// SamePidNamespace reports whether the tracee sees the thread ids we see.
func (p *Process) SamePidNamespace() bool {
	ours, err1 := os.Readlink("/proc/self/ns/pid")
	theirs, err2 := os.Readlink(fmt.Sprintf("/proc/%d/ns/pid", p.Pid))
	return err1 == nil && err2 == nil && ours == theirs
}

// Seccomp reports whether some thread runs under a seccomp filter or
// strict mode, where a system call of ours in its code might be refused
// or kill it.
func (p *Process) Seccomp() bool {
	for tid := range p.threads {
		if v, ok := statusField(fmt.Sprintf("/proc/%d/task/%d/status", p.Pid, tid), "Seccomp"); !ok || v != "0" {
			return true
		}
	}
	return false
}

// Prefault has the tracee's pages at the addresses given mapped, as its
// own first touch of each would, so that its threads' first writes there
// do not fault: process_vm_readv reads a byte of each, and the kernel
// faults the page in for the tracee to read it (a page of shared memory
// the tracee may write is mapped writable). It needs no stop and may run
// on any thread of ours, at any time; the bytes are only read. What it
// cannot read is left as it was.
func (p *Process) Prefault(pages []uint64) error {
	var (
		buf    [1024]byte
		remote [len(buf)]unix.RemoteIovec
	)
	for len(pages) > 0 {
		k := min(len(pages), len(remote))
		for i, addr := range pages[:k] {
			remote[i] = unix.RemoteIovec{Base: uintptr(addr), Len: 1}
		}
		// (A read stops at the first page it cannot read.)
		if _, err := unix.ProcessVMReadv(p.Pid, []unix.Iovec{{Base: &buf[0], Len: uint64(k)}}, remote[:k], 0); err != nil {
			return fmt.Errorf("prefault %#x in pid %d: %w", pages[0], p.Pid, err)
		}
		pages = pages[k:]
	}
	return nil
}
