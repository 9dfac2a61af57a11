package arch

import "strconv"

// AMD64 is x86-64 (struct user_regs_struct; System V AMD64 psABI).
var AMD64 = &Arch{
	Name:               "amd64",
	Breakpoint:         []byte{0xcc}, // int3
	BreakpointPCAdjust: 1,            // rip is past the int3

	Words:  int(amd64Words),
	Regs:   amd64Regs(),
	PC:     amd64RIP,
	SP:     amd64RSP,
	FP:     amd64RBP,
	Result: amd64RAX, Result2: amd64RDX,
	Flags: amd64EFLAGS,

	ArgRegs:        []uint8{amd64RDI, amd64RSI, amd64RDX, amd64RCX, amd64R8, amd64R9},
	SyscallArgRegs: []uint8{amd64RDI, amd64RSI, amd64RDX, amd64R10, amd64R8, amd64R9},
	SyscallNr:      amd64OrigRAX,
	FirstStackArg:  1, // [sp] is the return address

	Dwarf: Dwarf{
		// psABI figure 3.36: 0 rax, 1 rdx, 2 rcx, 3 rbx, 4 rsi, 5 rdi,
		// 6 rbp, 7 rsp, 8-15 r8-r15, 16 rip, 17-32 xmm0-15, 49 rflags,
		// 50-55 es cs ss ds fs gs, 58/59 fs_base/gs_base.
		Regs: map[int]uint8{
			0: amd64RAX, 1: amd64RDX, 2: amd64RCX, 3: amd64RBX, 4: amd64RSI, 5: amd64RDI, 6: amd64RBP, 7: amd64RSP,
			8: amd64R8, 9: amd64R9, 10: amd64R10, 11: amd64R11, 12: amd64R12, 13: amd64R13, 14: amd64R14, 15: amd64R15,
			16: amd64RIP, 49: amd64EFLAGS, 50: amd64ES, 51: amd64CS, 52: amd64SS, 53: amd64DS, 54: amd64FS, 55: amd64GS,
			58: amd64FSBase, 59: amd64GSBase,
		},
		PC: 16, SP: 7, FP: 6, Return: 16,
		Vector0: 17, Vectors: 16, VectorsAt: 160, // FXSAVE's xmm0
	},
}

// The words of struct user_regs_struct, in its order.
const (
	amd64R15 uint8 = iota
	amd64R14
	amd64R13
	amd64R12
	amd64RBP
	amd64RBX
	amd64R11
	amd64R10
	amd64R9
	amd64R8
	amd64RAX
	amd64RCX
	amd64RDX
	amd64RSI
	amd64RDI
	amd64OrigRAX
	amd64RIP
	amd64CS
	amd64EFLAGS
	amd64RSP
	amd64SS
	amd64FSBase
	amd64GSBase
	amd64DS
	amd64ES
	amd64FS
	amd64GS
	amd64Words
)

// amd64Regs is every name %REG accepts. The kernel's names
// (arch/x86/kernel/ptrace.c regoffset_table: ax bx cx dx si di bp sp
// r8-r15 ip flags cs ss orig_ax) are the whole 64-bit registers, so
// "%ax" and "%di" are rax and rdi, not their 16-bit halves. The
// assembler names are accepted too, as perf probe accepts them:
// rax..r15, rip, the 32-bit eax..r15d, the 16-bit r8w..r15w and the
// 8-bit al..r15b (and ah, bh, ch, dh).
func amd64Regs() map[string]Reg {
	m := map[string]Reg{}
	for _, l := range []struct {
		kernel, r64, r32, r8 string
		word                 uint8
	}{
		{"ax", "rax", "eax", "al", amd64RAX},
		{"bx", "rbx", "ebx", "bl", amd64RBX},
		{"cx", "rcx", "ecx", "cl", amd64RCX},
		{"dx", "rdx", "edx", "dl", amd64RDX},
		{"si", "rsi", "esi", "sil", amd64RSI},
		{"di", "rdi", "edi", "dil", amd64RDI},
		{"bp", "rbp", "ebp", "bpl", amd64RBP},
		{"sp", "rsp", "esp", "spl", amd64RSP},
	} {
		m[l.kernel] = Reg{l.word, 0, 64}
		m[l.r64] = Reg{l.word, 0, 64}
		m[l.r32] = Reg{l.word, 0, 32}
		m[l.r8] = Reg{l.word, 0, 8}
	}
	m["ah"] = Reg{amd64RAX, 8, 8}
	m["bh"] = Reg{amd64RBX, 8, 8}
	m["ch"] = Reg{amd64RCX, 8, 8}
	m["dh"] = Reg{amd64RDX, 8, 8}
	for n, word := range []uint8{amd64R8, amd64R9, amd64R10, amd64R11, amd64R12, amd64R13, amd64R14, amd64R15} {
		name := "r" + strconv.Itoa(8+n)
		m[name] = Reg{word, 0, 64}
		m[name+"d"] = Reg{word, 0, 32}
		m[name+"w"] = Reg{word, 0, 16}
		m[name+"b"] = Reg{word, 0, 8}
		m[name+"l"] = Reg{word, 0, 8}
	}
	for word, names := range map[uint8][]string{
		amd64RIP:     {"ip", "rip"},
		amd64EFLAGS:  {"flags", "eflags", "rflags"},
		amd64OrigRAX: {"orig_ax", "orig_rax"},
		amd64CS:      {"cs"},
		amd64SS:      {"ss"},
		amd64DS:      {"ds"},
		amd64ES:      {"es"},
		amd64FS:      {"fs"},
		amd64GS:      {"gs"},
		amd64FSBase:  {"fs_base"},
		amd64GSBase:  {"gs_base"},
	} {
		for _, n := range names {
			m[n] = Reg{word, 0, 64}
		}
	}
	return m
}
