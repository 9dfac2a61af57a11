package output

import "testing"

// TestDuration: trace_print_graph_duration's text and trace_find_mark's
// mark, worked out by hand from the kernel's code.
func TestDuration(t *testing.T) {
	for _, c := range []struct {
		ns   int64
		text string
		mark byte
	}{
		{0, "0.000 us    ", ' '},
		{999, "0.999 us    ", ' '},
		{1000, "1.000 us    ", ' '},
		{10000, "10.000 us   ", ' '}, // marks need strictly more
		{10001, "10.001 us   ", '+'},
		{100000, "100.000 us  ", '+'},
		{100001, "100.001 us  ", '!'},
		{1000001, "1000.001 us ", '#'},
		{12345678, "12345.67 us ", '*'},   // 5 digits of us leave room for 2 of ns
		{123456789, "123456.7 us ", '@'},  // 6 leave room for 1
		{1000000000, "1000000 us  ", '@'}, // 7 leave none, and no dot
		{1234567890, "1234567 us  ", '$'},
		{1234567890123, "1234567890 us ", '$'}, // wider than the column: no padding
		{-5, "0.000 us    ", ' '},
	} {
		if got := string(appendDuration([]byte("x"), c.ns)); got != "x"+c.text {
			t.Errorf("appendDuration(%d) = %q, want %q", c.ns, got, "x"+c.text)
		}
		if got := durationMark(c.ns); got != c.mark {
			t.Errorf("durationMark(%d) = %q, want %q", c.ns, got, c.mark)
		}
	}
}
