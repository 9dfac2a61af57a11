package output

import (
	"bufio"
	"fmt"
	"io"
)

// StackUsage is the deepest stack seen on one thread.
type StackUsage struct {
	Tid    int
	Comm   string
	Used   uint64       // bytes of stack in use at the deepest point
	Frames []StackFrame // deepest first
}

// StackFrame is one frame of a StackUsage.
type StackFrame struct {
	Location string // sym+0xoff/0xsize
	Used     uint64 // bytes of stack in use down to this frame
}

// WriteStack writes the stack tracer's report (ftrace's stack_trace), one
// table per thread in the order given:
//
//	#  loop-4242: 2952 bytes
//	        Depth    Size   Location    (3 entries)
//	        -----    ----   --------
//	  0)     2952      64   recurse+0x0/0x2a
func WriteStack(w io.Writer, stacks []StackUsage) error {
	b := bufio.NewWriter(w)
	fmt.Fprintf(b, "# tracer: stack\n#\n")
	for i, s := range stacks {
		if i > 0 {
			b.WriteByte('\n')
		}
		fmt.Fprintf(b, "#  %s-%d: %d bytes\n", s.Comm, s.Tid, s.Used)
		fmt.Fprintf(b, "        Depth    Size   Location    (%d entries)\n", len(s.Frames))
		fmt.Fprintf(b, "        -----    ----   --------\n")
		for j, f := range s.Frames {
			// A frame's size is what it adds to its caller's usage; the
			// outermost frame's caller is not on the list.
			size := int64(f.Used)
			if j+1 < len(s.Frames) {
				size -= int64(s.Frames[j+1].Used)
			}
			fmt.Fprintf(b, "%3d) %8d   %5d   %s\n", j, f.Used, size, f.Location)
		}
	}
	return b.Flush()
}
