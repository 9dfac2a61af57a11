package probe

import (
	"encoding/binary"
	"fmt"
)

// patchBranchIsOneInsn: the branch at a patched entry (jmp rel32) may
// cover several of the function's instructions.
// patchBranchLen is the length of patchBranch's branch.
const patchBranchLen = 5

const patchBranchIsOneInsn = false

// patchTrampoline is `jmp *0(%rip)` and the address it reads: to to, from
// anywhere.
func patchTrampoline(to uint64) []byte {
	return binary.LittleEndian.AppendUint64([]byte{0xff, 0x25, 0, 0, 0, 0}, to)
}

// patchBranch is `jmp rel32` at from to to.
func patchBranch(from, to uint64) ([]byte, error) {
	rel := int64(to) - int64(from+5)
	if rel != int64(int32(rel)) {
		return nil, fmt.Errorf("the trampoline at %#x is out of a jmp's reach from %#x", to, from)
	}
	return binary.LittleEndian.AppendUint32([]byte{0xe9}, uint32(rel)), nil
}
