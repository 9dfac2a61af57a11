// Package singlestep decides how to run the instruction displaced by a
// software breakpoint, without touching the tracee: it decodes instruction
// bytes, emulates the simple instructions found at probe sites (prologue
// pushes, nops, branches, calls, returns) on a register set, and prepares
// the rest for execution out of line (XOL) in a slot of an injected page,
// re-basing rip-relative operands, then repairs the registers after the
// single-step, much like the kernel's uprobes.
//
//	in, err := singlestep.Analyze(code, addr) // code: the original bytes at addr
//	if in.Kind == singlestep.Emulate { err = in.Emulate(&regs, mem) } else { b, _ := in.XOL(slot); /* write b at slot, step it */ err = in.Fixup(&regs, mem, slot) }
//
// Per-architecture code lives in files with a GOARCH suffix (amd64 and
// arm64); its breakpoint comes from its table (arch.Host). An architecture
// supplies SlotSize, XOLReach, the archInsn type held in Insn, insnLength (used by
// Boundaries and CheckBoundary), Analyze, SweepBranches, GoStackCheckEnd,
// DirectBranch, jumpBack (for XOLBoosted) and the Insn methods Emulate,
// XOL, Fixup, CanBoost, Form, FallsThrough and String. The code the
// tracer generates into the tracee (detours, the mailbox, in-process
// records) is package codegen's; what it asks of an instruction it
// copies is Form and FallsThrough (and on x86-64 Target, Cond and a
// function's branches, FunctionBranches).
package singlestep

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/probedbg/probe/arch"
)

// BreakpointInsn is the software breakpoint probes write.
var BreakpointInsn = arch.Host.Breakpoint

// BreakpointPCAdjust is how far past the probe address the trap leaves the
// pc.
var BreakpointPCAdjust = arch.Host.BreakpointPCAdjust

// Memory is the tracee's address space, as needed by emulation and fixups
// (push, pop, call, ret touch the stack). Offsets are addresses.
type Memory interface {
	ReadAt(p []byte, addr int64) (int, error)
	WriteAt(p []byte, addr int64) (int, error)
}

// Branch is a direct branch: the instruction at From (on x86-64 a jmp,
// jcc, call, loop, jrcxz or xbegin with a relative operand; on arm64 b,
// bl, b.cond, cbz, cbnz, tbz, tbnz) goes to To.
type Branch struct{ From, To uint64 }

// FunctionFlow is where a function's code says it goes (x86-64,
// AnalyzeFunction): its direct branches in order, then the entries of
// the jump tables its indirect jumps dispatch through (each From the
// jmp), and the indirect jumps that are no such dispatch, which may go
// anywhere.
type FunctionFlow struct {
	Branches []Branch
	Unknown  []uint64 // the indirect jumps not known, in order
}

// BranchesFor returns the flow's branches, or an error naming the first
// unknown indirect jump that own does not say is the caller's.
func (f *FunctionFlow) BranchesFor(own func(at uint64) bool) ([]Branch, error) {
	for _, at := range f.Unknown {
		if own == nil || !own(at) {
			return nil, fmt.Errorf("%#x: the function has an indirect jump", at)
		}
	}
	return f.Branches, nil
}

// Moved returns the flow of the same code placed delta bytes further on.
func (f *FunctionFlow) Moved(delta uint64) *FunctionFlow {
	out := &FunctionFlow{Branches: make([]Branch, len(f.Branches)), Unknown: make([]uint64, len(f.Unknown))}
	for i, b := range f.Branches {
		out.Branches[i] = Branch{From: b.From + delta, To: b.To + delta}
	}
	for i, at := range f.Unknown {
		out.Unknown[i] = at + delta
	}
	return out
}

// Kind says how the tracer runs a displaced instruction.
type Kind int

const (
	// Emulate: the tracer applies the instruction's effect to the
	// registers and memory itself; no slot, no single-step.
	Emulate Kind = iota + 1
	// Step: the instruction is copied into an XOL slot (see Insn.XOL),
	// single-stepped there, and the result repaired with Insn.Fixup.
	Step
	// Boost is reserved: Analyze never returns it. Use Insn.CanBoost to
	// learn whether a Step instruction may run out of line without a
	// single-step (Insn.XOLBoosted).
	Boost
)

func (k Kind) String() string {
	switch k {
	case Emulate:
		return "emulate"
	case Step:
		return "step"
	case Boost:
		return "boost"
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// Form names the instructions that a copy made elsewhere (a detour's, in
// package codegen) must rebuild rather than copy: the relative branches
// and, on arm64, the other pc-relative instructions and the register
// branches. Insn.Form says which; FormPlain is any other.
type Form int

const (
	FormPlain   Form = iota
	FormJmp          // x86-64 jmp rel8, rel32
	FormJcc          // x86-64 jcc rel8, rel32
	FormCall         // x86-64 call rel32
	FormCallMem      // x86-64 call *disp32(%rip): through a pointer in memory (MemOperand)
	FormJmpMem       // x86-64 jmp *disp32(%rip): a PLT entry's jump through its GOT slot (MemOperand)
	FormB            // arm64 b, bl
	FormBCond        // arm64 b.cond
	FormCB           // arm64 cbz, cbnz
	FormTB           // arm64 tbz, tbnz
	FormADR          // arm64 adr, adrp
	FormLDRLit       // arm64 ldr (literal), ldrsw (literal)
	FormBR           // arm64 br, blr, ret
)

// TableReader reads n bytes of the module at link address addr: the
// jump tables, in its read-only data.
type TableReader func(addr, n uint64) ([]byte, error)

// Insn is one analysed instruction at a probe site.
type Insn struct {
	Addr     uint64 // address of the original instruction
	Len      int    // encoded length in bytes
	Bytes    []byte // the original bytes (Len of them)
	Kind     Kind   // Emulate or Step
	Mnemonic string // lower-case mnemonic, e.g. "push", "endbr64", "jne"

	arch archInsn
}

// XOLBoosted returns XOL's bytes followed by a jump back to in.Addr+Len
// (x86-64's jmp rel32, arm64's b), so that resuming the tracee at
// slotAddr needs neither a single-step nor Fixup. It fails for
// instructions that cannot be boosted, and with *OutOfRangeError when the
// jump cannot reach.
func (in *Insn) XOLBoosted(slotAddr uint64) ([]byte, error) {
	if !in.CanBoost() {
		return nil, &UnsupportedError{Addr: in.Addr, Mnemonic: in.Mnemonic, Reason: "cannot run out of line without a single-step"}
	}
	out, err := in.XOL(slotAddr)
	if err != nil {
		return nil, err
	}
	back := in.Addr + uint64(in.Len)
	jmp, ok := jumpBack(slotAddr+uint64(len(out)), back)
	if !ok {
		return nil, &OutOfRangeError{Addr: in.Addr, Slot: slotAddr, Target: back}
	}
	return append(out, jmp...), nil
}

// Boundaries decodes a function's code, which starts at address addr, and
// returns the address of each instruction start, in order. If decoding
// fails part way (data in text, an unknown opcode, code ending inside an
// instruction) it returns the boundaries found so far and a *DecodeError.
func Boundaries(code []byte, addr uint64) ([]uint64, error) {
	var starts []uint64
	for off := 0; off < len(code); {
		n, err := insnLength(code[off:])
		if err != nil {
			return starts, newDecodeError(addr+uint64(off), code[off:], err)
		}
		starts = append(starts, addr+uint64(off))
		off += n
	}
	return starts, nil
}

// CheckBoundary decodes a function's code, which starts at fnAddr, and
// returns nil if probeAddr is the start of an instruction. Otherwise it
// returns *NotBoundaryError (probeAddr is inside an instruction),
// *OutsideCodeError (probeAddr is not within code) or *DecodeError (the
// code could not be decoded up to probeAddr).
func CheckBoundary(code []byte, fnAddr, probeAddr uint64) error {
	end := fnAddr + uint64(len(code))
	if probeAddr < fnAddr || probeAddr >= end {
		return &OutsideCodeError{Addr: probeAddr, Start: fnAddr, End: end}
	}
	want := probeAddr - fnAddr
	for off := uint64(0); ; {
		n, err := insnLength(code[off:])
		if err != nil {
			return newDecodeError(fnAddr+off, code[off:], err)
		}
		next := off + uint64(n)
		switch {
		case off == want:
			return nil
		case next > want:
			return &NotBoundaryError{Addr: probeAddr, Prev: fnAddr + off, Next: fnAddr + next}
		}
		off = next
	}
}

// maxShownBytes bounds the bytes kept in a DecodeError (the longest x86
// instruction is 15 bytes).
const maxShownBytes = 15

// DecodeError reports bytes that do not decode as an instruction.
type DecodeError struct {
	Addr  uint64
	Bytes []byte // the bytes at Addr (at most 15)
	Err   error  // the decoder's reason, e.g. "truncated instruction"
}

func newDecodeError(addr uint64, code []byte, err error) *DecodeError {
	return &DecodeError{Addr: addr, Bytes: append([]byte(nil), code[:min(len(code), maxShownBytes)]...), Err: err}
}

func (e *DecodeError) Error() string {
	return fmt.Sprintf("cannot decode instruction at %#x (bytes % x): %v", e.Addr, e.Bytes, e.Err)
}

func (e *DecodeError) Unwrap() error { return e.Err }

// NotBoundaryError reports a probe address inside an instruction. Prev is
// the start of that instruction and Next the start of the following one,
// both absolute, so that callers can print them symbolically.
type NotBoundaryError struct {
	Addr, Prev, Next uint64
}

func (e *NotBoundaryError) Error() string {
	return fmt.Sprintf("%#x is not an instruction boundary (nearest: %#x, %#x)", e.Addr, e.Prev, e.Next)
}

// OutsideCodeError reports a probe address outside the code [Start, End)
// it was checked against.
type OutsideCodeError struct {
	Addr, Start, End uint64
}

func (e *OutsideCodeError) Error() string {
	return fmt.Sprintf("%#x is outside the function code [%#x, %#x)", e.Addr, e.Start, e.End)
}

// UnsupportedError reports an instruction that cannot be probed, or an
// operation the instruction does not allow (e.g. emulating a Step
// instruction, running a relative branch out of line).
type UnsupportedError struct {
	Addr     uint64
	Mnemonic string
	Reason   string // why, briefly; may be empty
}

func (e *UnsupportedError) Error() string {
	msg := "unsupported instruction at probe site: " + e.Mnemonic
	if e.Reason != "" {
		msg += " (" + e.Reason + ")"
	}
	return msg
}

// OutOfRangeError reports that an instruction run from Slot cannot reach
// Target with a 32-bit displacement.
type OutOfRangeError struct {
	Addr   uint64 // original instruction
	Slot   uint64 // XOL slot address
	Target uint64 // absolute address the displacement must reach
}

func (e *OutOfRangeError) Error() string {
	return fmt.Sprintf("instruction at %#x cannot run from XOL slot %#x: target %#x is beyond ±2 GiB", e.Addr, e.Slot, e.Target)
}

// MemoryError reports a failed tracee memory access during emulation or
// fixup.
type MemoryError struct {
	Op   string // "read" or "write"
	Addr uint64
	Len  int
	Err  error
}

func (e *MemoryError) Error() string {
	return fmt.Sprintf("cannot %s %d bytes of tracee memory at %#x: %v", e.Op, e.Len, e.Addr, e.Err)
}

func (e *MemoryError) Unwrap() error { return e.Err }

// FixupError reports a tracee state after the out-of-line step that the
// instruction cannot have produced, so the repair would be a guess.
type FixupError struct {
	Addr   uint64 // original instruction
	Slot   uint64 // XOL slot it ran in
	Detail string
}

func (e *FixupError) Error() string {
	return fmt.Sprintf("cannot fix up after stepping instruction at %#x in slot %#x: %s", e.Addr, e.Slot, e.Detail)
}

var errNoMemory = errors.New("no tracee memory given")

// readFull reads len(p) bytes at addr; a short read is an error.
func readFull(mem Memory, p []byte, addr uint64) error {
	if mem == nil {
		return &MemoryError{Op: "read", Addr: addr, Len: len(p), Err: errNoMemory}
	}
	n, err := mem.ReadAt(p, int64(addr))
	if n == len(p) {
		return nil
	}
	if err == nil {
		err = io.ErrUnexpectedEOF
	}
	return &MemoryError{Op: "read", Addr: addr, Len: len(p), Err: err}
}

// writeFull writes all of p at addr; a short write is an error.
func writeFull(mem Memory, p []byte, addr uint64) error {
	if mem == nil {
		return &MemoryError{Op: "write", Addr: addr, Len: len(p), Err: errNoMemory}
	}
	n, err := mem.WriteAt(p, int64(addr))
	if n == len(p) && err == nil {
		return nil
	}
	if err == nil {
		err = io.ErrShortWrite
	}
	return &MemoryError{Op: "write", Addr: addr, Len: len(p), Err: err}
}

func readU64(mem Memory, addr uint64) (uint64, error) {
	var b [8]byte
	if err := readFull(mem, b[:], addr); err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint64(b[:]), nil
}

func writeU64(mem Memory, addr, v uint64) error {
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], v)
	return writeFull(mem, b[:], addr)
}
