package probe

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"github.com/probedbg/probe/fetch"
	"github.com/probedbg/probe/sysnum"
	"github.com/probedbg/probe/tracee"
)

// Syscall probes (p:sys_NAME, r:sys_NAME) fire at the syscall-enter and
// syscall-exit stops of PTRACE_SYSCALL, as the kernel's syscalls:sys_enter_*
// and sys_exit_* tracepoints do. They cost every thread two stops per
// system call, so threads run under PTRACE_SYSCALL only while some
// syscall probe is enabled.

// syscallLoc returns the system call a spec names when its location is
// sys_NAME and the process has no symbol of that name (a symbol wins, as
// it would for any other location).
func (t *Tracer) syscallLoc(s *fetch.Spec) (name string, nr int, ok bool, err error) {
	l := s.Loc
	name, isSys := strings.CutPrefix(l.Symbol, "sys_")
	if !isSys || l.Module != "" || l.Offset != 0 || l.HasLine || l.HasFileOff || l.File != "" {
		return "", 0, false, nil
	}
	if _, _, err := t.space.Lookup(l.Symbol); err == nil {
		return "", 0, false, nil
	}
	nr, ok = sysnum.Number(name)
	if !ok {
		return "", 0, false, badInput(fmt.Errorf("%s: no such symbol or system call (closest system calls: %s)", l.Symbol, strings.Join(closestSyscalls(name, 3), ", ")))
	}
	return name, nr, true, nil
}

// installSyscall adds a probe on system call nr.
func (t *Tracer) installSyscall(s *fetch.Spec, name string, nr int, h Handler) (*Probe, error) {
	where := "sys_" + name
	p := &Probe{Spec: s, Group: s.Group, Event: s.Event, Kind: s.Kind, Where: where, funcName: where, handler: h, syscall: nr, hits: new(atomic.Uint64)}
	if s.Kind == fetch.KindOverride {
		o := *s.Override
		raw, err := syscallResult(&o)
		if err != nil {
			return nil, badInput(fmt.Errorf("%s: %w", where, err))
		}
		p.override = newOverrideState(&o, s.Event)
		p.override.raw = raw
	}
	if len(s.Args) > 0 || s.Kind == fetch.KindOverride {
		args, err := fetch.Compile(s.Args, fetch.CompileEnv{Return: s.Kind == fetch.KindReturn, Syscall: true, ResolveSymbol: t.resolveData})
		if err != nil {
			return nil, err
		}
		p.args = args
	}
	if t.sysProbes == nil {
		t.sysProbes = map[sysKey][]*Probe{}
	}
	key := sysKey{nr, s.Kind == fetch.KindReturn}
	t.sysProbes[key] = append(t.sysProbes[key], p)
	p.enabled.Store(true)
	p.onEnable = t.syscallProbeToggled
	t.probes[s.Group+"/"+s.Event] = p
	t.updateSyscallStops()
	return p, nil
}

// sysKey is a system call's entry (exit=false) or exit.
type sysKey struct {
	nr   int
	exit bool
}

func (t *Tracer) uninstallSyscall(p *Probe) {
	key := sysKey{p.syscall, p.Kind == fetch.KindReturn}
	t.sysProbes[key] = without(t.sysProbes[key], p)
	if len(t.sysProbes[key]) == 0 {
		delete(t.sysProbes, key)
	}
	t.updateSyscallStops()
}

// updateSyscallStops puts threads under PTRACE_SYSCALL while some
// syscall probe is enabled, and takes them out when none is.
func (t *Tracer) updateSyscallStops() {
	on := t.writeSync != nil || t.tracingSyscalls()
	for _, ps := range t.sysProbes {
		for _, p := range ps {
			on = on || p.enabled.Load()
		}
	}
	t.proc.SetSyscallStops(on)
}

// syscallProbeToggled runs when a syscall probe is enabled or disabled
// (from any goroutine, handlers included): the ptrace thread re-decides.
func (t *Tracer) syscallProbeToggled() {
	go t.do(func(int) error {
		t.updateSyscallStops()
		return nil
	})
}

// onSyscall serves a syscall-enter or syscall-exit stop.
func (t *Tracer) onSyscall(tid int) {
	regs := &t.stop.regs
	entry, err := t.proc.SyscallEntry(tid)
	if err != nil || t.proc.GetRegs(tid, regs) != nil {
		t.proc.Cont(tid, 0)
		return
	}
	if entry && t.linker != nil && t.linker.unloading[tid] {
		t.onUnloadingSyscall(regs)
	}
	nr := int(tracee.SyscallNr(regs))
	if entry {
		t.syncWrite(tid, regs, nr)
	}
	if t.tracingSyscalls() {
		t.traceSyscall(tid, regs, nr, entry)
	}
	if !entry {
		if skipped := t.settleSkipped(tid, regs); skipped >= 0 {
			nr = skipped // (before the exit's probes: they see the result given)
		}
	}
	probes := t.sysProbes[sysKey{nr, !entry}]
	if len(probes) == 0 || t.inRecordCode(regs.PC()) {
		// (A record stub's process_vm_readv is ours, not the
		// program's.)
		t.proc.Cont(tid, 0)
		return
	}
	hit := t.newHit(tid, regs)
	for _, p := range probes {
		if !p.enabled.Load() || p.override != nil {
			continue
		}
		p.hits.Add(1)
		if t.fetch(p, hit) && p.handler.Pre != nil {
			hit.Probe = p
			hit.Where = p.Where
			if !entry {
				// Where the system call returns to, as a return
				// probe's caller.
				hit.Return = &Return{Func: p.funcName, Caller: regs.PC()}
				hit.Where = t.returnWhere(regs.PC(), p.funcName)
			}
			p.handler.Pre(hit)
		}
	}
	if entry {
		t.overrideSyscall(tid, regs, probes, hit)
	}
	t.proc.Cont(tid, 0)
}

func (t *Tracer) resolveData(name string) (uint64, error) {
	m, sym, err := t.space.Lookup(name)
	if err != nil {
		return 0, err
	}
	return sym.Addr + m.Bias, nil
}

// closestSyscalls returns the n system call names nearest to name.
func closestSyscalls(name string, n int) []string {
	all := sysnum.Names()
	sort.SliceStable(all, func(i, j int) bool { return editDistance(name, all[i]) < editDistance(name, all[j]) })
	return all[:min(n, len(all))]
}

func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}

// writeSync is SyncWrites': the file descriptors whose writes wait for
// the trace, and what flushes it.
type writeSync struct {
	fds   []int
	flush func()
}

// writeSyscalls are the system calls that write to their first
// argument, a descriptor.
var writeSyscalls = func() map[int]bool {
	m := map[int]bool{}
	for _, name := range []string{"write", "writev", "pwrite64", "pwritev", "pwritev2"} {
		if nr, ok := sysnum.Number(name); ok {
			m[nr] = true
		}
	}
	return m
}()

// SyncWrites keeps the trace in order with what the program writes to
// fds (its terminal, when the trace goes there too): before each such
// write, what the threads recorded until then is handed on and flush
// runs, which writes out the trace so far. The threads then stop at
// every system call (PTRACE_SYSCALL), as under ltrace or strace, a few
// microseconds each; nil fds ends it.
func (t *Tracer) SyncWrites(fds []int, flush func()) error {
	return t.do(func(int) error {
		t.writeSync = nil
		if len(fds) > 0 {
			t.writeSync = &writeSync{fds: fds, flush: flush}
		}
		t.updateSyscallStops()
		return nil
	})
}

// syncWrite hands on the trace before thread tid's write, stopped at
// its entry with regs, if it writes where SyncWrites says.
func (t *Tracer) syncWrite(tid int, regs *unix.PtraceRegs, nr int) {
	ws := t.writeSync
	if ws == nil || !writeSyscalls[nr] || !slices.Contains(ws.fds, int(int32(tracee.SyscallArg(regs, 0)))) {
		return
	}
	if t.inproc != nil {
		t.drainUntil(tid, t.inproc.clock.Stamp()) // (the loop holds the handlers' lock)
	}
	ws.flush()
}
