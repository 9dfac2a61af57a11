package probe

import (
	"golang.org/x/sys/unix"

	"github.com/probedbg/probe/fetch"
	"github.com/probedbg/probe/symbols"
	"github.com/probedbg/probe/sysnum"
	"github.com/probedbg/probe/tracee"
)

// The threads' system calls among the function tracer's calls, as
// ltrace -S shows them (FuncTraceOptions.Syscalls): an entry at each
// syscall-enter stop and a return at its exit, of a function SYS_NAME,
// its arguments typed as the table of system calls or the C library's
// function of that name in the table of prototypes has them
// (fetch/protos.go: write's fd, buffer and count, open's flags by name,
// newfstatat's), "?" where neither has it; the result as
// the kernel gives it, a failure (-4095..-1) as -1 and its errno. The
// threads stop at every system call, as under ltrace and strace.

// sysCalls is the system calls' state: their arguments, compiled when
// first met, and the call each thread is in.
type sysCalls struct {
	args map[int]*funcArgs
	in   map[int]sysCallIn
}

type sysCallIn struct {
	name string
	at   int64 // when it was entered
}

// tracingSyscalls reports whether the function tracer shows system calls.
func (t *Tracer) tracingSyscalls() bool { return t.ft != nil && t.ft.opts.Syscalls && t.ft.opts.Args }

// syscallArgs is what system call nr shows of its arguments.
func syscallArgs(nr int) *funcArgs {
	fa := &funcArgs{vars: map[string]*symbols.Var{}, varFormat: -1}
	sig, ok := fetch.SyscallPrototype(sysnum.Name(nr))
	usable := ok && len(sig.Params) <= 6
	for _, p := range sig.Params {
		usable = usable && (p.Class == symbols.ClassInt || p.Class == symbols.ClassPointer)
	}
	var specs []string
	if usable {
		places, _ := placeParams(sig.Params, symbols.ABIValue{})
		for i, p := range sig.Params {
			name := fetch.FieldName(p.Name)
			if name == "" {
				name = "arg" + string(rune('1'+i))
			}
			fa.slots = append(fa.slots, argSlot{name: name, i: len(specs), enum: p.Enum, format: p.Format})
			specs = append(specs, name+"="+places[i].fetch) // ($argN: the system call's)
		}
	} else {
		fa.slots = []argSlot{{name: "args", i: -1, text: "?"}}
	}
	var err error
	if fa.params, err = fetch.Compile(specs, fetch.CompileEnv{Syscall: true}); err != nil {
		fa.slots = []argSlot{{name: "args", i: -1, text: "?"}}
		fa.params, _ = fetch.Compile(nil, fetch.CompileEnv{Syscall: true})
	}
	return fa
}

// traceSyscall reports thread tid's system call nr at its stop (entry
// or exit; regs its registers) to the function tracer.
func (t *Tracer) traceSyscall(tid int, regs *unix.PtraceRegs, nr int, entry bool) {
	if pc := regs.PC(); t.inRecordCode(pc) || t.inMailboxCode(pc) {
		return // (a record stub's process_vm_readv, the mailbox's sigaction: ours)
	}
	sc := &t.sysCalls
	if sc.in == nil {
		sc.args, sc.in = map[int]*funcArgs{}, map[int]sysCallIn{}
	}
	if !entry {
		call, ok := sc.in[tid]
		if !ok {
			return // (entered before we looked)
		}
		delete(sc.in, tid)
		hit := t.newHit(tid, regs)
		r := int64(tracee.Result(regs))
		typ := fetch.TypeS64
		if uint64(r) >= 1<<32 && r > 0 {
			typ = fetch.TypeX64 // (an address: brk's, mmap's)
		}
		fields := []fetch.Field{{Name: "retval", Value: fetch.UintValue(typ, uint64(r))}}
		if r < 0 && r >= -4095 {
			fields[0].Value = fetch.UintValue(fetch.TypeS64, ^uint64(0))
			fields = append(fields, fetch.Field{Name: "errno", Value: fetch.DwarfValue(fetch.ErrnoName(int32(-r)))})
		}
		t.ft.opts.Handler(&FuncEvent{Kind: FuncReturn, Pid: t.pid, Tid: tid, Comm: hit.Comm, CPU: hit.CPU, Time: hit.Time,
			Lane: int64(tid), Func: call.name, EntryTime: call.at, Fields: fields})
		return
	}
	fa := sc.args[nr]
	if fa == nil {
		fa = syscallArgs(nr)
		sc.args[nr] = fa
	}
	hit := t.newHit(tid, regs) // (what the thread recorded before, first)
	fa.vals = fa.params.Fetch(t.envFor(hit), fa.vals[:0])
	fa.fields = fa.show(fa.vals, fa.fields[:0])
	name := "SYS_" + sysnum.Name(nr)
	sc.in[tid] = sysCallIn{name: name, at: hit.Time}
	t.ft.opts.Handler(&FuncEvent{Kind: FuncEntry, Pid: t.pid, Tid: tid, Comm: hit.Comm, CPU: hit.CPU, Time: hit.Time,
		Lane: int64(tid), Func: name, Fields: fa.fields})
}
