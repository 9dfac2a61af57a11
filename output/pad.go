package output

import "strconv"

// The columns of a trace line, as the kernel's printf formats them, without
// fmt: the stream formats every record, and fmt's boxing of each argument
// was most of the allocations of a trace (and so of the garbage collections
// that stop the ptrace thread).

// appendRight appends s right-aligned in width columns ("%*s").
func appendRight[T string | []byte](dst []byte, s T, width int) []byte {
	return append(appendSpaces(dst, width-len(s)), s...)
}

// appendLeft appends s left-aligned in width columns ("%-*s").
func appendLeft[T string | []byte](dst []byte, s T, width int) []byte {
	return appendSpaces(append(dst, s...), width-len(s))
}

// appendIntRight appends v right-aligned in width columns ("%*d").
func appendIntRight(dst []byte, v int64, width int) []byte {
	var buf [20]byte
	return appendRight(dst, strconv.AppendInt(buf[:0], v, 10), width)
}

// appendIntLeft appends v left-aligned in width columns ("%-*d").
func appendIntLeft(dst []byte, v int64, width int) []byte {
	var buf [20]byte
	return appendLeft(dst, strconv.AppendInt(buf[:0], v, 10), width)
}

// appendIntZero appends v in width columns, zeros after the sign ("%0*d").
func appendIntZero(dst []byte, v int64, width int) []byte {
	var buf [20]byte
	d := strconv.AppendInt(buf[:0], v, 10)
	if v < 0 {
		dst, d = append(dst, '-'), d[1:]
		width--
	}
	for range width - len(d) {
		dst = append(dst, '0')
	}
	return append(dst, d...)
}
