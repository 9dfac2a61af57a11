package tracee

import (
	"encoding/binary"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Rewinding (x86-64): an int3 leaves a thread on the instruction after
// it, and a stop we have taken (wait4 clears the signal it was for) lets
// the thread go on from there with no signal if we die before we resume
// it. Over an instruction of several bytes that is another breakpoint of
// ours (the rescue's padding), but over a one-byte instruction it is the
// next instruction: the thread would run on with the probed one skipped
// (a `ret` left out computes wrong, it does not even crash). So where
// Process.Rewind says a trap's pc is one past such a breakpoint, the
// thread is put back on the breakpoint before its stop is taken: the
// stop is looked at first with WNOWAIT, which leaves the signal in
// place, so that at every moment either the kernel still holds the
// SIGTRAP for it or it is on the int3 and traps again. Its registers
// read as if it were not rewound (pc one past the int3) until they are
// written or it runs.

// waitid's si_code for a ptrace stop, and its flags.
const (
	cldTrapped = 4
	waitidOpts = unix.WEXITED | unix.WSTOPPED | unix.WNOWAIT | unix.WALL | unix.WNOTHREAD
)

// takeRewinding takes the next wait status of pid (-1: any of ours),
// sleeping for it if block, after rewinding a thread it finds on a
// breakpoint Rewind names; tid 0 when there is none yet.
func (p *Process) takeRewinding(pid int, block bool) (tid int, ws unix.WaitStatus, err error) {
	var info [128]byte // siginfo_t: si_code at 8, si_pid at 16, si_status at 24
	idtype, id := unix.P_PID, pid
	if pid < 0 {
		idtype, id = unix.P_ALL, 0
	}
	opts := waitidOpts
	if !block {
		opts |= unix.WNOHANG
	}
	for {
		var e unix.Errno
		if block {
			_, _, e = unix.Syscall6(unix.SYS_WAITID, uintptr(idtype), uintptr(id), uintptr(unsafe.Pointer(&info)), uintptr(opts), 0, 0)
		} else {
			_, _, e = unix.RawSyscall6(unix.SYS_WAITID, uintptr(idtype), uintptr(id), uintptr(unsafe.Pointer(&info)), uintptr(opts), 0, 0)
		}
		if e == unix.EINTR {
			continue
		}
		if e != 0 {
			return 0, 0, e
		}
		break
	}
	tid = int(int32(binary.LittleEndian.Uint32(info[16:])))
	if tid == 0 {
		return 0, 0, nil
	}
	code, status := int32(binary.LittleEndian.Uint32(info[8:])), int32(binary.LittleEndian.Uint32(info[24:]))
	if code == cldTrapped && status == int32(unix.SIGTRAP) {
		p.rewind(tid)
	}
	for {
		got, err := unix.Wait4(tid, &ws, unix.WALL|unix.WNOTHREAD|unix.WNOHANG, nil)
		if err == unix.EINTR {
			continue
		}
		if err != nil || got != tid {
			return 0, ws, err
		}
		return tid, ws, nil
	}
}

// takeOne takes the next wait status of pid, through takeRewinding when
// there is something to rewind, else with one wait4.
func (p *Process) takeOne(pid int, block bool) (int, unix.WaitStatus, error) {
	if p.Rewind != nil {
		return p.takeRewinding(pid, block)
	}
	var ws unix.WaitStatus
	var tid int
	var err error
	switch {
	case pid < 0 && !block:
		tid, err = wait4Now(&ws)
	case pid < 0:
		tid, err = waitSleeping(&ws)
	default:
		options := unix.WALL | unix.WNOTHREAD
		if !block {
			options |= unix.WNOHANG
		}
		tid, err = unix.Wait4(pid, &ws, options, nil)
	}
	return tid, ws, err
}

// presented is regs as the thread's stop shows them: one past the
// breakpoint it was rewound onto.
func (t *Thread) presented(regs *unix.PtraceRegs) {
	if t != nil && t.rewound {
		regs.SetPC(regs.PC() + 1)
	}
}
