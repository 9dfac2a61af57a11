package singlestep

import "encoding/binary"

// DirectBranch decodes b, bl or b.cond at the start of code (what
// detours, stubs and re-aimed branches are written as): its target and
// length.
func DirectBranch(code []byte, addr uint64) (target uint64, length int, ok bool) {
	if len(code) < 4 {
		return 0, 0, false
	}
	w := binary.LittleEndian.Uint32(code)
	switch {
	case w&0x7c000000 == 0x14000000: // b, bl
		return addr + uint64(int64(int32(w<<6)>>6)*4), 4, true
	case w&0xff000010 == 0x54000000: // b.cond
		return addr + uint64(int64(int32(w<<8)>>13)*4), 4, true
	}
	return 0, 0, false
}

// InsnAlign is what instruction addresses are multiples of.
const InsnAlign = 4

// BranchReach is how many bytes before a changed byte a branch whose
// displacement holds it may start (it is one word).
const BranchReach = 0
