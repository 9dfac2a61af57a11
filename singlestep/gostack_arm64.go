package singlestep

import "encoding/binary"

// GoStackCheckEnd returns the offset, in a Go function's code, of the
// first instruction after its stack-bound check (`ldr x16, [x28, #16]`,
// a compare of sp or sp less the frame with it, `b.ls morestack`), or 0
// if it has none. A function that grows its stack restarts from its
// entry, so an entry probe placed there would fire twice for one call;
// after the check it fires once, and x30 still holds the return address.
func GoStackCheckEnd(code []byte) int {
	const window = 6 // instructions: the check is the prologue's start
	loaded := false
	for off := 0; off+4 <= len(code) && off < 4*window; off += 4 {
		w := binary.LittleEndian.Uint32(code[off:])
		switch {
		case w&0xffffffe0 == 0xf9400b80: // ldr xN, [x28, #16]: g.stackguard0
			loaded = true
		case loaded && w&0xff00001f == 0x54000009: // b.ls
			return off + 4
		}
	}
	return 0
}
