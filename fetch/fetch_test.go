//go:build amd64

package fetch

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// fxMem is a fake tracee memory: a byte map; reads of unmapped bytes fail.
// By default a read returns the bytes before the first hole (as
// /proc/PID/mem does); with whole set, any hole fails the whole read.
type fxMem struct {
	m     map[uint64]byte
	whole bool
	reads int
}

var errFxUnmapped = errors.New("unmapped")

func newFxMem() *fxMem { return &fxMem{m: map[uint64]byte{}} }

func (f *fxMem) put(addr uint64, b ...byte) {
	for i, c := range b {
		f.m[addr+uint64(i)] = c
	}
}

func (f *fxMem) putU64(addr, v uint64) {
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], v)
	f.put(addr, b[:]...)
}

func (f *fxMem) putStr(addr uint64, s string) { f.put(addr, append([]byte(s), 0)...) }

func (f *fxMem) ReadAt(p []byte, off int64) (int, error) {
	f.reads++
	for i := range p {
		c, ok := f.m[uint64(off)+uint64(i)]
		if !ok {
			if f.whole {
				return 0, errFxUnmapped
			}
			return i, errFxUnmapped
		}
		p[i] = c
	}
	return len(p), nil
}

func (f *fxMem) WriteAt(p []byte, off int64) (int, error) { return 0, errors.New("read-only") }

// fxVar is a fake DWARF variable.
type fxVar struct {
	raw  uint64
	text string
	err  error
}

func (v fxVar) Read(*HitEnv) (uint64, string, error) { return v.raw, v.text, v.err }

type fxIntVar struct {
	fxVar
	size   int
	signed bool
}

func (v fxIntVar) IntType() (int, bool) { return v.size, v.signed }

var fxVars = map[string]DwarfVar{
	"req":         fxVar{raw: 0x8000, text: "{method=\"GET\",len=5}"},
	"req->method": fxVar{raw: 0x2000, text: `"hi"`},
	"req->len":    fxVar{raw: 0x10005, text: "65541"},
	"n":           fxIntVar{fxVar{raw: 0xfffffffe, text: "-2"}, 4, true},
	"u":           fxVar{raw: 7, text: "7"},
	"a":           fxVar{raw: 1, text: "1"},
	"b":           fxVar{raw: 2, text: "2"},
	"arr[2]":      fxVar{raw: 9, text: "9"},
	"p->a.b[3]":   fxVar{raw: 3, text: "3"},
	"s.field":     fxVar{raw: 4, text: "4"},
	"gone":        fxVar{err: errors.New("optimized out")},
	"argv":        fxVar{raw: 0x6100, text: "0x6100"},
	"a->x":        fxVar{raw: 1, text: "1"},
	"b->x":        fxVar{raw: 2, text: "2"},
}

func fxEnv(ret bool) CompileEnv {
	return CompileEnv{
		Return: ret,
		ResolveSymbol: func(name string) (uint64, error) {
			switch name {
			case "counter":
				return 0x5000, nil
			case "main.total":
				return 0x5100, nil
			}
			return 0, fmt.Errorf("unknown symbol %q", name)
		},
		DWARF: func(expr string) (DwarfVar, error) {
			if v, ok := fxVars[expr]; ok {
				return v, nil
			}
			return nil, fmt.Errorf("no variable %q in scope", expr)
		},
		Params: func() ([]string, error) { return []string{"a", "b"}, nil },
	}
}

func fxHit() (*HitEnv, *fxMem) {
	mem := newFxMem()
	mem.put(0x1000, 0x34, 0x12, 0x78, 0x56)
	mem.putStr(0x2000, "hi")
	mem.putU64(0x3000, 0x3100)
	mem.put(0x3108, 0xf9, 0xff, 0xff, 0xff) // s32 -7
	mem.put(0x30f8, 0x77)
	mem.putU64(0x5000, 0)
	mem.put(0x5004, 42, 0, 0, 0, 0, 0, 0, 0)
	mem.putU64(0x5100, 1234)
	mem.put(0x6000, 1, 0, 2, 0, 3, 0)
	mem.putU64(0x6100, 0x2000)
	mem.putU64(0x6108, 0x6200)
	mem.putU64(0x6110, 0xdead0000)
	mem.putStr(0x6200, "yo")
	mem.putStr(0x6300, "a\nb\x01\"c")
	mem.putU64(0x6400, 0x401000)
	mem.putU64(0x6408, 0x999)
	mem.putU64(0x7000, 0x401234) // return address
	mem.putU64(0x7008, 0x11)
	mem.putU64(0x7010, 0x22)
	mem.putStr(0x8000, "ab")
	regs := &unix.PtraceRegs{
		Rdi: 0xffffffff_00000005,
		Rsi: 0x2000,
		Rdx: 0x3,
		Rcx: 0x4,
		R8:  0x3000,
		R9:  0x6000,
		R10: 0x6100,
		R11: 0xab,
		R12: 0xdead0000,
		Rax: 0x11223344_556677f0,
		Rbx: 0x1000,
		Rsp: 0x7000,
		Rip: 0x401000,
	}
	h := &HitEnv{
		Regs: regs,
		Mem:  mem,
		Comm: "loop",
		Symbolize: func(addr uint64) string {
			if addr >= 0x401000 && addr < 0x401040 {
				return fmt.Sprintf("work+0x%x/0x40", addr-0x401000)
			}
			return ""
		},
	}
	return h, mem
}

func fxRender(t *testing.T, tokens []string, ret bool) string {
	t.Helper()
	a, err := Compile(tokens, fxEnv(ret))
	if err != nil {
		t.Fatalf("Compile(%q): %v", tokens, err)
	}
	h, _ := fxHit()
	fields := a.Fetch(h, nil)
	if len(fields) != a.Len() || len(a.Names()) != a.Len() {
		t.Fatalf("%q: %d fields, Len %d, %d names", tokens, len(fields), a.Len(), len(a.Names()))
	}
	for i, n := range a.Names() {
		if fields[i].Name != n {
			t.Errorf("%q: field %d is %q, Names says %q", tokens, i, fields[i].Name, n)
		}
	}
	return string(AppendFields(nil, fields))
}

func TestFetchArgs(t *testing.T) {
	tests := []struct {
		args string
		ret  bool
		want string
	}{
		// Registers: kernel names, assembler names, parts of registers.
		{args: "x=%di:u32", want: " x=5"},
		{args: "x=%di", want: " x=0xffffffff00000005"},
		{args: "x=%rdi", want: " x=0xffffffff00000005"},
		{args: "x=%edi", want: " x=0x5"},
		{args: "x=%edi:u64", want: " x=5"},
		{args: "x=%ax", want: " x=0x11223344556677f0"},
		{args: "x=%eax:u32", want: " x=1432778736"},
		{args: "x=%al", want: " x=0xf0"},
		{args: "x=%al:s8", want: " x=-16"},
		{args: "x=%ah", want: " x=0x77"},
		{args: "x=%r8d", want: " x=0x3000"},
		{args: "x=%r9w", want: " x=0x6000"},
		{args: "x=%r11b:u8", want: " x=171"},
		{args: "x=%r11l", want: " x=0xab"},
		{args: "x=%ip", want: " x=0x401000"},
		{args: "x=%rip:symbol", want: " x=work+0x0/0x40"},
		{args: "x=%sp", want: " x=0x7000"},
		{args: "x=%flags:x32", want: " x=0x0"},
		// Integer types.
		{args: "x=%di:u8", want: " x=5"},
		{args: "x=%di:s64", want: " x=-4294967291"},
		{args: "x=%di:s32", want: " x=5"},
		{args: "x=%ax:s16", want: " x=30704"},
		{args: "x=%al:s16", want: " x=240"},
		{args: "x=%ax:x16", want: " x=0x77f0"},
		{args: "x=%ax:x8", want: " x=0xf0"},
		{args: "x=%ax:u16", want: " x=30704"},
		{args: "x=%ax:s8", want: " x=-16"},
		{args: "x=%ax:u64", want: " x=1234605616436508656"},
		{args: "x=%ax:x64", want: " x=0x11223344556677f0"},
		// Dereferences, nested, negative offsets, +u.
		{args: "s=+0(%si):string", want: ` s="hi"`},
		{args: "s=+0(%si):ustring", want: ` s="hi"`},
		{args: "s=+1(%si):string", want: ` s="i"`},
		{args: "s=+2(%si):string", want: ` s=""`},
		{args: "v=+8(+0(%r8)):s32", want: " v=-7"},
		{args: "v=+0x8(+0(%r8)):s32", want: " v=-7"},
		{args: "v=-8(+0(%r8)):u8", want: " v=119"},
		{args: "v=-0x8(+0(%r8)):u8", want: " v=119"},
		{args: "v=+u8(+u0(%r8)):s32", want: " v=-7"},
		{args: "v=+0(%r8)", want: " v=0x3100"},
		{args: "v=+0(%bx):u16", want: " v=4660"},
		{args: "v=+0(%bx):x32", want: " v=0x56781234"},
		// Indexed addresses (an SDT note's array element).
		{args: "v=+0(%r10,%cx,2):x64", want: " v=0x6200"},
		{args: "s=+0(+0(%r10,%rcx,2)):string", want: ` s="yo"`},
		{args: "v=+0x100(,%r9,1):x64", want: " v=0x2000"},
		{args: "v=+0x100(,%r9):x64", want: " v=0x2000"},
		// Memory at an address or a symbol.
		{args: "v=@0x1000:u16", want: " v=4660"},
		{args: "v=@4096:u16", want: " v=4660"},
		{args: "v=@0x1002:x8", want: " v=0x78"},
		{args: "v=@counter+4:u32", want: " v=42"},
		{args: "v=@counter+4", want: " v=0x2a"},
		{args: "v=@counter+0x4:u8", want: " v=42"},
		{args: "v=@main.total:u64", want: " v=1234"},
		{args: "v=@counter-0x10:u8", want: " v=(fault)"},
		{args: "v=+8(@0x3000):s32", want: " v=-7"},
		// The stack and arguments.
		{args: "v=$stack", want: " v=0x7000"},
		{args: "v=$stack0", want: " v=0x401234"},
		{args: "v=$stack1", want: " v=0x11"},
		{args: "v=$stack2:u8", want: " v=34"},
		{args: "v=$stack100", want: " v=(fault)"},
		{args: "v=+0($stack):x64", want: " v=0x401234"},
		{args: "v=$arg1:u32", want: " v=5"},
		{args: "v=$arg2", want: " v=0x2000"},
		{args: "v=$arg3 w=$arg4 x=$arg5 y=$arg6", want: " v=0x3 w=0x4 x=0x3000 y=0x6000"},
		{args: "v=$arg7", want: " v=0x11"},
		{args: "v=$arg8:u64", want: " v=34"},
		{args: "v=+0($arg2):string", want: ` v="hi"`},
		// $retval, $comm.
		{args: "r=$retval", ret: true, want: " r=0x11223344556677f0"},
		{args: "r=$retval:s8", ret: true, want: " r=-16"},
		{args: "c=$comm", want: ` c="loop"`},
		{args: "c=$COMM:string", want: ` c="loop"`},
		// Immediates.
		{args: `v=\0x10:u8`, want: " v=16"},
		{args: `v=\16`, want: " v=0x10"},
		{args: `v=\010:u8`, want: " v=8"},
		{args: `v=\-1:s8`, want: " v=-1"},
		{args: `v=\-1`, want: " v=0xffffffffffffffff"},
		{args: `v=\+5:u32`, want: " v=5"},
		{args: `v=\"str"`, want: ` v="str"`},
		{args: `v=\"str":string`, want: ` v="str"`},
		{args: `v=\0x2000:string`, want: ` v="hi"`},
		// char, strings with odd bytes, faults.
		{args: "c=+0(%si):char", want: " c='h'"},
		{args: "c=+0(%si):char[3]", want: ` c={'h','i','\0'}`},
		{args: "s=+0(%r9):string", want: ` s="\x01"`},
		{args: "s=@0x6300:string", want: ` s="a\nb\x01"c"`},
		{args: "s=+0(%di):string", want: " s=(fault)"},
		{args: "s=+0(%r12):string", want: " s=(fault)"},
		{args: "v=+0(%r12):u32", want: " v=(fault)"},
		{args: "v=+8(+0(%r12)):u32", want: " v=(fault)"},
		// Bitfields: printed as the container's unsigned type.
		{args: "v=%r11:b4@4/8", want: " v=10"},
		{args: "v=%r11:b4@0/8", want: " v=11"},
		{args: "v=%r11:b1@7/8", want: " v=1"},
		{args: "v=%r11:b8@0/8", want: " v=171"},
		{args: "v=+0(%bx):b4@4/16", want: " v=3"},
		{args: "v=+0(%bx):b0x10@0x10/32", want: " v=22136"},
		{args: "v=@0x5004:b3@1/64", want: " v=5"},
		{args: "v=" + strings.Repeat("+0(", 12) + "%r8" + strings.Repeat(")", 12), want: " v=(fault)"},
		{args: "v=" + strings.Repeat("+0(", 1) + "%r8" + strings.Repeat(")", 1), want: " v=0x3100"},
		{args: "v=+0(%r9):b1@0/16[3]", want: " v={1,0,1}"},
		// Arrays.
		{args: "v=+0(%r9):x16[3]", want: " v={0x1,0x2,0x3}"},
		{args: "v=+0(%r9):u8[6]", want: " v={1,0,2,0,3,0}"},
		{args: "v=+0(%r9):s16[2]", want: " v={1,2}"},
		{args: "v=+4(%r9):u16[3]", want: " v={3,(fault),(fault)}"},
		{args: "v=+0(%r12):u16[2]", want: " v={(fault),(fault)}"},
		{args: "v=+0(%r10):string[3]", want: ` v={"hi","yo",(fault)}`},
		{args: "v=@0x6100:string[2]", want: ` v={"hi","yo"}`},
		{args: "v=+0(%r12):string[2]", want: " v={(fault),(fault)}"},
		{args: "v=@0x6400:symbol[2]", want: " v={work+0x0/0x40,0x999}"},
		{args: "v=+0(%r9):x16[1]", want: " v={0x1}"},
		// symbol.
		{args: "v=%rip:symbol", want: " v=work+0x0/0x40"},
		{args: "v=\\0x401010:symbol", want: " v=work+0x10/0x40"},
		{args: "v=%dx:symbol", want: " v=0x3"},
		{args: "v=+0(%r12):symbol", want: " v=(fault)"},
		// Default names: argN by position.
		{args: "%di:u32 %si", want: " arg1=5 arg2=0x2000"},
		{args: "x=%di:u32 %si", want: " x=5 arg2=0x2000"},
		{args: "%di:u8 $comm +0(%si):string", want: ` arg1=5 arg2="loop" arg3="hi"`},
		// DWARF names: their own rendering, or a TYPE cast of the raw value.
		{args: "req->method", want: ` method="hi"`},
		{args: "req", want: ` req={method="GET",len=5}`},
		{args: "req->len:u16", want: " len=5"},
		{args: "req:string", want: ` req_string="ab"`},
		{args: "req->method:string", want: ` method="hi"`},
		{args: "m=req->method:x64", want: " m=0x2000"},
		{args: "arr[2]", want: " arr=9"},
		{args: "p->a.b[3]", want: " b=3"},
		{args: "s.field", want: " field=4"},
		{args: "n", want: " n=-2"},
		{args: "n:s32", want: " n_s32=-2"},
		{args: "gone", want: " gone=(fault)"},
		{args: "gone:u32", want: " gone_u32=(fault)"},
		{args: "v=+8(req):u8", want: " v=(fault)"},
		{args: "v=+0(req):string", want: ` v="ab"`},
		{args: "argv:string[2]", want: ` argv_string_2_={"hi","yo"}`},
		{args: "v=argv:string[2]", want: ` v={"hi","yo"}`},
		{args: "$params", want: " a=1 b=2"},
		{args: "$arg*", want: " a=1 b=2"},
		{args: "x=%di:u8 $params", want: " x=5 a=1 b=2"},
		{args: "$params:u8", want: " a=1 b=2"},
		// A filter does not change the fields.
		{args: "x=%di:u32 if x == 5", want: " x=5"},
	}
	for _, tt := range tests {
		got := fxRender(t, strings.Fields(tt.args), tt.ret)
		if got != tt.want {
			t.Errorf("%q: got %q, want %q", tt.args, got, tt.want)
		}
	}
}

// A string read must not fault because a long first read crosses into an
// unmapped page, nor run past MaxStringSize.
func TestFetchStringReads(t *testing.T) {
	for _, whole := range []bool{false, true} {
		h, mem := fxHit()
		mem.whole = whole
		mem.putStr(0x9ffc, "abc") // ends 4 bytes before a hole
		long := strings.Repeat("x", 5000)
		mem.putStr(0x20000, long)
		mem.put(0x30000, 'a', 'b') // no NUL before the hole
		a, err := Compile([]string{"s=@0x9ffc:string", "l=@0x20000:string", "f=@0x30000:string"}, fxEnv(false))
		if err != nil {
			t.Fatal(err)
		}
		f := a.Fetch(h, nil)
		if got := f[0].Value.String(); got != `"abc"` {
			t.Errorf("whole=%v: string before a hole: %s", whole, got)
		}
		if got := f[1].Value.Str(); len(got) != MaxStringSize-1 || strings.Trim(got, "x") != "" {
			t.Errorf("whole=%v: long string: %d bytes, want %d", whole, len(got), MaxStringSize-1)
		}
		if !f[2].Value.Faulted() || f[2].Value.String() != FaultString {
			t.Errorf("whole=%v: unterminated string before a hole: %s", whole, f[2].Value)
		}
	}
}

// $stackN and $argN (N > 6) share one read of the stack.
func TestFetchStackBatch(t *testing.T) {
	h, mem := fxHit()
	a, err := Compile([]string{"$stack0", "$stack1", "$arg8", "$stack2"}, fxEnv(false))
	if err != nil {
		t.Fatal(err)
	}
	mem.reads = 0
	got := string(AppendFields(nil, a.Fetch(h, nil)))
	if want := " arg1=0x401234 arg2=0x11 arg3=0x22 arg4=0x22"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	if mem.reads != 1 {
		t.Errorf("%d memory reads, want 1", mem.reads)
	}
}

// A hit without registers or memory faults instead of crashing.
func TestFetchNoRegsNoMem(t *testing.T) {
	a, err := Compile(strings.Fields(`%di $stack1 +0(%si):string \0x10:u8 $comm @0x1000:u8[2] req`), fxEnv(false))
	if err != nil {
		t.Fatal(err)
	}
	got := string(AppendFields(nil, a.Fetch(&HitEnv{Comm: "c"}, nil)))
	want := ` arg1=(fault) arg2=(fault) arg3=(fault) arg4=16 arg5="c" arg6={(fault),(fault)} req={method="GET",len=5}`
	if got != want {
		t.Errorf("got %q\nwant %q", got, want)
	}
}

func TestFetchAllocs(t *testing.T) {
	h, _ := fxHit()
	a, err := Compile(strings.Fields("x=%di:u32 y=+8(+0(%r8)):s32 z=$arg7 if x == 5 && y < 0"), fxEnv(false))
	if err != nil {
		t.Fatal(err)
	}
	fields := a.Fetch(h, nil)
	buf := make([]byte, 0, 256)
	allocs := testing.AllocsPerRun(200, func() {
		fields = a.Fetch(h, fields[:0])
		if !a.Keep(fields) {
			t.Fatal("filter dropped the hit")
		}
		buf = AppendFields(buf[:0], fields)
	})
	if allocs != 0 {
		t.Errorf("%v allocations per hit, want 0", allocs)
	}
	if string(buf) != " x=5 y=-7 z=0x11" {
		t.Errorf("got %q", buf)
	}

	s, err := Compile([]string{"s=+0(%si):string"}, fxEnv(false))
	if err != nil {
		t.Fatal(err)
	}
	allocs = testing.AllocsPerRun(200, func() { fields = s.Fetch(h, fields[:0]) })
	if allocs > 1 {
		t.Errorf("%v allocations per string fetch, want 1", allocs)
	}
}

func TestFetchArgErrors(t *testing.T) {
	noDwarf := fxEnv(false)
	noDwarf.DWARF, noDwarf.Params = nil, nil
	tests := []struct {
		args string
		env  *CompileEnv
		want string // in the message
	}{
		{args: "x=%xx", want: `unknown register "%xx" in "x=%xx"`},
		{args: "%", want: `unknown register "%"`},
		{args: "x=%DI", want: `unknown register "%DI"`},
		{args: "x=%di:u7", want: `bad type "u7" (want u8-u64, s8-s64, x8-x64, char, string, ustring, symbol, b<width>@<offset>/<size> or TYPE[N]) in "x=%di:u7"`},
		{args: "x=%di:", want: `missing type`},
		{args: "x=%di:symstr", want: `bad type "symstr"`},
		{args: "x=%di:b0@0/8", want: `bad bitfield "b0@0/8"`},
		{args: "x=%di:b4@5/8", want: `does not fit in 8 bits`},
		{args: "x=%di:b4@0/12", want: `bad bitfield`},
		{args: "x=%di:b4/8", want: `bad bitfield`},
		{args: "x=%di:b4@/8", want: `bad bitfield`},
		{args: "x=%di:bogus", want: `bad bitfield "bogus"`},
		{args: "x=$retval", want: `$retval is only available in a return probe (r:) in "x=$retval"`},
		{args: "x=+0($retval):string", want: `$retval is only available`},
		{args: "x=+0(%di):u8[65]", want: `array length 65 is too big (max 64) in "x=+0(%di):u8[65]"`},
		{args: "x=+0(%di):u8[0]", want: `bad array length "0"`},
		{args: "x=+0(%di):u8[x]", want: `bad array length "x"`},
		{args: "x=+0(%di):u8[4", want: `has no closing "]"`},
		{args: "x=+0(%di):u8[4]x", want: `junk "x" after the array length`},
		{args: "x=%di:u8[4]", want: `an array needs a memory reference`},
		{args: `x=\1:u8[2]`, want: `an array needs a memory reference`},
		{args: "x=+0(%di", want: `dereference "+0(%di" has no closing ")" in "x=+0(%di"`},
		{args: "x=+0%di", want: `needs "("`},
		{args: "x=+(%di)", want: `bad dereference offset ""`},
		{args: "x=+zz(%di)", want: `bad dereference offset "zz"`},
		{args: "x=+0(%di)junk", want: `junk "junk" after dereference`},
		{args: "x=+0()", want: `empty fetch argument`},
		{args: "x=+0(%xx)", want: `unknown register "%xx"`},
		{args: "x=+0(%di,%xx,8)", want: `bad register "%xx" in indexed address "%di,%xx,8"`},
		{args: "x=+0(%edi,%si,8)", want: `bad register "%edi" in indexed address`},
		{args: "x=+0(%di,%si,3)", want: `bad scale "3" in indexed address "%di,%si,3" (want 1, 2, 4 or 8)`},
		{args: "x=+0(%di,%si,8,1)", want: `bad indexed address "%di,%si,8,1"`},
		{args: `x=\zz`, want: `bad immediate "\\zz"`},
		{args: `x=\`, want: `bad immediate`},
		{args: `x=\0x`, want: `bad immediate`},
		{args: `x=\99999999999999999999`, want: `bad immediate`},
		{args: `x=\"abc`, want: `has no closing quote`},
		{args: `x=\"abc":u8`, want: `can only be of type string`},
		{args: "x=$comm:u32", want: `$comm can only be of type string`},
		{args: "x=$comm:string[2]", want: `$comm can only be of type string`},
		{args: "x=+0($comm)", want: `$comm cannot be dereferenced`},
		{args: `x=+0(\"a")`, want: `cannot be dereferenced`},
		{args: "x=%di:string", want: `type string needs a memory reference (e.g. +0(%di):string)`},
		{args: "x=$stack1:string", want: `needs a memory reference`},
		{args: "x=$retval:string", env: fxPtr(fxEnv(true)), want: `needs a memory reference (e.g. +0($retval):string)`},
		{args: "x=$foo", want: `unknown variable "$foo"`},
		{args: "x=$arg0", want: `bad argument number "$arg0"`},
		{args: "x=$arg9999", want: `bad argument number`},
		{args: "x=$argx", want: `unknown variable "$argx"`},
		{args: "x=$stackx", want: `unknown variable "$stackx"`},
		{args: "x=$arg1", env: fxPtr(fxEnv(true)), want: `$arg1 is only available in an entry probe`},
		{args: "x=@0xzz", want: `bad address "@0xzz"`},
		{args: "x=@", want: `missing symbol name`},
		{args: "x=@nosuch", want: `@nosuch: unknown symbol "nosuch" in "x=@nosuch"`},
		{args: "x=@counter+zz", want: `bad symbol offset "+zz"`},
		{args: "x=@+0x10", want: `file offsets`},
		{args: "=%di", want: `missing argument name`},
		{args: "x=", want: `missing fetch argument`},
		{args: "x=:u8", want: `missing fetch argument`},
		{args: "1x=%di", want: `bad argument name "1x"`},
		{args: "a-b=%di", want: `bad argument name "a-b"`},
		{args: strings.Repeat("n", 33) + "=%di", want: `too long`},
		{args: "x=%di x=%si", want: `argument name "x" is used twice in "x=%si"`},
		{args: "arg2=%di %si", want: `argument name "arg2" is used twice (name this one with NAME=) in "%si"`},
		{args: "a->x b->x", want: `argument name "x" is used twice (name this one with NAME=) in "b->x"`},
		{args: "a->y", want: `no variable "a->y" in scope`},
		{args: "common_pid=%di", want: `argument name "common_pid" is reserved`},
		{args: "x=!", want: `bad fetch argument "!"`},
		{args: "x=1234", want: `bad fetch argument "1234"`},
		{args: "x=nosuch", want: `no variable "nosuch" in scope in "x=nosuch"`},
		{args: "x=req->method", env: &noDwarf, want: `"req->method" looks like a variable, which needs debug info (DWARF)`},
		{args: "$params", env: &noDwarf, want: `$params needs debug info`},
		{args: "x=$params", want: `cannot be named`},
		{args: "x=+0(" + strings.Repeat("+0(", 12) + "%di" + strings.Repeat(")", 13), want: `too many dereferences (max 12)`},
		{args: "x=" + strings.Repeat("+0(", 5000) + "%di" + strings.Repeat(")", 5000), want: `too many dereferences`},
		{args: "x=%di if", want: `missing filter expression`},
		{args: "x=%di if y == 1", want: `unknown field "y" (fields: x, comm)`},
		{args: "comm=$comm x=%di if y == 1", want: `unknown field "y" (fields: comm, x)`},
	}
	for _, tt := range tests {
		env := fxEnv(false)
		if tt.env != nil {
			env = *tt.env
		}
		_, err := Compile(strings.Fields(tt.args), env)
		if err == nil {
			t.Errorf("%q: no error, want %q", tt.args, tt.want)
			continue
		}
		if !errors.Is(err, ErrBadInput) {
			t.Errorf("%q: %v is not ErrBadInput", tt.args, err)
		}
		if msg := err.Error(); !strings.Contains(msg, tt.want) || strings.Contains(msg, "\n") {
			t.Errorf("%q:\n got %s\nwant %s", tt.args, msg, tt.want)
		}
	}
}

func fxPtr[T any](v T) *T { return &v }

// A DWARF or symbol layer's error is passed through.
func TestFetchCallbackErrorsWrapped(t *testing.T) {
	sentinel := errors.New("sentinel")
	env := fxEnv(false)
	env.DWARF = func(string) (DwarfVar, error) { return nil, sentinel }
	_, err := Compile([]string{"x=req->a"}, env)
	if !errors.Is(err, sentinel) || !errors.Is(err, ErrBadInput) {
		t.Errorf("DWARF error: %v", err)
	}
	env.ResolveSymbol = func(string) (uint64, error) { return 0, sentinel }
	_, err = Compile([]string{"x=@foo"}, env)
	if !errors.Is(err, sentinel) || !errors.Is(err, ErrBadInput) {
		t.Errorf("symbol error: %v", err)
	}
}

func TestFetchHasRetval(t *testing.T) {
	a, err := Compile([]string{"$retval", "x=%di"}, fxEnv(true))
	if err != nil || !a.HasRetval() || a.Filter() != "" {
		t.Fatalf("%v %v %q", err, a.HasRetval(), a.Filter())
	}
	a, err = Compile([]string{"x=%di", "if", "x", ">", "1"}, fxEnv(false))
	if err != nil || a.HasRetval() || a.Filter() != "x > 1" {
		t.Fatalf("%v %v %q", err, a.HasRetval(), a.Filter())
	}
	a, err = Compile(nil, fxEnv(false))
	if err != nil || a.Len() != 0 || !a.Keep(nil) || len(a.Fetch(&HitEnv{}, nil)) != 0 {
		t.Fatalf("empty args: %v", err)
	}
	var none *Args
	if none.Len() != 0 || none.Names() != nil || none.HasRetval() || none.Filter() != "" || !none.Keep(nil) || none.Fetch(nil, nil) != nil {
		t.Fatal("nil Args")
	}
	a, err = Compile(strings.Fields(`x=%di if comm == "x"`), fxEnv(false))
	if err != nil || len(a.Fetch(nil, nil)) != 1 {
		t.Fatalf("nil HitEnv: %v", err)
	}
}

func TestPerfArgName(t *testing.T) {
	tests := []struct{ expr, typ, want string }{
		{"req", "", "req"},
		{"req", "u32", "req_u32"},
		{"req->method", "", "method"},
		{"req->method", "string", "method"},
		{"req.method", "", "method"},
		{"arr[2]", "", "arr"},
		{"p->a.b[3]", "", "b"},
		{"p->a[1][2]", "", "a"},
		{"a->b->c", "", "c"},
		{"a-b", "", "a"},
		{"a[", "", "a"},
		{"main.total", "", "total"},
	}
	for _, tt := range tests {
		if got := perfArgName(tt.expr, tt.typ, tt.typ != ""); got != tt.want {
			t.Errorf("perfArgName(%q, %q) = %q, want %q", tt.expr, tt.typ, got, tt.want)
		}
	}
}
