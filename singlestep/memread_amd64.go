package singlestep

import (
	"encoding/binary"
	"fmt"
	"slices"
)

// Memory a record stub reads for a fetch-arg like +OFF(%REG) or
// +OFF(%REG):string: the stub copies it into the record with
// process_vm_readv on its own process, which faults nothing: a bad
// address gives -EFAULT (and a read across into an unmapped page, the
// bytes before it), the same answer the tracer's own read would give.
// One system call per read, and no stop: the rare slow path the record
// code can afford, next to a trap's two context switches.

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

// iovWords are the record's scratch words for process_vm_readv's two
// iovecs, after the reads.
const iovWords = 4

// sysProcessVMReadv is process_vm_readv's number on x86-64.
const sysProcessVMReadv = 310

// copyReads appends, for a stub whose record is at %rsi, the reads into
// the record. The record's address and the commit stamp (%r9) wait in the
// thread's red zone meanwhile, at the entry free for the function to come
// (rsSP-8, rsSP-16): the system call takes every argument register.
func (s *RecordStub) copyReads(a *asm, byOff map[int]int) error {
	a.storeM(regRSI, regRSP, rsSP-8)
	a.storeM(regR9, regRSP, rsSP-16)
	at := s.values() // the first read's word
	iov := int32(s.Len() - 8*iovWords)
	starts := make([]int, len(s.Reads)) // each read's first word
	for i, r := range s.Reads {
		starts[i] = at
		reg, ok := byOff[r.Reg]
		switch {
		case r.Len <= 0 || r.Len > MemReadMax:
			return fmt.Errorf("read of %d bytes: not recordable", r.Len)
		case r.Via > i || r.Via > 0 && s.Reads[r.Via-1].Len < 8:
			return fmt.Errorf("read %d: based on read %d, not an earlier pointer", i, r.Via-1)
		case r.Via == 0 && !r.Abs && (!ok || reg > regR15):
			return fmt.Errorf("read of %d bytes at register %d: not recordable", r.Len, r.Reg)
		}
		addr, res, data := int32(RecordHeader+8*at), int32(RecordHeader+8*at+8), int32(RecordHeader+8*at+16)
		var skip int
		switch saved := slices.Index(rsSaved, reg); {
		case r.Via > 0:
			// The pointer, if its read got all 8 bytes; else this read
			// faults too, unread.
			from := int32(RecordHeader + 8*starts[r.Via-1])
			a.mem([]byte{0xc7}, 0, regRSI, addr) // movq $0,addr(%rsi): no address, unless read
			a.b = binary.LittleEndian.AppendUint32(a.b, 0)
			a.raw(0x48, 0xc7, 0xc0, 0xf2, 0xff, 0xff, 0xff) // mov $-EFAULT,%rax
			a.raw(0x48, 0x83, 0xbe)                         // cmpq $8,res(%rsi)
			a.b = binary.LittleEndian.AppendUint32(a.b, uint32(from+8))
			a.raw(8)
			skip = a.jcc(ccL)
			a.loadM(regRAX, regRSI, from+16)
		case r.Abs:
			a.raw(0x48, 0xb8) // movabs $Addr,%rax
			a.b = binary.LittleEndian.AppendUint64(a.b, r.Addr)
		case saved >= 0:
			a.loadStack(8 * saved)
		case reg == regRSP:
			a.leaM(regRAX, regRSP, rsSP)
		default: // mov %reg,%rax
			a.raw(0x48|byte(reg>>3&1)<<2, 0x89, 0xc0|byte(reg&7)<<3)
		}
		a.leaM(regRAX, regRAX, r.Off)
		a.storeM(regRAX, regRSI, addr)
		a.storeM(regRAX, regRSI, iov+16) // the remote iovec: the address,
		a.leaM(regRCX, regRSI, data)
		a.storeM(regRCX, regRSI, iov) // the local one: the record
		a.raw(0xb9)                   // mov $Len,%ecx
		a.b = binary.LittleEndian.AppendUint32(a.b, uint32(r.Len))
		a.storeM(regRCX, regRSI, iov+8)
		a.storeM(regRCX, regRSI, iov+24)
		call := len(a.b)
		a.raw(0x48, 0xb8) // movabs $Rings,%rax
		a.b = binary.LittleEndian.AppendUint64(a.b, s.Rings)
		a.raw(0x8b, 0x78, RingsPid)    // mov RingsPid(%rax),%edi
		a.leaM(regR10, regRSI, iov+16) // the remote iovec
		a.leaM(regRSI, regRSI, iov)    // the local one
		a.raw(0xba, 1, 0, 0, 0)        // mov $1,%edx
		a.raw(0x41, 0xb8, 1, 0, 0, 0)  // mov $1,%r8d
		a.raw(0x45, 0x31, 0xc9)        // xor %r9d,%r9d
		a.raw(0xb8)                    // mov $sysProcessVMReadv,%eax
		a.b = binary.LittleEndian.AppendUint32(a.b, sysProcessVMReadv)
		a.raw(0x0f, 0x05)               // syscall
		a.loadM(regRSI, regRSP, rsSP-8) // the record
		a.raw(0x48, 0x83, 0xf8, 0xfc)   // cmp $-EINTR,%rax
		a.jccBack(ccE, call)            // a signal came first: again
		if skip != 0 {
			a.land(skip)
		}
		a.storeM(regRAX, regRSI, res)
		at += r.Words()
	}
	a.loadM(regR9, regRSP, rsSP-16)
	return nil
}
