package output

import (
	"bytes"
	"testing"
)

func TestWriteStack(t *testing.T) {
	for _, c := range []struct {
		name   string
		stacks []StackUsage
		want   string
	}{{
		name: "threads",
		stacks: []StackUsage{{
			Tid: 4242, Comm: "loop", Used: 2952,
			Frames: []StackFrame{
				{"recurse+0x0/0x2a", 2952},
				{"main+0x1c/0x40", 2888},
				{"__libc_start_call_main+0x7a/0xb0", 2808},
			},
		}, {
			Tid: 4243, Comm: "worker", Used: 96,
			Frames: []StackFrame{{"start_thread+0x9c/0x130", 96}},
		}, {
			Tid: 4244, Comm: "idle",
		}},
		want: `# tracer: stack
#
#  loop-4242: 2952 bytes
        Depth    Size   Location    (3 entries)
        -----    ----   --------
  0)     2952      64   recurse+0x0/0x2a
  1)     2888      80   main+0x1c/0x40
  2)     2808    2808   __libc_start_call_main+0x7a/0xb0

#  worker-4243: 96 bytes
        Depth    Size   Location    (1 entries)
        -----    ----   --------
  0)       96      96   start_thread+0x9c/0x130

#  idle-4244: 0 bytes
        Depth    Size   Location    (0 entries)
        -----    ----   --------
`,
	}, {
		name: "none",
		want: "# tracer: stack\n#\n",
	}} {
		t.Run(c.name, func(t *testing.T) {
			var b bytes.Buffer
			if err := WriteStack(&b, c.stacks); err != nil {
				t.Fatal(err)
			}
			if b.String() != c.want {
				t.Errorf("got\n%s\nwant\n%s", b.String(), c.want)
			}
		})
	}
}
