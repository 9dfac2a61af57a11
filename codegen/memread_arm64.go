package codegen

import (
	"slices"

	"github.com/probedbg/probe/ring"
)

// Memory a record stub reads for a fetch-arg like +OFF(%REG) or
// +OFF(%REG):string, on arm64: each read is process_vm_readv on the
// process's own memory (memread_amd64.go's way when its table cannot
// say; arm64 has no direct copy yet), which faults nothing: a bad
// address gives -EFAULT, a read across into an unmapped page the bytes
// before it, the same answers the tracer's own read gives. The system
// call takes x0-x5 and x8, which the stub saves with the rest (rsSaved),
// and keeps x10-x12, the record, its stamp and the ring.

// sysProcessVMReadv is process_vm_readv's number on arm64.
const sysProcessVMReadv = 270

const (
	a64Svc  = 0xd4000001 // svc #0
	eFault  = 14
	eIntr   = 4
	regArg0 = 0
)

// copyReads appends, for a stub whose record is at x10, the reads into
// the record.
func (s *RecordStub) copyReads(a *a64) error {
	at := s.values() // the first read's word
	iov := uint64(s.Len() - 8*iovWords)
	starts := make([]int, len(s.Reads)) // each read's first word
	for i, r := range s.Reads {
		starts[i] = at
		if err := s.checkRead(i, RecordableReg(r.Reg)); err != nil {
			return err
		}
		addr, res, data := uint64(ring.RecordHeader+8*at), uint64(ring.RecordHeader+8*at+8), uint64(ring.RecordHeader+8*at+16)
		skip := -1
		switch {
		case r.Via > 0:
			// The pointer, if its read got all 8 bytes; else this read
			// faults too, unread.
			from := uint64(ring.RecordHeader + 8*starts[r.Via-1])
			a.str(xZR, x10, addr)
			a.mov(regArg0, ^uint64(eFault-1)) // -EFAULT
			a.ldr(x13, x10, from+8)
			a.subImm(x13, x13, 8)
			skip = a.branch(brTBNZ, x13, 63, -1)
			a.ldr(x13, x10, from+16)
		case r.Abs:
			a.mov(x13, r.Addr)
		default:
			loadThreadReg(a, x13, r.Reg)
		}
		a.mov(x14, uint64(int64(r.Off)))
		a.add(x13, x13, x14)
		a.str(x13, x10, addr)
		a.addImm(x14, x10, data) // the local iovec: the record,
		a.str(x14, x10, iov)
		a.mov(x14, uint64(r.Len))
		a.str(x14, x10, iov+8)
		a.str(x13, x10, iov+16) // the remote one: the address
		a.str(x14, x10, iov+24)
		call := len(a.w)
		a.mov(x14, s.Rings)
		a.ldrW(regArg0, x14, ring.PidOff)
		a.addImm(1, x10, iov)
		a.mov(2, 1)
		a.addImm(3, x10, iov+16)
		a.mov(4, 1)
		a.mov(5, 0)
		a.mov(8, sysProcessVMReadv)
		a.emit(a64Svc)
		a.addImm(x14, regArg0, eIntr)
		a.branch(brCBZ, x14, 0, call) // a signal came first: again
		if skip >= 0 {
			a.land(skip)
		}
		a.str(regArg0, x10, res)
		at += r.Words()
	}
	return nil
}

// loadStackWord appends the load into x dst of the word w words above
// the thread's sp.
func loadStackWord(a *a64, dst uint32, w int) {
	if off := a.frameAbove + uint64(8*w); a.frameAbove > 0 && off < 8<<12 {
		a.ldr(dst, xFP, off)
		return
	} else if a.frameAbove > 0 {
		a.addImm(dst, xFP, a.frameAbove)
		a.ldr(dst, dst, uint64(8*w))
		return
	}
	a.ldr(dst, xSP, uint64(rsArea+8*w))
}

// loadThreadReg appends the load into x dst of the thread's register at
// byte offset off of unix.PtraceRegs, as it was at the probe: from the
// stub's saves, sp above them, or the register itself.
func loadThreadReg(a *a64, dst uint32, off int) {
	switch n := uint32(off / 8); {
	case a.frameAbove > 0 && n == 31:
		a.addImm(dst, xFP, a.frameAbove)
	case a.frameAbove > 0 && n == xLR && a.frameSigned:
		// Stripped of its signature: x30, the stub's scratch (its own
		// was saved), is the one register xpaclri strips.
		a.ldr(xLR, xFP, 8)
		a.emit(a64Xpaclri)
		a.movReg(dst, xLR)
	case a.frameAbove > 0 && (n == xFP || n == xLR):
		a.ldr(dst, xFP, uint64(8*(n-xFP))) // the frame record
	case n == 31:
		a.addImm(dst, xSP, rsArea)
	case slices.Index(rsSaved, n) >= 0:
		a.ldr(dst, xSP, uint64(8*slices.Index(rsSaved, n)))
	default:
		a.movReg(dst, n)
	}
}
