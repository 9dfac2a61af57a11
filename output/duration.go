package output

import "strconv"

// appendDuration appends a duration of ns nanoseconds as the kernel's
// trace_print_graph_duration does, so that function_graph and profile
// columns line up as in ftrace: microseconds, a dot and as many nanosecond
// digits as keep the number within 7 digits, " us ", then spaces until 8
// characters of number were used.
func appendDuration(dst []byte, ns int64) []byte {
	// The kernel's durations are unsigned; a negative one can only come
	// from a bad record, and shows as 0 rather than as a huge number.
	ns = max(ns, 0)
	start := len(dst)
	dst = strconv.AppendInt(dst, ns/1000, 10)
	if n := len(dst) - start; n < 7 {
		// The kernel snprintfs "%03lu" into min(5, 8-n) bytes, the NUL
		// included: 3 digits, fewer once the microseconds are long.
		rem := ns % 1000
		digits := [3]byte{byte('0' + rem/100), byte('0' + rem/10%10), byte('0' + rem%10)}
		dst = append(dst, '.')
		dst = append(dst, digits[:min(3, 7-n)]...)
	}
	width := len(dst) - start
	dst = append(dst, " us "...)
	return appendSpaces(dst, 8-width)
}

// durationMarks are the kernel's trace_find_mark thresholds: a call that
// took strictly longer than over gets mark in front of its duration.
var durationMarks = [...]struct {
	over int64
	mark byte
}{
	{1e9, '$'}, // 1 s
	{1e8, '@'}, // 100 ms
	{1e7, '*'}, // 10 ms
	{1e6, '#'}, // 1000 us
	{1e5, '!'}, // 100 us
	{1e4, '+'}, // 10 us
}

// durationMark returns the character that flags a long call, or a space.
func durationMark(ns int64) byte {
	for _, m := range durationMarks {
		if ns > m.over {
			return m.mark
		}
	}
	return ' '
}
