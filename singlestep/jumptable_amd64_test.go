package singlestep

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
)

// TestJumpTableFlow: a jump table whose base is set before its bound
// check, in a loop's preheader or at the function's start, is read when
// every path of the function that reaches the dispatch sets the base
// with a lea of a table (one of a few) and nothing writes it after;
// refused when a path writes the base, a call between may change it,
// a path from the start skips the lea, or a table cannot be read or
// sends a branch into the middle of an instruction.
func TestJumpTableFlow(t *testing.T) {
	const fn = 0x401000
	// lea T(%rip),%rdi; loop: movzbl (%rdx),%ecx; cmp $2,%cl; ja out;
	// movzbl %cl,%ecx; movslq (%rdi,%rcx,4),%rcx; add %rdi,%rcx;
	// jmp *%rcx; c0: add $1,%rdx; jmp loop; c1: add $2,%rdx; jmp loop;
	// c2: nop; out: ret (gcc's correctgraylist in Lua).
	loop := "48 8d 3d f9 00 00 00 0f b6 0a 80 f9 02 77 19 0f b6 c9 48 63 0c 8f 48 01 f9 ff e1 " +
		"48 83 c2 01 eb e6 48 83 c2 02 eb e0 90 c3"
	loopCases := []uint64{fn + 0x1b, fn + 0x21, fn + 0x27}
	// push %rbx; lea T(%rip),%rbx; loop: call f; cmp $2,%al; ja out;
	// movzbl %al,%eax; movslq (%rbx,%rax,4),%rax; add %rbx,%rax;
	// jmp *%rax; c0, c1, c2 as above; out: pop %rbx; ret; f: ret (llex).
	saved := "53 48 8d 1d f8 00 00 00 e8 1f 00 00 00 3c 02 77 19 0f b6 c0 48 63 04 83 48 01 d8 ff e0 " +
		"48 83 c2 01 eb e5 48 83 c2 02 eb df 90 5b c3 c3"
	savedCases := []uint64{fn + 0x1d, fn + 0x23, fn + 0x29}
	// The same with the base in %rdi, which the call may change.
	savedRdi := "53 48 8d 3d f8 00 00 00 e8 1f 00 00 00 3c 02 77 19 0f b6 c0 48 63 04 87 48 01 f8 ff e0 " +
		"48 83 c2 01 eb e5 48 83 c2 02 eb df 90 5b c3 c3"
	// test %esi,%esi; je other; lea T(%rip),%rdi; jmp check; other:
	// lea U(%rip),%rdi; check: cmp $1,%eax; ja out; movslq
	// (%rdi,%rax,4),%rax; add %rdi,%rax; jmp *%rax; c0: nop; c1: nop;
	// out: ret: one of two tables.
	two := "85 f6 74 09 48 8d 3d f5 00 00 00 eb 07 48 8d 3d ec 01 00 00 83 f8 01 77 0b 48 63 04 87 48 01 f8 ff e0 90 90 c3"
	twoT, twoU := []uint64{fn + 0x22, fn + 0x23}, []uint64{fn + 0x23, fn + 0x24}
	const tableT, tableU = fn + 0x100, fn + 0x200

	tests := []struct {
		name   string
		code   string
		tables map[uint64][]uint64 // each table's entries (as targets)
		want   []uint64            // the targets read; nil: refused
	}{
		{"a caller-saved base set before the loop", loop, map[uint64][]uint64{tableT: loopCases}, loopCases},
		{"a callee-saved base set at the start, a call in the loop", saved, map[uint64][]uint64{tableT: savedCases}, savedCases},
		{"one of two tables", two, map[uint64][]uint64{tableT: twoT, tableU: twoU}, slices.Concat(twoT, twoU)},
		{"the base written on a path back to the dispatch (c0: mov %rdx,%rdi)",
			patchHex(t, loop, 0x1b, "48 89 d7 90"), map[uint64][]uint64{tableT: loopCases}, nil},
		{"a call between that may change a caller-saved base", savedRdi, map[uint64][]uint64{tableT: savedCases}, nil},
		{"a path from the start without the lea", patchHex(t, two, 0x0d, "0f 1f 80 00 00 00 00"), map[uint64][]uint64{tableT: twoT}, nil},
		{"a table that cannot be read (outside the module)", two, map[uint64][]uint64{tableT: twoT}, nil},
		{"an entry inside an instruction", loop, map[uint64][]uint64{tableT: {fn + 0x1b, fn + 0x08, fn + 0x27}}, nil},
		{"a 32-bit lea of the base", patchHex(t, loop, 0, "8d 3d f9 00 00 00 90"), map[uint64][]uint64{tableT: loopCases, tableT - 1: loopCases}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			read := func(addr, n uint64) ([]byte, error) {
				entries, ok := tc.tables[addr]
				if !ok {
					return nil, errors.New("not in the module")
				}
				if n != uint64(len(entries))*4 {
					t.Fatalf("read %d bytes at %#x, want its %d entries", n, addr, len(entries))
				}
				var b []byte
				for _, e := range entries {
					b = binary.LittleEndian.AppendUint32(b, uint32(int32(e-addr)))
				}
				return b, nil
			}
			checkDispatches(t, tc.code, fn, read, tc.want)
		})
	}
}

// TestJumpTableAbsolute: a switch's table of addresses in a program not
// built as PIE (`jmp *TABLE(,%idx,8)`, its index loaded after the bound
// check from the memory the cmp read) is read like one of offsets.
func TestJumpTableAbsolute(t *testing.T) {
	const fn = 0x401000
	const table = fn + 0x100
	// cmpl $2,0x8(%rsi); ja out; mov 0x8(%rsi),%edx; jmp *T(,%rdx,8);
	// c0: nop; c1: nop; c2: nop; out: ret (Python's PyMember_GetOne).
	code := fmt.Sprintf("83 7e 08 02 77 0d 8b 56 08 ff 24 d5 % x 90 90 90 c3", binary.LittleEndian.AppendUint32(nil, table))
	cases := []uint64{fn + 16, fn + 17, fn + 18}
	read := func(addr, n uint64) ([]byte, error) {
		if addr != table || n != uint64(len(cases))*8 {
			return nil, fmt.Errorf("read %d bytes at %#x, want the table's %d entries", n, addr, len(cases))
		}
		var b []byte
		for _, c := range cases {
			b = binary.LittleEndian.AppendUint64(b, c)
		}
		return b, nil
	}
	checkDispatches(t, code, fn, read, cases)
	// No bound check (nops for the ja).
	checkDispatches(t, patchHex(t, code, 4, "90 90"), fn, read, nil)
}

// TestFunctionFlowUnknown: an indirect jump that is no jump table is
// kept as unknown beside the tables found (AnalyzeFunction), and refuses
// the function unless the caller says it is its own (BranchesFor).
func TestFunctionFlowUnknown(t *testing.T) {
	const fn = 0x401000
	// The one-of-two-tables function of TestJumpTableFlow, then
	// `jmp *0x0(%rip)` at +0x25.
	code := hx(t, "85 f6 74 09 48 8d 3d f5 00 00 00 eb 07 48 8d 3d ec 01 00 00 83 f8 01 77 0b 48 63 04 87 48 01 f8 ff e0 90 90 c3 ff 25 00 00 00 00")
	tables := map[uint64][]uint64{fn + 0x100: {fn + 0x22, fn + 0x23}, fn + 0x200: {fn + 0x23, fn + 0x24}}
	read := func(addr, n uint64) ([]byte, error) {
		var b []byte
		for _, e := range tables[addr] {
			b = binary.LittleEndian.AppendUint32(b, uint32(int32(e-addr)))
		}
		if len(b) == 0 || n != uint64(len(b)) {
			return nil, errors.New("not a table")
		}
		return b, nil
	}
	flow, err := AnalyzeFunction(code, fn, read)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(flow.Unknown, []uint64{fn + 0x25}) || len(flow.Branches) != 3+4 {
		t.Fatalf("flow %+v; want the 3 direct branches, the 4 entries, and the jmp at +0x25 unknown", flow)
	}
	if _, err := flow.BranchesFor(nil); err == nil || !strings.Contains(err.Error(), "0x401025: the function has an indirect jump") {
		t.Fatalf("BranchesFor(nil): %v, want the jmp at +0x25 refusing it", err)
	}
	own := func(at uint64) bool { return at == fn+0x25 }
	if b, err := flow.BranchesFor(own); err != nil || !slices.Equal(b, flow.Branches) {
		t.Fatalf("BranchesFor(own): %v, %v; want its branches", b, err)
	}
	moved := flow.Moved(0x1000)
	if moved.Unknown[0] != fn+0x1025 || moved.Branches[0] != (Branch{From: fn + 0x1002, To: fn + 0x100d}) {
		t.Fatalf("Moved: %+v", moved)
	}
}

// checkDispatches checks the targets FunctionBranches finds for the
// indirect jmps of code (at fn), in order, against want; nil: the
// function refused for an indirect jump.
func checkDispatches(t *testing.T, code string, fn uint64, read TableReader, want []uint64) {
	t.Helper()
	branches, err := FunctionBranches(hx(t, code), fn, read, nil)
	if want == nil {
		if err == nil || !strings.Contains(err.Error(), "indirect jump") {
			t.Fatalf("FunctionBranches: %#x, %v; want refused", branches, err)
		}
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	var got []uint64
	for _, b := range branches {
		if hx(t, code)[b.From-fn] == 0xff {
			got = append(got, b.To)
		}
	}
	if !slices.Equal(got, want) {
		t.Fatalf("the tables' targets: %#x, want %#x", got, want)
	}
}

// patchHex is code (hex bytes) with b's bytes written over it at at.
func patchHex(t *testing.T, code string, at int, b string) string {
	c := hx(t, code)
	copy(c[at:], hx(t, b))
	return fmt.Sprintf("% x", c)
}
