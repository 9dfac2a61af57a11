package probe

import (
	"encoding/binary"
	"fmt"
)

// patchBranchIsOneInsn: the branch at a patched entry (b) is one
// instruction, which nothing can land inside.
// patchBranchLen is the length of patchBranch's branch.
const patchBranchLen = 4

const patchBranchIsOneInsn = true

// patchTrampoline is `ldr x16, #8; br x16` and the address it loads: to
// to, from anywhere (x16, IP0, is free at a call; a `bti c` or `paciasp`
// at to accepts a br through it).
func patchTrampoline(to uint64) []byte {
	b := binary.LittleEndian.AppendUint32(nil, 0x58000050)
	b = binary.LittleEndian.AppendUint32(b, 0xd61f0200)
	return binary.LittleEndian.AppendUint64(b, to)
}

// patchBranch is `b` at from to to.
func patchBranch(from, to uint64) ([]byte, error) {
	rel := (int64(to) - int64(from)) >> 2
	if rel >= 1<<25 || rel < -(1<<25) {
		return nil, fmt.Errorf("the trampoline at %#x is out of a b's reach from %#x", to, from)
	}
	return binary.LittleEndian.AppendUint32(nil, 0x14000000|uint32(rel)&(1<<26-1)), nil
}
