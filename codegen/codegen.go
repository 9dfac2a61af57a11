// Package codegen generates the machine code the tracer injects into a
// tracee: the detours of jump-optimised probes, the mailbox's routines
// and stubs, in-process record stubs and their routine (return hooks,
// memory reads, tallies and filters included), and the rescue SIGTRAP
// handler. Package singlestep decodes the instructions a detour covers;
// the rings the records go to are laid out by package ring.
//
//	d, err := codegen.PlanDetour(fn, fnAddr, addr, nil) // nil: no jump tables read
//	code, _ := d.Code(detour) // write code at detour, then d.Jump(detour) at addr
//
// Per-architecture code lives in files with a GOARCH suffix: x86-64 has
// every generator (*_amd64.go; its assembler is mailbox_amd64.go's asm),
// arm64 the record stubs (hooks, reads, tallies and filters included),
// their detours and the rescue handler (*_arm64.go, assembled by
// a64_arm64.go); codegen_arm64.go refuses the rest there.
package codegen

import (
	"fmt"

	"github.com/probedbg/probe/ring"
	"github.com/probedbg/probe/singlestep"
)

// The data of the mechanisms whose code the tracer generates into the
// tracee (mailbox, jump-optimised detours, in-process records, tallies,
// filters): what the tracer and the generated code share; the rescue's
// is rescue.go, the rings' package ring.

// A mailbox is a page shared by the tracer and the tracee, where a thread
// leaves its registers before it traps, so the tracer reads them from its
// own mapping instead of PTRACE_GETREGS, and answers there instead of
// PTRACE_SETREGS. Each ptrace request costs ~1.5-2.5 us on these VMs
// against ~0.2 us for a plain system call in the tracee (gettid), so a hit
// drops to the floor: the trap, one wait4, one PTRACE_CONT.
//
// A thread claims the slot of its tid (gettid, & 255) with a lock
// cmpxchg; the tracer trusts a SIGTRAP stop of thread T as a mailbox trap
// only if slot T is owned by T and names the stub it came from. A thread
// that finds its slot taken (another thread with the same low bits, or
// itself in a signal handler nested in its own claim) goes on through the
// ordinary detour (the stub's Next), whose int3 the tracer serves with
// GETREGS.
//
// The stub saves what the routine uses below the red zone, 168 bytes
// under sp: only for places where nothing of the thread's lives there
// beyond the red zone, which holds at a SysV function's entry and on the
// return trampoline (the callee's frame is gone). Never in Go code, whose
// goroutine stacks are small and whose ABI has no red zone.
//
// Before its int3 the routine also reads the thread's signal mask and the
// process's SIGTRAP action into the slot. The kernel forces an int3's
// SIGTRAP: where SIGTRAP is blocked in the thread or ignored, it resets
// the process's action to SIG_DFL and unblocks SIGTRAP in the thread. So
// a thread that has SIGTRAP blocked unblocks it just for its int3 and
// blocks it again after: no reset, and other threads never see the
// action changed. (An ignored SIGTRAP is reset all the same: the tracer
// puts SIG_IGN back, knowing from the slot that it was there.)
const (
	MailboxSlots     = 256
	mailboxSlotShift = 9
	MailboxSlotSize  = 1 << mailboxSlotShift
	MailboxSize      = MailboxSlots * MailboxSlotSize

	SlotOwner = 0   // the claiming thread's tid; 0: free
	SlotAt    = 8   // the stub the thread came from (its id), written just before the int3
	SlotReply = 16  // the tracer's answer, 0 until there is one: ReplyKeep or ReplySwap the return address (MailboxEntry), where to return (MailboxReturn)
	SlotStack = 24  // the word at the thread's sp: the return address, at an entry
	SlotRegs  = 32  // the thread's registers, laid out as unix.PtraceRegs (rip and orig_rax left out)
	SlotCPU   = 248 // the CPU the thread ran on just before the int3, as vgetcpu's segment limit has it (node << 12 | cpu); all ones if lsl could not read it
	// SlotSigMask is the thread's blocked signals (rt_sigprocmask) and
	// SlotTrapAction the SIGTRAP action (rt_sigaction's struct: handler,
	// flags, restorer, mask), both read just before the int3.
	SlotSigMask    = 256
	SlotTrapAction = 264
	slotTrapSet    = 296 // a sigset of SIGTRAP alone, for rt_sigprocmask to unblock
	slotEnd        = slotTrapSet + 8
)

// A MailboxEntry's answers.
const (
	ReplyKeep = 1
	ReplySwap = 2
)

// MailboxKind is what a thread does once the tracer lets it go from a
// mailbox trap.
type MailboxKind int

const (
	// MailboxEntry, at a function's entry: if the tracer's Reply is not
	// 0, swap the return address at sp for the trampoline; then on at the
	// stub's Done (a detour's copies).
	MailboxEntry MailboxKind = iota
	// MailboxReturn, the return trampoline: on at the address the tracer
	// put in Reply, the registers as they were.
	MailboxReturn
)

// MailboxRoutine is the code, one per mailbox and kind, that every stub of
// its kind jumps to: it claims the thread's slot, fills it, traps, and
// does what the tracer answered.
type MailboxRoutine struct {
	Kind  MailboxKind
	Box   uint64 // the mailbox's address in the tracee
	Tramp uint64 // MailboxEntry: the return trampoline, or 0 if none
}

// MailboxStub is a site's own part: it saves the registers the routine
// uses, names itself in %rdx and jumps to the routine, which comes back
// to its fallback (the slot was taken) or its done tail.
type MailboxStub struct {
	Kind    MailboxKind
	Routine uint64 // the MailboxRoutine of its kind
	Next    uint64 // where a thread whose slot is taken goes on, registers intact
	Done    uint64 // MailboxEntry: where a thread goes on after its trap
}

// RoutineLayout says where things are in a routine's code.
type RoutineLayout struct {
	Trap uint64 // its int3
	// From Unblocked up to Reblocked a thread that had SIGTRAP blocked
	// runs with it unblocked, its int3 in between.
	Unblocked, Reblocked uint64
}

// Detour is the out-of-line code of a jump-optimised probe, as the
// kernel's optprobes build it (arch/x86/kernel/kprobes/opt.c): the probe
// address holds `jmp detour`; the detour is an int3, the copies of every
// instruction the jmp covers, and a jmp back to the first instruction
// after them. A thread traps at the detour's int3 with rip already where
// it must go on, so the tracer resumes it without writing its registers.
type Detour struct {
	Addr    uint64             // the probe address
	Covered int                // bytes of original code the jmp displaces (>= JumpSize)
	Insns   []*singlestep.Insn // the instructions in [Addr, Addr+Covered)
	// ReturnHook, when set, is the address of a return trampoline, and
	// the probe is at a function's entry: the detour then loads the
	// return address into %r11 before its int3 (the tracer reads it from
	// the registers) and swaps it for the trampoline after it, so a
	// hooked call needs no memory access by the tracer. %r11 is kept in
	// the red zone meanwhile and put back before the copies (Skip): gcc's
	// IPA register allocation may keep a value in a caller-saved register
	// across a call to a function it knows leaves it alone. A tracer that
	// does not hook a call resumes it at Skip, past the swap. Never in Go
	// code: its ABI passes arguments in %r11 and has no red zone.
	ReturnHook uint64
	// LoadReturn, without ReturnHook: the detour only loads the return
	// address into %r11 for the tracer (kept and put back as above), for
	// an entry that wants to know its caller but not its return (the
	// function tracer without function_graph).
	LoadReturn bool
	// Redirects are the function's own jmps and jccs with a rel32 that
	// land on a covered instruction other than the first (gcc's loop
	// back to just past a push, from a tail call made a loop): they are
	// re-aimed at that instruction's copy in the detour, which goes on
	// as the original would, and put back when the jmp goes.
	Redirects []Redirect
}

// Redirect is a branch re-aimed into a detour: the jmp or jcc at From,
// whose bytes in the file are Orig (its rel32 their last 4), lands on
// Insns[Insn].
type Redirect struct {
	From uint64
	Insn int
	Orig []byte
}

// RecordRoutine is the code every record stub calls: given %r8 = site id
// << 32 | record length, it returns in %rsi the record's address (0: not
// recorded, and counted), in %r9 its commit stamp, with the header's
// words 1 and 2 written, and in %r10 the thread's ring (0: none, when
// the thread id cannot be read or every ring is taken). It uses %rax,
// %rcx, %rdx, %rsi, %r8, %r9, %r10 and the flags, which the stub saves.
type RecordRoutine struct {
	Layout ring.Layout
	// Trampoline is the return trampoline the hooks write (HookRoutine):
	// one for the process, whichever copy of the code a stub calls. 0:
	// this copy's own.
	Trampoline uint64
	// Errno is where the C library's errno is from the thread pointer:
	// the trampoline records it with each return (the fourth value); 0:
	// none known, the value is not errno.
	Errno int32
}

// RecordStub is a site's own code: it saves what the routine uses below
// the red zone, calls it, copies the site's values into the record,
// commits it, and goes on at Next (the detour's copies of the covered
// instructions), every register as it was. As the mailbox stub, only at a
// SysV function's entry: 208 bytes below sp must be free.
type RecordStub struct {
	Routine uint64 // a RecordRoutine's copy
	Next    uint64
	Site    uint32
	// Regs are the registers recorded, in order, as their byte offsets
	// in unix.PtraceRegs: the 16 general registers and the flags.
	Regs []int
	// StackWords are recorded after them: the words at sp, sp+8, ...
	StackWords int
	// Hook: the stub hooks the function's return (HookRoutine) after
	// copying the values, and records whether it did as one more value,
	// 1 or 0.
	Hook bool
	// Reads are memory the stub copies into the record, after the
	// rest: for each, the address, what process_vm_readv returned (the
	// bytes read, or -errno: a bad address faults nothing), and the
	// bytes, in whole words.
	Reads []MemRead
	// Rings is the rings' address (ring.Layout.Base), where the reads
	// find the process's id.
	Rings uint64
	// Tallies, if any, make the stub record nothing: it adds to its
	// thread's counters instead (tally_amd64.go), and Regs, StackWords,
	// Hook and Reads are not used.
	Tallies []Tally
	// Filter, if set, is tested first (filter_amd64.go): where it does
	// not hold, no record is made, and the thread's counter Rejected
	// (a word of ring.TallyOff) counts the hit. Not with Hook: the return
	// is hooked whatever the entry's filter says.
	Filter   *Filter
	Rejected int
	// FrameEntry: the stub runs past plain -pg's call of mcount, after a
	// prologue that made a frame record and set the frame pointer: it
	// records sp, the frame pointer (and x30) and the stack words, and
	// hooks the return, as at the entry, through the frame: on x86-64
	// the return address is at 8(%rbp), sp was %rbp+8; on arm64 it is at
	// [x29, #8] (the prologue's stp x29, x30), sp was x29 + FrameAbove;
	// FrameKey 'A' or 'B' if the function signed it first (paciasp,
	// pacibsp: that key, sp at the entry the modifier), else 0.
	FrameEntry bool
	FrameAbove uint64 // arm64
	FrameKey   byte   // arm64

	pops   int     // where the pops start in the code, once made
	fixups []fixup // its copies of memory, once made
}

// Len is the length of the site's records.
func (s *RecordStub) Len() int {
	n := s.values()
	for _, r := range s.Reads {
		n += r.Words()
	}
	if len(s.Reads) > 0 {
		n += iovWords
	}
	return ring.RecordHeader + 8*n
}

// values is how many words the registers, stack words and hook flag
// take.
func (s *RecordStub) values() int {
	n := len(s.Regs) + s.StackWords
	if s.Hook {
		n++
	}
	return n
}

// iovWords are the record's scratch words for process_vm_readv's two
// iovecs, after the reads.
const iovWords = 4

// RecordStackMax bounds StackWords: at a function's entry the words just
// above sp are the caller's frame, always mapped.
const RecordStackMax = 8

// StubRewind says how a thread inside a record stub or the routine gets
// back to the probed instruction with every register as it was, the
// record not made (or made already, if it was committed): with Saved, the
// stub's saves are at Area (SavedRegs, upward); the thread's sp is SP.
type StubRewind struct {
	Saved bool
	Area  uint64
	SP    uint64
}

// MemRead is one read: Len bytes at a base plus Off. The base is the
// register Reg; or with Via, the first word an earlier read of the stub
// copied (a pointer in memory: +0(+8(%di)) is two reads, the second
// Via the first); or with Abs, the address Addr (@SYM).
type MemRead struct {
	Reg  int // the register's byte offset in unix.PtraceRegs
	Via  int // 0, or 1 + the index of the read whose first word is the base
	Abs  bool
	Addr uint64
	Off  int32
	Len  int // bytes, at most MemReadMax
}

// MemReadMax bounds one read: a string is cut there.
const MemReadMax = 256

// Words is how many record words the read takes: the address, the
// result, the bytes.
func (r MemRead) Words() int { return 2 + (r.Len+7)/8 }

// ReturnRecord is the site id of a return's record. Its values are the
// slot the function returned from, %rax, %rdx and errno as the function
// left it (RecordRoutine.Errno).
const ReturnRecord = ^uint32(0)

// ReturnValues is how many values a ReturnRecord has.
const ReturnValues = 4

// Filter is a test of numbers: a comparison of a value with a constant
// (Cmp), or And, Or, Not of others.
type Filter struct {
	Kind  FilterKind
	L, R  *Filter // And, Or: both; Not: L
	Value TallyValue
	Op    FilterOp
	// Const is what the value compares with: as a signed number
	// (sign-extended to 64 bits) where Value.Signed, else unsigned.
	Const uint64
}

// FilterKind is what a Filter node is.
type FilterKind uint8

const (
	FilterCmp FilterKind = iota
	FilterAnd
	FilterOr
	FilterNot
)

// FilterOp is a comparison, as the filter grammar has them.
type FilterOp uint8

const (
	OpEQ FilterOp = iota
	OpNE
	OpLT
	OpLE
	OpGT
	OpGE
	OpBand // value & Const != 0
)

// Tally is one block of counters a stub adds to, At words from
// ring.TallyOff: with Value nil, one word, the hits; else TallyHistWords:
// the log2 histogram of the value (word 0: value 0; word i, i in 1..64:
// values in [2^(i-1), 2^i)), then the negative values' count, then the
// values' sum (wrapping, as an int64 sum does). An unsigned value of
// 2^63 or more counts as 2^63-1, as a signed total must.
// With Filter, the block is added to only where the filter holds.
type Tally struct {
	At     int
	Value  *TallyValue
	Filter *Filter
}

// TallyHistWords is the size of a histogram's block.
const TallyHistWords = 65 + 2

// The words of a histogram's block past its buckets.
const (
	TallyNegative = 65
	TallySum      = 66
)

// Words is the block's size.
func (t Tally) Words() int {
	if t.Value == nil {
		return 1
	}
	return TallyHistWords
}

// TallyValue is how a stub makes a value from what the thread has at
// the probe: a register (Reg, a byte offset in unix.PtraceRegs, for
// Word < 0) or the Word'th word at sp; shifted right by Shift and cut to
// Bits (a part of a register: %eax, %ah); cut to its type's Size bytes;
// a bitfield taken (((v << Lsh) cut to Size) >> Rsh); and, if Signed,
// sign-extended from Size.
type TallyValue struct {
	Reg, Word   int
	Shift, Bits uint8
	Size        uint8
	BitField    bool
	Lsh, Rsh    uint8
	Signed      bool
}

// fixup is a copy's place in a stub's code, and its read's system call.
type fixup struct{ copy, slow int }

// checkFilter reports whether s's filter can be coded: not with a
// return hook (the return is hooked whatever the entry's filter says),
// its rejections counted in a word of ring.TallyOff.
func (s *RecordStub) checkFilter() error {
	if err := s.Filter.check(); err != nil {
		return err
	}
	if s.Hook || s.Rejected < 0 || s.Rejected >= ring.TallyWords {
		return fmt.Errorf("a filter with a return hook, or its count at word %d", s.Rejected)
	}
	return nil
}

// checkRead reports whether s's read i can be coded; regOK says whether
// the register it is based on, if any, is one the stub can read.
func (s *RecordStub) checkRead(i int, regOK bool) error {
	switch r := s.Reads[i]; {
	case r.Len <= 0 || r.Len > MemReadMax:
		return fmt.Errorf("read of %d bytes: not recordable", r.Len)
	case r.Via > i || r.Via > 0 && s.Reads[r.Via-1].Len < 8:
		return fmt.Errorf("read %d: based on read %d, not an earlier pointer", i, r.Via-1)
	case r.Via == 0 && !r.Abs && !regOK:
		return fmt.Errorf("read of %d bytes at register %d: not recordable", r.Len, r.Reg)
	}
	return nil
}

// checkTallies reports whether s's tallies fit the rings' counters.
func (s *RecordStub) checkTallies() error {
	for _, t := range s.Tallies {
		if t.At < 0 || t.At+t.Words() > ring.TallyWords {
			return fmt.Errorf("tally at word %d: past the ring's %d counters", t.At, ring.TallyWords)
		}
		if t.Value != nil {
			if err := t.Value.check(); err != nil {
				return err
			}
		}
		if t.Filter != nil {
			if err := t.Filter.check(); err != nil {
				return err
			}
		}
	}
	return nil
}

// check reports whether f can be coded.
func (f *Filter) check() error {
	if f == nil {
		return fmt.Errorf("an empty filter")
	}
	switch f.Kind {
	case FilterAnd, FilterOr:
		if err := f.L.check(); err != nil {
			return err
		}
		return f.R.check()
	case FilterNot:
		return f.L.check()
	case FilterCmp:
		if f.Op > OpBand {
			return fmt.Errorf("filter operator %d", f.Op)
		}
		return f.Value.check()
	}
	return fmt.Errorf("filter node of kind %d", f.Kind)
}

// check reports whether v can be coded.
func (v TallyValue) check() error {
	switch {
	case v.Word < 0 && !RecordableReg(v.Reg):
		return fmt.Errorf("register at %d of the registers' struct: not recordable", v.Reg)
	case v.Word >= RecordStackMax:
		return fmt.Errorf("stack word %d: past the %d a stub reads", v.Word, RecordStackMax)
	case v.Size == 0 || v.Size > 8 || v.Bits == 0 || v.Bits > 64:
		return fmt.Errorf("a value of %d bytes, %d bits: not an integer", v.Size, v.Bits)
	}
	return nil
}
