package codegen

// The rescue: what lets a tracee outlive a `kill -9` of its tracer while
// a probe that stops threads is in. When a tracer dies, the kernel
// detaches its tracees, and every thread stopped at one of our traps
// gets the SIGTRAP it was stopped for (its default action: a core dump);
// so does every thread that meets an int3 or brk of ours later. So at
// attach, when the program's SIGTRAP action is SIG_DFL, a handler of ours
// becomes the action. While the tracer lives it never runs: every
// SIGTRAP stops the thread first, and ours are never delivered. After
// the tracer's death it finds, in the rescue page the tracer keeps up to
// date, what to do with the thread that trapped: the text to put back
// (once, for every thread, through /proc/self/mem), where the thread
// goes on (the original instruction, the copy's end, a detour's skip),
// where a hooked return goes home (the tracer's frames, mirrored), or,
// for a thread the tracer held at that moment, nothing but to go on
// (once: its held word is cleared, and its next SIGTRAP is its own).
// Any other SIGTRAP is the program's: the handler puts the program's
// action back and raises it again, so that it does what it would have.

// The rescue page's layout. Counts are of entries in use, free ones
// among them zeroed (a text entry with length 0, a pc entry with From 0,
// a frame with tid 0); the tracer writes an entry's key word last.
const (
	RescueMagic  = 0  // rescueMagic: the page names itself to a later attach
	RescueOldAct = 16 // the program's SIGTRAP action before ours (rt_sigaction's struct)
	RescueAct    = 48 // ours
	RescueDone   = 80 // 1 once a thread has begun to put the text back
	RescueTexts  = 88 // text entries in use
	RescuePCs    = 96 // pc entries in use
	RescueFrames = 104
	RescueBreak  = 112 // the breakpoint's bytes, for the write that comes first
	RescuePath   = 120 // "/proc/self/mem"

	// The guard: a thread the tracer runs code of its own in (an
	// injected system call, one instruction, a call), whose registers
	// and signal mask the handler puts back if it traps with pc
	// RescueGuardTrap: its tid (written last; 0: none), that pc, the
	// mask, and the registers in the ucontext's order (GuardWords).
	RescueGuardTid  = 136
	RescueGuardTrap = 144
	RescueGuardMask = 152
	RescueGuardRegs = 160

	// An executable mapping being made (its address and size; 0: none),
	// not yet marked as ours: a later attach takes it back if it is there,
	// empty (the handler does not read it).
	RescueMaking = 448

	// RescueHeld holds, at tid % RescueHeldSlots, the tid of a thread
	// the tracer has stopped and not yet resumed (a uint32 each).
	RescueHeld      = 4096
	RescueHeldSlots = 4096

	// A text entry: address (8), length (8; 0: free), original bytes.
	RescueTextAt   = RescueHeld + 4*RescueHeldSlots
	RescueTextSize = 48
	RescueTextMax  = RescueTextSize - 16
	RescueTextCap  = 1 << 16

	// A pc entry: From (a pc a thread traps with), To, Kind.
	RescuePCAt   = RescueTextAt + RescueTextSize*RescueTextCap
	RescuePCSize = 24
	RescuePCCap  = 1 << 17

	// A frame: tid, slot (where the return address was), the return
	// address: a return hooked by the tracer.
	RescueFrameAt   = RescuePCAt + RescuePCSize*RescuePCCap
	RescueFrameSize = 24
	RescueFrameCap  = 1 << 16

	RescueSize = (RescueFrameAt + RescueFrameSize*RescueFrameCap + 4095) &^ 4095
)

// What a pc entry does to a thread that traps with pc From.
const (
	// RescueGoOn: the thread goes on at To (From, to go on where it is).
	RescueGoOn = 1
	// RescueReturn: the thread is on the return trampoline: it goes to
	// the return address of its frame at sp - 8.
	RescueReturn = 2
	// RescueMailboxReturn: the thread is at the mailbox return routine's
	// trap, its mailbox slot in %rcx: unless the tracer has answered, the
	// answer is the return address of its frame at the slot's sp - 8.
	RescueMailboxReturn = 3
	// RescueMailboxEntry: the thread is at the mailbox entry routine's
	// trap: unless the tracer has answered, the answer is ReplyKeep.
	RescueMailboxEntry = 4
)

// RescueMagic's bytes.
var rescueMagic = [16]byte{'p', 'r', 'o', 'b', 'e', '-', 'r', 'e', 's', 'c', 'u', 'e', 0, 0, 0, 1}

// RescueMagicBytes returns the bytes a rescue page starts with.
func RescueMagicBytes() []byte { return rescueMagic[:] }

// RescueCode is the handler and its signal restorer, generated for a
// page at Page.
type RescueCode struct {
	Page uint64
}

// The guard's registers end before RescueMaking (a negative constant
// does not convert: the build fails if they grow past it).
const _ uint = RescueMaking - (RescueGuardRegs + 8*guardWords)

// RescueEntries are the places in the handler's code that are not the
// handler: its signal restorer, and the guard's stub, a system call
// instruction and a breakpoint after it, where injected system calls run
// (a thread let go there by our death traps, and the handler puts its
// registers back).
type RescueEntries struct {
	Restorer, Syscall uint64
}
