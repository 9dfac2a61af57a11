package tracee

import (
	"bytes"
	"fmt"

	"golang.org/x/sys/unix"
)

// settleStops bounds the stops settleRestart takes on the way to the
// call.
const settleStops = 8

// settleRestart lets the kernel finish restarting the system call that
// stopped thread tid was interrupted in, before we put registers of ours
// in it. arm64's do_signal rewinds the call (pc back at the svc, x0 its
// first argument) before the stop, but turns a sleep's into
// restart_syscall (the rest of its time) only after it, and only if it
// finds the registers of the call it interrupted: registers put back
// after an injection restart the call from its start, a 1 s sleep a
// whole second again. So the thread is first let run into the call
// (PTRACE_SYSCALL to its entry, where x8 is restart_syscall if it was
// to be), which is skipped, its registers set back to the svc and the
// thread interrupted again: every later resume restarts the call as the
// kernel would have. Only at an interrupt, or at the stop for a SIGSTOP
// of ours, which its resume takes anyway: another signal's stop is left
// as it is, for the resume that delivers it.
func (p *Process) settleRestart(tid int) error {
	t := p.threads[tid]
	if t == nil || t.GroupStopped || t.stop != EventSignal && t.stop != EventStop {
		return nil
	}
	if t.stop == EventSignal {
		if info, err := p.Siginfo(tid); err != nil || info.Signo != int32(unix.SIGSTOP) || !SentByUs(&info) {
			return nil
		}
	}
	var regs unix.PtraceRegs
	if err := p.GetRegs(tid, &regs); err != nil {
		return err
	}
	svc := regs.PC()
	var insn [4]byte
	if _, err := p.ReadAt(insn[:], int64(svc)); err != nil || !bytes.Equal(insn[:], syscallInsn) {
		return nil
	}
	for stops := 0; ; {
		ev, err := p.toSyscallStop(tid)
		if err != nil {
			return fmt.Errorf("settle a restart: %w", err)
		}
		switch ev.Kind {
		case EventSyscall:
		case EventSignal, EventTrap:
			p.deferStopSignal(tid)
			fallthrough
		default: // a group-stop or an interrupt, before the call
			// Real-time signals queue: a thread sent them faster than
			// it stops for each (TCG) may never reach its call. After
			// a few stops it is left at this one, and the restart to
			// the kernel, as without settling (a sleep may then
			// restart whole).
			if stops++; stops == settleStops {
				return nil
			}
			continue
		}
		if err := p.GetRegs(tid, &regs); err != nil {
			return err
		}
		if regs.PC() != svc+4 {
			return fmt.Errorf("settle a restart: thread %d entered a system call at %#x, not at %#x", tid, regs.PC()-4, svc)
		}
		entry := regs
		if err := p.SkipSyscall(tid, &regs); err != nil {
			return err
		}
		if ev, err := p.toSyscallStop(tid); err != nil || ev.Kind != EventSyscall {
			return fmt.Errorf("settle a restart: thread %d, skipping its call: %+v, %v", tid, ev, err)
		}
		entry.Pc = svc
		if err := p.SetRegs(tid, &entry); err != nil {
			return err
		}
		return p.interruptAgain(tid)
	}
}
