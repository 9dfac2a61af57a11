package codegen

import (
	"errors"
	"slices"
	"testing"

	"golang.org/x/arch/x86/x86asm"
	"golang.org/x/sys/unix"

	"github.com/probedbg/probe/singlestep"
)

// decodeAll disassembles code placed at at: every instruction's address
// and decoding. It fails the test on bytes that do not decode.
func decodeAll(t *testing.T, code []byte, at uint64) map[uint64]x86asm.Inst {
	t.Helper()
	insts := map[uint64]x86asm.Inst{}
	for off := 0; off < len(code); {
		in, err := x86asm.Decode(code[off:], 64)
		if err != nil {
			t.Fatalf("%#x: %v (% x)", at+uint64(off), err, code[off:min(off+8, len(code))])
		}
		insts[at+uint64(off)] = in
		off += in.Len
	}
	return insts
}

// target is where a direct jmp/jcc at pc goes.
func target(pc uint64, in x86asm.Inst) uint64 {
	return pc + uint64(in.Len) + uint64(int64(in.Args[0].(x86asm.Rel)))
}

func TestMailboxStub(t *testing.T) {
	const at, routine, next, done = 0x401000, 0x402000, 0x403000, 0x404000
	for _, kind := range []MailboxKind{MailboxEntry, MailboxReturn} {
		s := &MailboxStub{Kind: kind, Routine: routine, Next: next, Done: done}
		code, id, err := s.Code(at)
		if err != nil || len(code) != s.Size() {
			t.Fatalf("kind %d: %v, %d bytes, Size %d", kind, err, len(code), s.Size())
		}
		insts := decodeAll(t, code, at)
		var jmps []uint64
		for pc, in := range insts {
			if in.Op == x86asm.JMP {
				if _, ok := in.Args[0].(x86asm.Rel); ok {
					jmps = append(jmps, target(pc, in))
				}
			}
		}
		// The id, where the routine sends a thread whose slot is
		// taken, and id+stubDone, its done tail: each the start of the
		// restore, the pops in the reverse order of the pushes.
		for _, tail := range []uint64{id, id + stubDone} {
			if in, ok := insts[tail]; !ok || in.Op != x86asm.POP || in.Args[0] != x86asm.R11 {
				t.Errorf("kind %d: %#x is %v, want pop %%r11", kind, tail, in)
			}
		}
		want := map[uint64]bool{routine: true, next: true}
		if kind == MailboxEntry {
			want[done] = true
		}
		if len(jmps) != len(want) {
			t.Errorf("kind %d: direct jumps to %#x, want to %v", kind, jmps, want)
		}
		for _, j := range jmps {
			if !want[j] {
				t.Errorf("kind %d: a jmp to %#x, want one of %v", kind, j, want)
			}
		}
	}
}

func TestMailboxRoutine(t *testing.T) {
	const at, box, tramp = 0x7f0000001000, 0x7f0000100000, 0x7f0000002000
	for _, kind := range []MailboxKind{MailboxEntry, MailboxReturn} {
		r := &MailboxRoutine{Kind: kind, Box: box, Tramp: tramp}
		code, l, err := r.Code(at)
		trap := l.Trap
		if err != nil || len(code) != r.Size() {
			t.Fatalf("kind %d: %v, %d bytes, Size %d", kind, err, len(code), r.Size())
		}
		insts := decodeAll(t, code, at)
		if in := insts[trap]; in.Op != x86asm.INT || in.Len != 1 {
			t.Fatalf("kind %d: the trap at %#x is %v", kind, trap, in)
		}
		pcs := make([]uint64, 0, len(insts))
		for pc := range insts {
			pcs = append(pcs, pc)
		}
		slices.Sort(pcs)
		ints, taken, trapTests, syscalls := 0, 0, 0, 0
		var sigCalls []uint64 // the rt_sig* calls, in order: %eax set before each
		eax := uint64(0)
		for i, pc := range pcs {
			in := insts[pc]
			if in.Op == x86asm.MOV && in.Args[0] == x86asm.EAX {
				if imm, ok := in.Args[1].(x86asm.Imm); ok {
					eax = uint64(imm)
				}
			}
			if in.Op == x86asm.SYSCALL {
				syscalls++
				if eax == unix.SYS_RT_SIGPROCMASK || eax == unix.SYS_RT_SIGACTION {
					sigCalls = append(sigCalls, pc)
				}
			}
			if in.Op == x86asm.JE && i > 0 {
				// testb $0x10,SlotSigMask(%rcx): the unblock before
				// the trap and the block again after it, skipped when
				// SIGTRAP was not blocked.
				if prev := insts[pcs[i-1]]; prev.Op == x86asm.TEST {
					if m, ok := prev.Args[0].(x86asm.Mem); !ok || m.Base != x86asm.RCX || m.Disp != SlotSigMask || prev.Args[1] != x86asm.Imm(1<<(unix.SIGTRAP-1)) {
						t.Errorf("kind %d: %v before the je at %#x", kind, prev, pc)
					}
					if to := target(pc, in); to <= pc || to > pcs[len(pcs)-1] {
						t.Errorf("kind %d: je at %#x to %#x", kind, pc, to)
					}
					trapTests++
					continue
				}
			}
			switch in.Op {
			case x86asm.INT:
				ints++
			case x86asm.LEA:
				// rip-relative: the mailbox, and the trampoline for
				// the return address's swap.
				if m, ok := in.Args[1].(x86asm.Mem); ok && m.Base == x86asm.RIP {
					to := pc + uint64(in.Len) + uint64(m.Disp)
					if to != box && to != tramp {
						t.Errorf("kind %d: lea at %#x reaches %#x", kind, pc, to)
					}
				}
			case x86asm.JNE:
				// A taken slot: straight to the stub's fallback.
				to := target(pc, in)
				if j := insts[to]; j.Op != x86asm.JMP || j.Args[0] != x86asm.RDX {
					t.Errorf("kind %d: jne to %#x, which is %v, want jmp *%%rdx", kind, to, j)
				}
				taken++
			case x86asm.JE:
				// No answer yet: back to the trap. ReplyKeep at an
				// entry: over the swap, to the release.
				switch j := insts[target(pc, in)]; {
				case target(pc, in) == trap:
				case j.Op != x86asm.MOV || kind != MailboxEntry:
					t.Errorf("kind %d: je at %#x lands on %v", kind, pc, j)
				}
			}
		}
		if ints != 1 || taken != 1 {
			t.Errorf("kind %d: %d int3s and %d claim failures, want 1 each", kind, ints, taken)
		}
		// gettid, the mask and the action read, SIGTRAP unblocked, and
		// blocked again; the unblocked stretch holds the trap.
		if trapTests != 2 || syscalls != 5 || len(sigCalls) != 4 {
			t.Errorf("kind %d: %d SIGTRAP tests, %d system calls (%d rt_sig*), want 2, 5 (4)", kind, trapTests, syscalls, len(sigCalls))
		} else if !(sigCalls[2] < l.Unblocked && l.Unblocked < trap && trap < l.Reblocked && sigCalls[3] < l.Reblocked) {
			t.Errorf("kind %d: unblocked at %#x, trap %#x, blocked again at %#x; the calls at %#x", kind, l.Unblocked, trap, l.Reblocked, sigCalls)
		}
	}
	// Out of reach of the mailbox: an error, never a wrong displacement.
	var oor *singlestep.OutOfRangeError
	if _, _, err := (&MailboxRoutine{Box: 1 << 40}).Code(0x1000); !errors.As(err, &oor) {
		t.Errorf("a mailbox 1 TiB away: %v, want a singlestep.OutOfRangeError", err)
	}
}
