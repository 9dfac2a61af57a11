package fetch

import (
	"errors"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/probedbg/probe/codegen"
)

// DWARF variables, in-process: at a function's entry a parameter of an
// optimised function is in a register, or in the caller's frame just
// above sp. A record that holds every general register and the words at
// sp then has all the DWARF layer reads, and the replay evaluates the
// variable on it as a stop would, field for field. Whether a variable
// reads no more than that is found by reading it once, before any hit,
// on made-up registers (none a readable address) and a memory where only
// the words at sp answer, with bytes that make no null pointer: a value
// that would need memory elsewhere (a string, a pointer followed, a
// global, a thread-local) reaches for it there, and the variable stops
// the thread as before.

// Made up for the trial read: a stack pointer, and the other registers'
// values: not canonical addresses (nothing can be read there), yet
// positive as an int64 (the DWARF layer reads no other) and below
// 0xbeed000000000000, where delve keeps fake addresses of its own for
// values in registers and would read none of ours.
const (
	trialSP  = 0x7ff000000000
	trialReg = 0x4000000000000000
)

// dwarfRecordable reports whether f, a DWARF variable, reads nothing but
// general registers and the words at sp (read once, then kept): not a
// floating-point value, which may be in an SSE register.
func (f *fetchArg) dwarfRecordable() bool {
	if f.dwarfRec == 0 {
		f.dwarfRec = -1
		fp, _ := f.dwarf.(interface{ UsesFloat() bool })
		if len(f.derefs) == 0 && f.count == 0 && f.dwarf != nil && (fp == nil || !fp.UsesFloat()) && RecordableVar(f.dwarf) {
			f.dwarfRec = 1
		}
	}
	return f.dwarfRec > 0
}

// RecordableVar reports whether v reads nothing but registers and the
// words at sp a record holds: it reads v on made-up ones, and true if it
// read nothing else.
func RecordableVar(v DwarfVar) bool {
	var regs unix.PtraceRegs
	words := (*[fetchNumRegs]uint64)(unsafe.Pointer(&regs))
	for i := range words {
		words[i] = trialReg + uint64(i)<<20
	}
	words[regSP] = trialSP
	mem := &trialMemory{lo: trialSP, hi: trialSP + 8*codegen.RecordStackMax}
	v.Read(&HitEnv{Regs: &regs, Mem: mem})
	return !mem.outside
}

// trialMemory answers reads of [lo, hi) with 0x5a bytes, and notes any
// other.
type trialMemory struct {
	lo, hi  uint64
	outside bool
}

func (m *trialMemory) ReadAt(p []byte, addr int64) (int, error) {
	if a := uint64(addr); a < m.lo || a+uint64(len(p)) > m.hi || a+uint64(len(p)) < a {
		m.outside = true
		return 0, errors.New("not recorded")
	}
	for i := range p {
		p[i] = 0x5a
	}
	return len(p), nil
}

func (m *trialMemory) WriteAt(p []byte, addr int64) (int, error) {
	return 0, errors.New("read-only")
}

// generalRegs are the byte offsets in unix.PtraceRegs of the 16 general
// registers: what a record of a DWARF variable holds.
var generalRegs = func() []int {
	var offs []int
	for off := 0; off < fetchNumRegs*8; off += 8 {
		if codegen.RecordableReg(off) && off != int(regFlags)*8 {
			offs = append(offs, off)
		}
	}
	return offs
}()
