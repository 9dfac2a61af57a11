package singlestep

import "encoding/binary"

// DirectBranch decodes a branch with a 32-bit displacement at the start
// of code (jmp, call, jcc rel32: what detours, stubs and re-aimed
// branches are written as): its target and length.
func DirectBranch(code []byte, addr uint64) (target uint64, length int, ok bool) {
	switch {
	case len(code) >= 5 && (code[0] == 0xe9 || code[0] == 0xe8):
		length = 5
	case len(code) >= 6 && code[0] == 0x0f && code[1]&0xf0 == 0x80:
		length = 6
	default:
		return 0, 0, false
	}
	rel := int32(binary.LittleEndian.Uint32(code[length-4:]))
	return addr + uint64(length) + uint64(int64(rel)), length, true
}

// InsnAlign is what instruction addresses are multiples of.
const InsnAlign = 1

// BranchReach is how many bytes before a changed byte a branch whose
// displacement holds it may start.
const BranchReach = 5
