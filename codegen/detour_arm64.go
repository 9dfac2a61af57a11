package codegen

import (
	"encoding/binary"
	"fmt"
	"slices"

	"github.com/probedbg/probe/singlestep"
)

// Jump optimisation on arm64: the probed instruction, one word, becomes
// a `b` to the detour, a write the architecture lets other threads see
// whole (b and brk are among the instructions that may be changed into
// one another while they run). The detour is a brk (Trap; only a record
// stub in front of it is ever entered: arm64 makes no trapping detour,
// since a brk leaves pc at itself and the tracer would have to write it
// anyway), then the instruction as it runs from there (Copies) and the
// way back. An instruction that does not depend on where it is runs as
// it is, followed by a `b` back past it; a pc-relative one is rebuilt
// with absolute values (relocate): adr and adrp put their address in
// their register, a literal load loads from its address, bl sets x30 to
// its return and branches, a conditional branch tests the same and goes
// to its target or back. Register branches keep their brk.

// PlanDetour decides whether the probe at addr, in the function whose
// code is fn (at fnAddr), can be jump-optimised; the error says why not.
func PlanDetour(fn []byte, fnAddr, addr uint64, tables singlestep.TableReader) (*Detour, error) {
	if addr < fnAddr || addr+4 > fnAddr+uint64(len(fn)) {
		return nil, &singlestep.OutsideCodeError{Addr: addr, Start: fnAddr, End: fnAddr + uint64(len(fn))}
	}
	in, err := singlestep.Analyze(fn[addr-fnAddr:], addr)
	if err != nil {
		return nil, err
	}
	d := &Detour{Addr: addr, Covered: 4, Insns: []*singlestep.Insn{in}}
	if _, _, err := d.relocate(addr + 4); err != nil {
		return nil, err
	}
	return d, nil
}

// relocate returns the instruction's code as it runs from at, ending in
// its way on, and for each of its words where a thread there goes on in
// the original code (nothing of the instruction done yet, its successor,
// or a branch's target).
func (d *Detour) relocate(at uint64) (*a64, []uint64, error) {
	in := d.Insns[0]
	w, pc := binary.LittleEndian.Uint32(in.Bytes), in.Addr
	rt := w & 0x1f
	a := &a64{at: at}
	var orig []uint64
	done := func(to uint64) { // the words so far: the original at to
		for len(orig) < len(a.w) {
			orig = append(orig, to)
		}
	}
	back := func() { // the b back past the instruction
		done(pc)
		a.jump(pc + 4)
		done(pc + 4)
	}
	switch in.Form() {
	case singlestep.FormADR:
		imm := signExtend(uint64(w>>5&0x7ffff)<<2|uint64(w>>29&3), 21)
		v := pc + uint64(imm)
		if w&0x80000000 != 0 { // adrp
			v = pc&^0xfff + uint64(imm<<12)
		}
		a.mov(rt, v)
		back()
	case singlestep.FormLDRLit:
		lit := pc + uint64(signExtend(uint64(w>>5&0x7ffff), 19)*4)
		a.mov(rt, lit)
		switch w >> 30 {
		case 0:
			a.emit(0xb9400000 | rt<<5 | rt) // ldr wt, [xt]
		case 1:
			a.emit(0xf9400000 | rt<<5 | rt) // ldr xt, [xt]
		case 2:
			a.emit(0xb9800000 | rt<<5 | rt) // ldrsw xt, [xt]
		}
		back()
	case singlestep.FormB:
		to := pc + uint64(signExtend(uint64(w&0x3ffffff), 26)*4)
		if w&0x80000000 != 0 { // bl: the return, then the branch
			a.mov(xLR, pc+4)
		}
		a.jump(to)
		done(pc)
	case singlestep.FormBCond, singlestep.FormCB, singlestep.FormTB:
		// The same test, aimed two words on: [test] b back; b target.
		var to uint64
		if in.Form() == singlestep.FormTB {
			to = pc + uint64(signExtend(uint64(w>>5&0x3fff), 14)*4)
			a.emit(w&^(0x3fff<<5) | 2<<5)
		} else {
			to = pc + uint64(signExtend(uint64(w>>5&0x7ffff), 19)*4)
			a.emit(w&^(0x7ffff<<5) | 2<<5)
		}
		back()
		a.jump(to)
		done(to)
	case singlestep.FormBR:
		return nil, nil, fmt.Errorf("%s: a register branch cannot be covered by the jump", in)
	default:
		if !in.FallsThrough() {
			return nil, nil, fmt.Errorf("%s: cannot run from a copy", in)
		}
		a.emit(w)
		back()
	}
	return a, orig, a.err
}

// signExtend is v's low bits as a signed number (as singlestep's own).
func signExtend(v uint64, bits uint) int64 {
	return int64(v<<(64-bits)) >> (64 - bits)
}

// LandingPad reports whether the detour's instruction is one an indirect
// branch may land on in a BTI-guarded page (bti c/j/jc, paciasp,
// pacibsp): a `b` there would fault such a branch.
func (d *Detour) LandingPad() bool {
	w := binary.LittleEndian.Uint32(d.Insns[0].Bytes)
	return w&0xffffff3f == 0xd503241f || w == 0xd503233f || w == 0xd503237f
}

func (d *Detour) SavesR11() bool                             { return false }
func (d *Detour) CallSlot(rip, detour uint64) (uint64, bool) { return 0, false }
func (d *Detour) CopyOf(k int, detour uint64) uint64         { return detour + 4 }
func (d *Detour) Redirected(r Redirect, detour uint64) ([]byte, error) {
	return nil, errNoCodegen
}
func (d *Detour) Trap(detour uint64) uint64   { return detour }
func (d *Detour) Skip(detour uint64) uint64   { return detour + 4 }
func (d *Detour) Copies(detour uint64) uint64 { return detour + 4 }

// Size is the detour's length: the brk and the relocated instruction,
// the same wherever it goes.
func (d *Detour) Size() int {
	a, _, _ := d.relocate(d.Addr)
	return 4 + 4*len(a.w)
}

// Code is the detour's bytes at detour: the brk, then the instruction
// relocated.
func (d *Detour) Code(detour uint64) ([]byte, error) {
	if d.ReturnHook != 0 || d.LoadReturn {
		return nil, errNoCodegen
	}
	a, _, err := d.relocate(detour + 4)
	if err != nil {
		return nil, err
	}
	return append(slices.Clone(singlestep.BreakpointInsn), a.bytes()...), nil
}

// Jump is the `b` written at the probe address, to detour (the code in
// front of the detour's brk: a record stub).
func (d *Detour) Jump(detour uint64) ([]byte, error) {
	w, err := singlestep.BranchTo(d.Addr, detour)
	if err != nil {
		return nil, err
	}
	return binary.LittleEndian.AppendUint32(nil, w), nil
}

// Original is where a thread at rip in the detour goes on in the
// original code, as if the jump had never been written.
func (d *Detour) Original(rip, detour uint64) (orig uint64, savedR11, ok bool) {
	if rip == detour {
		return d.Addr, false, true
	}
	_, where, err := d.relocate(detour + 4)
	if k := (rip - detour - 4) / 4; err == nil && rip%4 == 0 && rip > detour && k < uint64(len(where)) {
		return where[k], false, true
	}
	return 0, false, false
}
