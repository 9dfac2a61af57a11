package codegen

import (
	"encoding/binary"
	"fmt"
	"slices"

	"github.com/probedbg/probe/singlestep"
)

// JumpSize is the length of the jmp rel32 a jump-optimised probe writes
// at its address, in place of the int3.
const JumpSize = 5

// SavesR11 reports whether the detour keeps %r11 at -8(%rsp) between its
// first instruction and Skip.
func (d *Detour) SavesR11() bool { return d.ReturnHook != 0 || d.LoadReturn }

// The return hook's code: `mov %r11,-8(%rsp); mov (%rsp),%r11` before the
// int3; `lea ReturnHook(%rip),%r11; mov %r11,(%rsp)` after it; then, at
// Skip, `mov -8(%rsp),%r11`. None touches the flags. At a SysV function
// entry -8(%rsp) is free: the call just wrote over the caller's red zone
// there, and a signal frame goes below the red zone.
var (
	hookSave    = []byte{0x4c, 0x89, 0x5c, 0x24, 0xf8}
	hookLoad    = []byte{0x4c, 0x8b, 0x1c, 0x24}
	hookLea     = []byte{0x4c, 0x8d, 0x1d} // + rel32
	hookStore   = []byte{0x4c, 0x89, 0x1c, 0x24}
	hookRestore = []byte{0x4c, 0x8b, 0x5c, 0x24, 0xf8}
	hookSwapLen = len(hookLea) + 4 + len(hookStore)
)

// PlanDetour decides whether the probe at addr, inside the function whose
// whole code is fn (at fnAddr), can be jump-optimised, as kprobes'
// can_optimize: every instruction the jmp covers runs out of line without
// a single-step, or is a direct jcc, jmp or call (re-aimed from the
// detour, and a call through a pointer at a rip-relative address; a call
// only last, so that its callee returns past the jmp), the
// covered range lies in the function, no direct branch in the function
// lands inside the range (a branch to addr itself is fine), and the
// function has no indirect jump (a jump table might land there). The
// function's own jmps and jccs with a rel32 that land on a covered
// instruction after the first are re-aimed at its copy (Redirects). The
// error says why not.
func PlanDetour(fn []byte, fnAddr, addr uint64, tables singlestep.TableReader) (*Detour, error) {
	return PlanDetourFlow(fn, fnAddr, addr, func() (*singlestep.FunctionFlow, error) {
		return singlestep.AnalyzeFunction(fn, fnAddr, tables)
	})
}

// PlanDetourFlow is PlanDetour with where the function jumps from flow
// (asked once the instructions the jmp would cover allow it): a
// singlestep.AnalyzeFunction of fn at fnAddr, kept from an earlier start.
func PlanDetourFlow(fn []byte, fnAddr, addr uint64, flow func() (*singlestep.FunctionFlow, error)) (*Detour, error) {
	if addr < fnAddr || addr >= fnAddr+uint64(len(fn)) {
		return nil, &singlestep.OutsideCodeError{Addr: addr, Start: fnAddr, End: fnAddr + uint64(len(fn))}
	}
	d := &Detour{Addr: addr}
	for d.Covered < JumpSize {
		at := addr + uint64(d.Covered)
		if at >= fnAddr+uint64(len(fn)) {
			return nil, fmt.Errorf("%#x: the jump would run past the end of the function", addr)
		}
		in, err := singlestep.Analyze(fn[at-fnAddr:], at)
		if err != nil {
			return nil, err
		}
		switch in.Form() {
		case singlestep.FormJcc, singlestep.FormJmp:
			// Re-aimed from the detour at the same target.
		case singlestep.FormCall, singlestep.FormCallMem:
			// Its copy pushes the original return address: the
			// callee must return past the jmp.
			if d.Covered+in.Len < JumpSize {
				return nil, fmt.Errorf("%s: the call would return into the jump", in)
			}
		case singlestep.FormJmpMem:
			// Copied as the same jump through the same slot. Always
			// last (6 bytes): nothing after it is covered, which
			// might be reached through the slot unseen (a lazily
			// bound PLT entry's push, where its GOT slot points
			// first).
		default:
			if !in.FallsThrough() || !in.CanBoost() {
				return nil, fmt.Errorf("%s: a branch cannot be covered by the jump", in)
			}
		}
		d.Insns = append(d.Insns, in)
		d.Covered += in.Len
	}
	if uint64(d.Covered) > fnAddr+uint64(len(fn))-addr {
		return nil, fmt.Errorf("%#x: the jump would run past the end of the function", addr)
	}
	// A covered jump through memory goes where its slot says, and its
	// copy does the same: out of the function (a PLT entry's GOT slot
	// holds the library function, or, lazily bound, the entry's push
	// past the jump), never into the covered bytes but by a loop on
	// itself.
	own := func(at uint64) bool {
		return slices.ContainsFunc(d.Insns, func(in *singlestep.Insn) bool {
			return in.Addr == at && in.Form() == singlestep.FormJmpMem
		})
	}
	f, err := flow()
	if err != nil {
		return nil, err
	}
	branches, err := f.BranchesFor(own)
	if err != nil {
		return nil, err
	}
	for _, b := range branches {
		if addr < b.To && b.To < addr+uint64(d.Covered) {
			r, ok := d.redirect(fn, fnAddr, b.From, b.To)
			if !ok { // (a jump table's jmp is neither a jmp rel32 nor a jcc)
				return nil, fmt.Errorf("%#x: a branch at %#x lands inside the jump", addr, b.From)
			}
			d.Redirects = append(d.Redirects, r)
		}
	}
	return d, nil
}

// redirect returns the Redirect of the branch at from, inside fn, to
// target, a covered address: ok only for a jmp or jcc with a rel32, not
// itself covered, landing where a covered instruction starts.
func (d *Detour) redirect(fn []byte, fnAddr, from, target uint64) (Redirect, bool) {
	if from >= d.Addr && from < d.Addr+uint64(d.Covered) {
		return Redirect{}, false
	}
	k := slices.IndexFunc(d.Insns, func(in *singlestep.Insn) bool { return in.Addr == target })
	in, err := singlestep.Analyze(fn[from-fnAddr:], from)
	if k < 1 || err != nil || in.Form() != singlestep.FormJcc && in.Form() != singlestep.FormJmp || in.Len < 5 {
		return Redirect{}, false
	}
	code := fn[from-fnAddr : from-fnAddr+uint64(in.Len)]
	if from+uint64(in.Len)+uint64(int64(int32(binary.LittleEndian.Uint32(code[in.Len-4:])))) != in.Target() {
		return Redirect{}, false // a rel8, or a rel32 not at the end
	}
	return Redirect{From: from, Insn: k, Orig: slices.Clone(code)}, true
}

// CopyOf is the address of Insns[k]'s copy in the detour placed at
// detour.
func (d *Detour) CopyOf(k int, detour uint64) uint64 {
	at := d.Copies(detour)
	for _, in := range d.Insns[:k] {
		at += uint64(copyLen(in))
	}
	return at
}

// Redirected returns the bytes of r's branch re-aimed at its
// instruction's copy in the detour placed at detour.
func (d *Detour) Redirected(r Redirect, detour uint64) ([]byte, error) {
	to := d.CopyOf(r.Insn, detour)
	n := len(r.Orig)
	disp, ok := rel32(r.From+uint64(n), to)
	if !ok {
		return nil, &singlestep.OutOfRangeError{Addr: r.From, Slot: detour, Target: to}
	}
	b := slices.Clone(r.Orig)
	binary.LittleEndian.PutUint32(b[n-4:], uint32(disp))
	return b, nil
}

// Size is the length of the detour's code.
func (d *Detour) Size() int {
	n := int(d.Copies(0)) + JumpSize
	for _, in := range d.Insns {
		n += copyLen(in)
	}
	return n + 8*d.calls()
}

// copyLen is the length of a covered instruction's copy: a jcc rel32 or
// jmp rel32 for a branch; for a call, `push RET(%rip)` (the original
// return address, kept after the jmp back) and a jmp rel32, or for a
// call through memory `jmp *SLOT(%rip)`; else the instruction.
func copyLen(in *singlestep.Insn) int {
	switch in.Form() {
	case singlestep.FormJcc:
		return 6
	case singlestep.FormJmp:
		return JumpSize
	case singlestep.FormCall:
		return 6 + JumpSize
	case singlestep.FormCallMem:
		return 6 + 6
	case singlestep.FormJmpMem:
		return 6
	}
	return in.Len
}

// calls is how many covered instructions are calls.
func (d *Detour) calls() int {
	n := 0
	for _, in := range d.Insns {
		if f := in.Form(); f == singlestep.FormCall || f == singlestep.FormCallMem {
			n++
		}
	}
	return n
}

// rel32 returns the displacement from "from" to "to" if it fits in int32
// (as singlestep's own).
func rel32(from, to uint64) (int32, bool) {
	d := int64(to - from)
	return int32(d), d == int64(int32(d))
}

// Trap is the address of the int3 of the detour placed at detour.
func (d *Detour) Trap(detour uint64) uint64 {
	if d.SavesR11() {
		return detour + uint64(len(hookSave)+len(hookLoad))
	}
	return detour
}

// Skip is where a thread stopped at the int3 goes on without the return
// hook: past the swap, where a return-hook detour puts %r11 back.
func (d *Detour) Skip(detour uint64) uint64 {
	switch {
	case d.ReturnHook != 0:
		return d.Trap(detour) + 1 + uint64(hookSwapLen)
	default:
		return d.Trap(detour) + 1
	}
}

// Copies is the address of the first covered instruction's copy in the
// detour placed at detour: where a thread that never ran the detour's
// first instructions (it trapped on the int3 the jmp replaced) goes on.
func (d *Detour) Copies(detour uint64) uint64 {
	if d.SavesR11() {
		return d.Skip(detour) + uint64(len(hookRestore))
	}
	return d.Skip(detour)
}

// Code returns the detour's bytes for placement at detour: an int3 (with
// ReturnHook, inside the hook's code), the covered instructions
// (rip-relative operands re-based) and a jmp back to Addr+Covered.
func (d *Detour) Code(detour uint64) ([]byte, error) {
	out := make([]byte, 0, d.Size())
	if d.SavesR11() {
		out = append(append(out, hookSave...), hookLoad...)
	}
	out = append(out, singlestep.BreakpointInsn...)
	if d.ReturnHook != 0 {
		out = append(out, hookLea...)
		disp, ok := rel32(detour+uint64(len(out))+4, d.ReturnHook)
		if !ok {
			return nil, &singlestep.OutOfRangeError{Addr: d.Addr, Slot: detour, Target: d.ReturnHook}
		}
		out = binary.LittleEndian.AppendUint32(out, uint32(disp))
		out = append(out, hookStore...)
	}
	if d.SavesR11() {
		out = append(out, hookRestore...)
	}
	// The calls' return addresses go after the jmp back.
	rets := detour + uint64(d.Size()-8*d.calls())
	var retData []byte
	branch := func(op []byte, target uint64) error {
		out = append(out, op...)
		disp, ok := rel32(detour+uint64(len(out))+4, target)
		if !ok {
			return &singlestep.OutOfRangeError{Addr: d.Addr, Slot: detour, Target: target}
		}
		out = binary.LittleEndian.AppendUint32(out, uint32(disp))
		return nil
	}
	for _, in := range d.Insns {
		var err error
		switch in.Form() {
		case singlestep.FormJcc:
			err = branch([]byte{0x0f, 0x80 | in.Cond()}, in.Target())
		case singlestep.FormJmp:
			err = branch([]byte{0xe9}, in.Target())
		case singlestep.FormCall:
			at := rets + uint64(len(retData))
			retData = binary.LittleEndian.AppendUint64(retData, in.Addr+uint64(in.Len))
			if err = branch([]byte{0xff, 0x35}, at); err == nil { // push RET(%rip)
				err = branch([]byte{0xe9}, in.Target())
			}
		case singlestep.FormCallMem:
			at := rets + uint64(len(retData))
			retData = binary.LittleEndian.AppendUint64(retData, in.Addr+uint64(in.Len))
			if err = branch([]byte{0xff, 0x35}, at); err == nil { // push RET(%rip)
				err = branch([]byte{0xff, 0x25}, in.MemOperand()) // jmp *SLOT(%rip)
			}
		case singlestep.FormJmpMem:
			err = branch([]byte{0xff, 0x25}, in.MemOperand()) // jmp *SLOT(%rip), without a bnd prefix
		default:
			var b []byte
			b, err = in.XOL(detour + uint64(len(out)))
			out = append(out, b...)
		}
		if err != nil {
			return nil, err
		}
	}
	if err := branch([]byte{0xe9}, d.Addr+uint64(d.Covered)); err != nil {
		return nil, err
	}
	return append(out, retData...), nil
}

// CallSlot says, for rip inside the detour placed at detour, whether it
// is the jmp of a FormCallMem's copy, its return address pushed: the
// thread is as at the entry of the function the pointer at slot names.
func (d *Detour) CallSlot(rip, detour uint64) (slot uint64, ok bool) {
	at := d.Copies(detour)
	for _, in := range d.Insns {
		if in.Form() == singlestep.FormCallMem && rip == at+6 {
			return in.MemOperand(), true
		}
		at += uint64(copyLen(in))
	}
	return 0, false
}

// Jump returns the JumpSize bytes written at Addr: jmp rel32 to detour.
func (d *Detour) Jump(detour uint64) ([]byte, error) {
	disp, ok := rel32(d.Addr+JumpSize, detour)
	if !ok {
		return nil, &singlestep.OutOfRangeError{Addr: d.Addr, Slot: detour, Target: detour}
	}
	return binary.LittleEndian.AppendUint32([]byte{0xe9}, uint32(disp)), nil
}

// Original maps rip, inside the detour placed at detour, to the equivalent
// address in the original code: the int3 (and the thread that has just
// trapped on it) and the return hook's instructions to Addr, each copy to
// its instruction, the jmp back to Addr+Covered. savedR11: the thread's
// %r11 is at -8(%rsp), to be put back. ok is false when rip is not an
// instruction start of the detour.
func (d *Detour) Original(rip, detour uint64) (orig uint64, savedR11, ok bool) {
	trap := d.Trap(detour)
	if d.SavesR11() {
		lea := trap + 1
		switch {
		case rip == detour:
			return d.Addr, false, true
		case rip == detour+uint64(len(hookSave)) || rip == trap ||
			d.ReturnHook != 0 && (rip == lea || rip == lea+uint64(len(hookLea)+4)):
			// Before the store: the return address is not swapped
			// yet, so the entry can run again from the start.
			return d.Addr, true, true
		case rip == d.Skip(detour):
			// At the restore; with a return hook the return address
			// is swapped: the caller puts it back too.
			return d.Addr, true, true
		}
	} else if rip == detour || rip == trap+1 {
		return d.Addr, false, true
	}
	at := d.Copies(detour)
	for _, in := range d.Insns {
		if rip == at {
			return in.Addr, false, true
		}
		if in.Form() == singlestep.FormCall && rip == at+6 {
			// Its return address pushed: as at the callee's entry.
			return in.Target(), false, true
		}
		if in.Form() == singlestep.FormCallMem && rip == at+6 {
			// As at the callee's entry too, but the callee is in
			// memory: CallSlot says where.
			return 0, false, false
		}
		at += uint64(copyLen(in))
	}
	if rip == at {
		return d.Addr + uint64(d.Covered), false, true
	}
	return 0, false, false
}
