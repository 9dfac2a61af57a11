package singlestep

import (
	"errors"
	"strings"
	"testing"

	"golang.org/x/arch/x86/x86asm"
)

func TestAnalyzeClassification(t *testing.T) {
	tests := []struct {
		code     string
		kind     Kind
		mnemonic string
	}{
		// nops, all forms
		{"90", Emulate, "nop"},
		{"66 90", Emulate, "nop"},
		{"48 90", Emulate, "nop"},
		{"0f 1f 00", Emulate, "nop"},
		{"0f 1f 40 00", Emulate, "nop"},
		{"0f 1f 44 00 00", Emulate, "nop"},
		{"66 0f 1f 44 00 00", Emulate, "nop"},
		{"0f 1f 80 00 00 00 00", Emulate, "nop"},
		{"0f 1f 84 00 00 00 00 00", Emulate, "nop"},
		{"66 0f 1f 84 00 00 00 00 00", Emulate, "nop"},
		{"66 2e 0f 1f 84 00 00 00 00 00", Emulate, "nop"},
		{"66 66 2e 0f 1f 84 00 00 00 00 00", Emulate, "nop"},
		{"2e 0f 1f 84 00 00 00 00 00", Emulate, "nop"},                   // cs nopl
		{"66 66 66 2e 0f 1f 84 00 00 00 00 00", Emulate, "nop"},          // 12 bytes
		{"66 66 66 66 66 66 2e 0f 1f 84 00 00 00 00 00", Emulate, "nop"}, // 15, as clang pads
		{"66 66 90", Emulate, "nop"},
		{"f3 0f 1e fa", Emulate, "endbr64"},
		{"f3 0f 1e fb", Emulate, "endbr32"},
		// push/pop of registers
		{"55", Emulate, "push"},
		{"50", Emulate, "push"},
		{"54", Emulate, "push"},
		{"41 54", Emulate, "push"},
		{"41 57", Emulate, "push"},
		{"5d", Emulate, "pop"},
		{"5c", Emulate, "pop"},
		{"41 5f", Emulate, "pop"},
		// mov between 64-bit registers, both encodings
		{"48 89 e5", Emulate, "mov"},
		{"48 8b ec", Emulate, "mov"},
		{"48 89 ec", Emulate, "mov"},
		{"48 8b e5", Emulate, "mov"},
		{"4c 89 c7", Emulate, "mov"}, // mov %r8,%rdi
		// stack adjustment
		{"48 83 ec 10", Emulate, "sub"},
		{"48 81 ec 00 01 00 00", Emulate, "sub"},
		{"48 83 c4 10", Emulate, "add"},
		{"48 81 c4 f0 ff ff ff", Emulate, "add"},
		// branches, calls, returns
		{"eb fe", Emulate, "jmp"},
		{"e9 00 01 00 00", Emulate, "jmp"},
		{"f2 e9 00 01 00 00", Emulate, "jmp"}, // bnd jmp
		{"74 05", Emulate, "je"},
		{"2e 74 05", Emulate, "je"}, // not-taken hint
		{"3e 74 05", Emulate, "je"}, // taken hint
		{"0f 85 00 01 00 00", Emulate, "jne"},
		{"7f 05", Emulate, "jg"},
		{"e8 00 00 00 00", Emulate, "call"},
		{"f2 e8 00 00 00 00", Emulate, "call"}, // bnd call
		{"c3", Emulate, "ret"},
		{"c2 10 00", Emulate, "ret"},
		{"f2 c3", Emulate, "ret"}, // bnd ret
		{"f3 c3", Emulate, "ret"}, // repz ret
		{"e2 fe", Emulate, "loop"},
		{"e3 fe", Emulate, "jrcxz"},

		// Step: everything else that is safe
		{"83 ec 10", Step, "sub"},          // sub $0x10,%esp: 32-bit, zero-extends
		{"48 83 e8 10", Step, "sub"},       // sub $0x10,%rax
		{"f0 48 83 04 24 01", Step, "add"}, // lock addq $1,(%rsp)
		{"66 55", Step, "push"},            // push %bp
		{"6a 01", Step, "push"},
		{"ff 35 00 00 00 00", Step, "push"}, // push disp(%rip)
		{"89 d8", Step, "mov"},
		{"48 8b 05 00 10 00 00", Step, "mov"},
		{"c7 05 00 10 00 00 2a 00 00 00", Step, "mov"},
		{"48 8d 3d 00 10 00 00", Step, "lea"},
		{"ff 15 00 10 00 00", Step, "call"},
		{"ff d0", Step, "call"},
		{"3e ff d0", Step, "call"}, // notrack call *%rax
		{"ff e0", Step, "jmp"},
		{"3e ff e0", Step, "jmp"}, // notrack jmp *%rax
		{"ff 25 00 10 00 00", Step, "jmp"},
		{"f2 ff e0", Step, "jmp"}, // bnd jmp *%rax
		{"9c", Step, "pushfq"},
		{"9d", Step, "popfq"},
		{"c9", Step, "leave"},
		{"f3 48 ab", Step, "stosq"},
		{"f3 a4", Step, "movsb"},
		{"f0 48 0f b1 0d 00 10 00 00", Step, "cmpxchg"},
		{"f3 90", Step, "pause"},
		{"c5 f8 77", Step, "vzeroupper"},
		{"c5 fe 6f 05 00 10 00 00", Step, "vmovdqu"},
		{"0f a2", Step, "cpuid"},
		{"0f 31", Step, "rdtsc"},
		{"0f 01 f9", Step, "rdtscp"},
		{"0f ae f0", Step, "mfence"},
		{"f3 48 0f b8 c0", Step, "popcnt"},
		{"2e c3", Step, "ret"}, // odd prefix: steppable, not emulated
	}
	for _, tt := range tests {
		t.Run(tt.code, func(t *testing.T) {
			code := hx(t, tt.code)
			in, err := Analyze(append(code, 0xcc, 0xcc), 0x401000)
			if err != nil {
				t.Fatalf("Analyze: %v", err)
			}
			if in.Kind != tt.kind || in.Mnemonic != tt.mnemonic || in.Len != len(code) || string(in.Bytes) != string(code) || in.Addr != 0x401000 {
				t.Errorf("got %s kind=%v mnemonic=%q len=%d bytes=% x, want kind=%v mnemonic=%q len=%d",
					in, in.Kind, in.Mnemonic, in.Len, in.Bytes, tt.kind, tt.mnemonic, len(code))
			}
		})
	}
}

func TestAnalyzeRefused(t *testing.T) {
	tests := []struct {
		code     string
		mnemonic string
	}{
		{"0f 05", "syscall"},
		{"0f 34", "sysenter"},
		{"cd 80", "int"},
		{"cc", "int3"},
		{"f1", "icebp"},
		{"cf", "iretd"},
		{"48 cf", "iretq"},
		{"f4", "hlt"},
		{"ec", "in"},
		{"e4 60", "in"},
		{"e6 60", "out"},
		{"6c", "insb"},
		{"6e", "outsb"},
		{"fa", "cli"},
		{"fb", "sti"},
		{"0f 01 10", "lgdt"},
		{"0f 01 18", "lidt"},
		{"0f 01 00", "sgdt"},
		{"0f 00 d8", "ltr"},
		{"0f 06", "clts"},
		{"0f 30", "wrmsr"},
		{"0f 32", "rdmsr"},
		{"0f 22 c0", "mov"}, // mov %rax,%cr0
		{"0f 0b", "ud2"},
		{"8e d0", "mov"},      // mov %eax,%ss
		{"ff 1c 24", "lcall"}, // lcall *(%rsp)
		{"ff 2c 24", "ljmp"},  // ljmp *(%rsp)
		{"cb", "lret"},
		{"ca 08 00", "lret"},
		{"2e ff d0", "call"},                // cs call *%rax
		{"64 ff 14 25 10 00 00 00", "call"}, // call *%fs:0x10
		{"65 ff e0", "jmp"},                 // gs jmp *%rax
		{"66 e8 00 00 00 00", "call"},       // callw
		{"66 c3", "ret"},                    // retw
		{"66 eb 00", "jmp"},
		{"67 e2 fe", "loop"}, // loop on ecx
		{"67 e3 fe", "jecxz"},
		{"64 eb 00", "jmp"}, // fs prefix on a relative jmp
		{"67 e8 00 00 00 00", "call"},
		{"c7 f8 00 00 00 00", "xbegin"},
		{"c6 f8 00", "xabort"},
		{"0f 01 d5", "xend"},
		{"67 48 8b 05 00 10 00 00", "mov"}, // eip-relative
		{"f0 48 01 c0", "add"},             // lock on a register operand
		{"f0 90", "nop"},                   // lock nop
	}
	for _, tt := range tests {
		t.Run(tt.code, func(t *testing.T) {
			in, err := Analyze(append(hx(t, tt.code), 0xcc), 0x401000)
			var ue *UnsupportedError
			if !errors.As(err, &ue) {
				t.Fatalf("Analyze = %v, %v; want *UnsupportedError", in, err)
			}
			if ue.Mnemonic != tt.mnemonic || ue.Addr != 0x401000 {
				t.Errorf("error %q names %q at %#x, want %q at 0x401000", err, ue.Mnemonic, ue.Addr, tt.mnemonic)
			}
			if !strings.HasPrefix(err.Error(), "unsupported instruction at probe site: "+tt.mnemonic+" (") || ue.Reason == "" {
				t.Errorf("message %q", err)
			}
		})
	}
}

func TestAnalyzeUndecodable(t *testing.T) {
	tests := []struct {
		code string
		want error
	}{
		{"06", x86asm.ErrUnrecognized}, // push %es: gone in 64-bit mode
		{"ce", x86asm.ErrUnrecognized}, // into
		{"f3 0f 1e c8", x86asm.ErrUnrecognized},
		{"0f 04", x86asm.ErrUnrecognized},
		{"0f 01 05 00", x86asm.ErrTruncated}, // sgdt disp32(%rip)
		{"", x86asm.ErrTruncated},
		{"e8 00 00", x86asm.ErrTruncated},
		{"48", x86asm.ErrTruncated},
	}
	for _, tt := range tests {
		t.Run(tt.code, func(t *testing.T) {
			_, err := Analyze(hx(t, tt.code), 0x401000)
			var de *DecodeError
			if !errors.As(err, &de) || !errors.Is(err, tt.want) || de.Addr != 0x401000 {
				t.Fatalf("error = %v, want *DecodeError wrapping %v", err, tt.want)
			}
		})
	}
}

func TestSyscallMessage(t *testing.T) {
	_, err := Analyze([]byte{0x0f, 0x05}, 0x401000)
	if want := "unsupported instruction at probe site: syscall (system call)"; err == nil || err.Error() != want {
		t.Errorf("got %v, want %q", err, want)
	}
}

func TestInsnString(t *testing.T) {
	for code, want := range map[string]string{
		"55":             "0x401000: push %rbp",
		"f3 0f 1e fa":    "0x401000: endbr64",
		"e8 fb 0f 00 00": "0x401000: callq 0x402000",
	} {
		in, err := Analyze(hx(t, code), 0x401000)
		if err != nil {
			t.Fatal(err)
		}
		if got := in.String(); got != want {
			t.Errorf("%s: String() = %q, want %q", code, got, want)
		}
	}
}
