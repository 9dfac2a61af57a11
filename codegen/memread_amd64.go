package codegen

import (
	"encoding/binary"

	"github.com/probedbg/probe/ring"
)

// Memory a record stub reads for a fetch-arg like +OFF(%REG) or
// +OFF(%REG):string. Where the address lies in memory the tracer saw
// readable (a table it keeps in the rings' header page, ring.MapsOff) the
// stub copies it itself (rep movsb), as much of it as the readable range
// holds. Else, or while the tracer writes the table, or when it has not
// looked for a while (ring.MapBeatOff: it may be gone, killed), the stub
// copies it with process_vm_readv on its own process, which faults
// nothing: a bad address gives -EFAULT (and a read across into an
// unmapped page, the bytes before it), the same answer the tracer's own
// read would give. A range unmapped since the tracer's last look faults
// the stub's own copy: the fault stops the thread (the tracer lives: its
// look is recent), and the tracer sends it to the system call instead
// (Fixup), as the kernel's exception table sends a faulting
// copy_from_user to its fix-up.

// Fixup says where a thread whose copy of memory faulted at rip, in the
// stub s placed at at, goes on: that read's system call, which faults
// nothing. false: rip is no copy of s.
func (s *RecordStub) Fixup(at, rip uint64) (uint64, bool) {
	if _, err := s.Code(at); err != nil {
		return 0, false
	}
	for _, f := range s.fixups {
		if rip == at+uint64(f.copy) {
			return at + uint64(f.slow), true
		}
	}
	return 0, false
}

// Where copyReads parks what the system call would take, below %rsp.
const (
	parkRecord = -8
	parkStamp  = -16
	parkRing   = -24
)

// sysProcessVMReadv is process_vm_readv's number on x86-64.
const sysProcessVMReadv = 310

// copyReads appends, for a stub whose record is at %rsi, the reads into
// the record. The record's address, the commit stamp (%r9) and the ring
// (%r10, for the hook routine after) wait in the stub's own red zone
// meanwhile, below its save area (parked): the system call takes every
// argument register, and nothing pushes in between (a signal frame goes
// below the red zone). Not in the thread's red zone: a probe inside a
// function has the function's data there (gcc -O0's locals of a leaf).
func (s *RecordStub) copyReads(a *asm, byOff map[int]int) error {
	a.storeM(regRSI, regRSP, parkRecord)
	a.storeM(regR9, regRSP, parkStamp)
	a.storeM(regR10, regRSP, parkRing)
	at := s.values() // the first read's word
	iov := int32(s.Len() - 8*iovWords)
	starts := make([]int, len(s.Reads)) // each read's first word
	s.fixups = s.fixups[:0]
	for i, r := range s.Reads {
		starts[i] = at
		reg, ok := byOff[r.Reg]
		if err := s.checkRead(i, ok && reg <= regR15); err != nil {
			return err
		}
		addr, res, data := int32(ring.RecordHeader+8*at), int32(ring.RecordHeader+8*at+8), int32(ring.RecordHeader+8*at+16)
		var skip int
		switch {
		case r.Via > 0:
			// The pointer, if its read got all 8 bytes; else this read
			// faults too, unread.
			from := int32(ring.RecordHeader + 8*starts[r.Via-1])
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
		default:
			a.loadThreadReg(reg)
		}
		a.leaM(regRAX, regRAX, r.Off)
		a.storeM(regRAX, regRSI, addr)
		done := s.copyDirect(a, r, data)
		// The system call: the record and the address again (a faulted
		// copy comes here with neither).
		slow := len(a.b)
		s.fixups[len(s.fixups)-1].slow = slow
		a.loadM(regRSI, regRSP, parkRecord)
		a.loadM(regRAX, regRSI, addr)
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
		a.raw(0x8b, 0x78, ring.PidOff) // mov ring.PidOff(%rax),%edi
		a.leaM(regR10, regRSI, iov+16) // the remote iovec
		a.leaM(regRSI, regRSI, iov)    // the local one
		a.raw(0xba, 1, 0, 0, 0)        // mov $1,%edx
		a.raw(0x41, 0xb8, 1, 0, 0, 0)  // mov $1,%r8d
		a.raw(0x45, 0x31, 0xc9)        // xor %r9d,%r9d
		a.raw(0xb8)                    // mov $sysProcessVMReadv,%eax
		a.b = binary.LittleEndian.AppendUint32(a.b, sysProcessVMReadv)
		a.raw(0x0f, 0x05)                   // syscall
		a.loadM(regRSI, regRSP, parkRecord) // the record
		a.raw(0x48, 0x83, 0xf8, 0xfc)       // cmp $-EINTR,%rax
		a.jccBack(ccE, call)                // a signal came first: again
		if skip != 0 {
			a.land(skip)
		}
		a.land(done)
		a.storeM(regRAX, regRSI, res)
		at += r.Words()
	}
	a.loadM(regR9, regRSP, parkStamp)
	a.loadM(regR10, regRSP, parkRing)
	return nil
}

// copyDirect appends the stub's own copy of read r, for the address in
// %rax, into the record (at %rsi) at data: where the table says the
// address is readable, the bytes up to the end of its range, at most
// r.Len, their count in %rax, and a jump to the returned place (the
// result's store). Where the table cannot say, it goes on after the code
// it appends (the system call); so does a copy the table changed under.
// It notes the copy in s.fixups (the system call's place is for the
// caller to set).
func (s *RecordStub) copyDirect(a *asm, r MemRead, data int32) (done int) {
	disp8 := func(op []byte, modrmReg, base, disp int) { // REX.W op modrm(disp8)
		a.raw(0x48 | byte(modrmReg>>3&1)<<2 | byte(base>>3&1))
		a.raw(op...)
		a.raw(0x40|byte(modrmReg&7)<<3|byte(base&7), byte(disp))
	}
	var slows []int
	a.raw(0x49, 0x89, 0xc2) // mov %rax,%r10: the address
	a.raw(0x49, 0xb8)       // movabs $Rings,%r8
	a.b = binary.LittleEndian.AppendUint64(a.b, s.Rings)
	disp8([]byte{0x8b}, regR9, regR8, ring.MapGenOff) // mov Gen(%r8),%r9
	a.raw(0x41, 0xf6, 0xc1, 0x01)                     // test $1,%r9b: being written
	slows = append(slows, a.jcc(ccNE))
	disp8([]byte{0x8b}, regRCX, regRSI, 16)                // mov 16(%rsi),%rcx: the record's TSC
	disp8([]byte{0x2b}, regRCX, regR8, ring.MapBeatOff)    // sub Beat(%r8),%rcx
	disp8([]byte{0x3b}, regRCX, regR8, ring.MapBeatMaxOff) // cmp BeatMax(%r8),%rcx
	slows = append(slows, a.jcc(ccG))                      // the tracer has not looked for too long
	// A binary search of the ranges for the address (%r10): lo %rdx,
	// hi %rcx, mid %r11; the range found at (%rdx).
	a.raw(0x31, 0xd2)                                    // xor %edx,%edx
	disp8([]byte{0x8b}, regRCX, regR8, ring.MapCountOff) // mov Count(%r8),%rcx
	search := len(a.b)
	a.raw(0x48, 0x39, 0xca) // cmp %rcx,%rdx
	slows = append(slows, a.jcc(ccAE))
	a.raw(0x4c, 0x8d, 0x1c, 0x0a)                 // lea (%rdx,%rcx),%r11
	a.raw(0x49, 0xd1, 0xeb)                       // shr $1,%r11
	a.raw(0x4c, 0x89, 0xd8)                       // mov %r11,%rax
	a.raw(0x48, 0xc1, 0xe0, 0x04)                 // shl $4,%rax
	a.raw(0x4d, 0x3b, 0x54, 0x00, ring.MapsOff+8) // cmp Maps+8(%r8,%rax),%r10: at or past its end?
	right := a.jcc(ccAE)
	a.raw(0x4d, 0x3b, 0x54, 0x00, ring.MapsOff) // cmp Maps(%r8,%rax),%r10: at or past its start?
	found := a.jcc(ccAE)
	a.raw(0x4c, 0x89, 0xd9) // mov %r11,%rcx: below it
	a.jccBack(0, search)
	a.land(right)
	a.raw(0x49, 0x8d, 0x53, 0x01) // lea 1(%r11),%rdx: above it
	a.jccBack(0, search)
	a.land(found)
	a.raw(0x49, 0x8d, 0x54, 0x00, ring.MapsOff) // lea Maps(%r8,%rax),%rdx
	a.raw(0x48, 0x8b, 0x4a, 0x08)               // mov 8(%rdx),%rcx
	a.raw(0x4c, 0x29, 0xd1)                     // sub %r10,%rcx: what the range holds from there
	a.raw(0xb8)                                 // mov $Len,%eax
	a.b = binary.LittleEndian.AppendUint32(a.b, uint32(r.Len))
	a.raw(0x48, 0x39, 0xc1)       // cmp %rax,%rcx
	a.raw(0x48, 0x0f, 0x47, 0xc8) // cmova %rax,%rcx: no more than Len
	a.raw(0x48, 0x89, 0xc8)       // mov %rcx,%rax: the count
	a.leaM(regRDI, regRSI, data)  // lea data(%rsi),%rdi
	a.raw(0x4c, 0x89, 0xd6)       // mov %r10,%rsi
	a.raw(0xfc)                   // cld (the entry's ABI has it clear; the stub's popfq puts it back)
	s.fixups = append(s.fixups, fixup{copy: len(a.b)})
	a.raw(0xf3, 0xa4)                                 // rep movsb: faults where a range went away
	a.loadM(regRSI, regRSP, parkRecord)               // the record
	disp8([]byte{0x3b}, regR9, regR8, ring.MapGenOff) // cmp Gen(%r8),%r9
	slows = append(slows, a.jcc(ccNE))                // the table changed meanwhile: again, by the system call
	done = a.jmpFwd()
	for _, at := range slows {
		a.land(at)
	}
	return done
}
