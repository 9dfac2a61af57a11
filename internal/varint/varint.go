// Package varint reads encoding/binary's varints off a byte slice,
// noting the first that cannot be read instead of failing each read:
// the recording's readers check once, after a record.
package varint

import "encoding/binary"

// Reader reads from B; Bad is set at the first varint that cannot be
// read, and B emptied: every read after it is 0.
type Reader struct {
	B   []byte
	Bad bool
}

// Uvarint reads an unsigned varint.
func (r *Reader) Uvarint() uint64 {
	v, n := binary.Uvarint(r.B)
	if n <= 0 {
		r.Bad, r.B = true, nil
		return 0
	}
	r.B = r.B[n:]
	return v
}

// Varint reads a signed (zigzag) varint.
func (r *Reader) Varint() int64 {
	v, n := binary.Varint(r.B)
	if n <= 0 {
		r.Bad, r.B = true, nil
		return 0
	}
	r.B = r.B[n:]
	return v
}
