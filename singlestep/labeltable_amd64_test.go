package singlestep

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"testing"
)

// TestLabelTable: a computed goto's table of label addresses (gcc's
// labels as values) is read up to the index's bound (a mask, or a byte),
// each word a target, in the function or out of it; a second dispatch
// reached only through the first's labels is read too (Lua's
// luaV_execute), and one bounded before a jcc or on another path to it
// (CPython's _PyEval_EvalFrameDefault). Refused: no bound, a mask that
// is not 2^n-1, the index written after its bound (in the dispatch, or
// on a path to it), an entry inside an instruction, a table of fewer
// than two of the function's addresses (zeros).
func TestLabelTable(t *testing.T) {
	const fn = 0x401000
	const table = fn + 0x100
	// lea T(%rip),%r14; movzbl (%rdx),%eax; and $3,%eax;
	// mov (%r14,%rax,8),%rax; jmp *%rax; l0: add $1,%rdx;
	// movzbl (%rdx),%eax; and $3,%eax; mov (%r14,%rax,8),%rax;
	// jmp *%rax; l1: add $2,%rdx; jmp l0; l2: nop; l3: ret
	interp := "4c 8d 35 f9 00 00 00 0f b6 02 83 e0 03 49 8b 04 c6 ff e0 " +
		"48 83 c2 01 0f b6 02 83 e0 03 49 8b 04 c6 ff e0 48 83 c2 02 eb ea 90 c3"
	labels := []uint64{fn + 19, fn + 35, fn + 41, fn + 42}
	// movzbl (%rdx),%eax; and $3,%eax; jmp *T(,%rax,8); l0: nop;
	// l1: nop; l2: nop; l3: ret: a program not built as PIE.
	absolute := fmt.Sprintf("0f b6 02 83 e0 03 ff 24 c5 % x 90 90 90 c3", binary.LittleEndian.AppendUint32(nil, table))
	absLabels := []uint64{fn + 13, fn + 14, fn + 15, fn + 16}
	// The same through mov T(,%rax,8),%rax; jmp *%rax.
	loaded := fmt.Sprintf("0f b6 02 83 e0 03 48 8b 04 c5 % x ff e0 90 90 90 c3", binary.LittleEndian.AppendUint32(nil, table))
	loadedLabels := []uint64{fn + 16, fn + 17, fn + 18, fn + 19}
	other := uint64(0x7f0000001000) // an object after the table
	// lea T(%rip),%r14; movzbl (%rdx),%eax; test %esi,%esi; je l;
	// mov (%r14,%rax,8),%rcx; jmp *%rcx; l: movslq %eax,%rax;
	// mov (%r14,%rax,8),%rcx; jmp *%rcx; l0: nop; l1: ret: each
	// dispatch's bound is the movzbl, past a jcc or on the path to l
	// (CPython's).
	elsewhere := "4c 8d 35 f9 00 00 00 0f b6 02 85 f6 74 06 49 8b 0c c6 ff e1 48 63 c0 49 8b 0c c6 ff e1 90 c3"
	byteTable := slices.Concat([]uint64{fn + 29, fn + 30}, slices.Repeat([]uint64{other}, 254))
	// lea T(%rip),%r14; movzbl (%rdx),%eax; test %esi,%esi; je l0;
	// mov (%r14,%rax,8),%rcx; jmp *%rcx; l0: nop; l1: ret; and the same
	// with the je onto the jmp, past the load: %rcx is not an entry there.
	pastLoad := "4c 8d 35 f9 00 00 00 0f b6 02 85 f6 74 06 49 8b 0c c6 ff e1 90 c3"
	pastLoadTable := slices.Concat([]uint64{fn + 20, fn + 21}, slices.Repeat([]uint64{other}, 254))
	tests := []struct {
		name    string
		code    string
		entries []uint64 // the table's words
		want    []uint64 // the targets read; nil: refused
	}{
		{"two dispatches, the second reached through the first's labels", interp, labels, slices.Concat(labels, labels)},
		{"a word of the table outside the function", interp, []uint64{labels[0], labels[1], other, labels[2]}, []uint64{labels[0], labels[1], other, labels[2], labels[0], labels[1], other, labels[2]}},
		{"jmp through the table itself", absolute, absLabels, absLabels},
		{"the table's address in the load", loaded, loadedLabels, loadedLabels},
		{"no bound (a mov for the movzbl, a nop for the and)", patchHex(t, patchHex(t, interp, 7, "8b 02 90"), 10, "0f 1f 00"), labels, nil},
		{"bounded by a movzbl (and $3 a nop): 256 entries, 4 labels", patchHex(t, patchHex(t, interp, 10, "0f 1f 00"), 26, "0f 1f 00"), slices.Concat(labels, slices.Repeat([]uint64{other}, 252)), slices.Repeat(slices.Concat(labels, slices.Repeat([]uint64{other}, 252)), 2)},
		{"a table the file holds as zeros", interp, make([]uint64, 4), nil},
		{"bounded on the paths to the dispatch", elsewhere, byteTable, slices.Concat(byteTable, byteTable)},
		{"written on a path to the dispatch (mov %esi,%eax at l)", patchHex(t, elsewhere, 20, "89 f0 90"), byteTable, nil},
		{"bounded before a jcc that leaves", pastLoad, pastLoadTable, pastLoadTable},
		{"a branch onto the jmp, past the load", patchHex(t, pastLoad, 13, "04"), pastLoadTable, nil},
		{"a mask of 5", patchHex(t, interp, 12, "05"), labels, nil},
		{"the index written after the mask (mov %ecx,%eax)", patchHex(t, interp, 10, "89 c8 90"), labels, nil},
		{"an entry inside an instruction", interp, []uint64{labels[0], fn + 20, labels[2], labels[3]}, nil},
		{"one label, then another object", interp, []uint64{labels[0], other, other, other}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			read := func(addr, n uint64) ([]byte, error) {
				if addr != table {
					return nil, errors.New("not in the module")
				}
				var b []byte
				for _, e := range tc.entries {
					b = binary.LittleEndian.AppendUint64(b, e)
				}
				if n > uint64(len(b)) {
					t.Fatalf("read %d bytes at %#x, past the table's %d", n, addr, len(b))
				}
				return b[:n], nil
			}
			checkDispatches(t, tc.code, fn, read, tc.want)
		})
	}
}
