package arch

import (
	"runtime"
	"testing"
)

// TestTables checks every CPU's table against itself: each register
// named is in the register set, the roles and DWARF's numbers name the
// registers their names say.
func TestTables(t *testing.T) {
	for _, a := range []*Arch{AMD64, ARM64} {
		for name, r := range a.Regs {
			if int(r.Word) >= a.Words || r.Bits == 0 || r.Shift+r.Bits > 64 {
				t.Errorf("%s: %%%s is %+v, out of its %d words", a.Name, name, r, a.Words)
			}
		}
		for _, w := range append(append([]uint8{a.PC, a.SP, a.FP, a.Result, a.Result2, a.Flags, a.LR, a.SyscallNr}, a.ArgRegs...), a.SyscallArgRegs...) {
			if int(w) >= a.Words {
				t.Errorf("%s: word %d out of its %d", a.Name, w, a.Words)
			}
		}
		for n, w := range a.Dwarf.Regs {
			if int(w) >= a.Words {
				t.Errorf("%s: DWARF register %d is word %d, out of its %d", a.Name, n, w, a.Words)
			}
		}
		if ByName(a.Name) != a {
			t.Errorf("ByName(%q) is not %s's table", a.Name, a.Name)
		}
	}
	if Host == nil || Host.Name != runtime.GOARCH {
		t.Fatalf("Host is %v on %s", Host, runtime.GOARCH)
	}
	for _, c := range []struct {
		a    *Arch
		name string
		word uint8
	}{
		{AMD64, "di", AMD64.ArgRegs[0]}, {AMD64, "rsi", AMD64.ArgRegs[1]}, {AMD64, "r10", AMD64.SyscallArgRegs[3]},
		{AMD64, "ip", AMD64.PC}, {AMD64, "sp", AMD64.SP}, {AMD64, "rbp", AMD64.FP}, {AMD64, "ax", AMD64.Result},
		{AMD64, "dx", AMD64.Result2}, {AMD64, "eflags", AMD64.Flags}, {AMD64, "orig_rax", AMD64.SyscallNr}, {ARM64, "x8", ARM64.SyscallNr}, {AMD64, "r9", AMD64.ArgRegs[5]},
		{ARM64, "x0", ARM64.ArgRegs[0]}, {ARM64, "lr", ARM64.LR}, {ARM64, "fp", ARM64.FP}, {ARM64, "sp", ARM64.SP},
		{ARM64, "pc", ARM64.PC}, {ARM64, "pstate", ARM64.Flags},
	} {
		if got := c.a.Regs[c.name].Word; got != c.word {
			t.Errorf("%s: %%%s is word %d, want %d", c.a.Name, c.name, got, c.word)
		}
	}
	if d := AMD64.Dwarf; AMD64.Regs["rsp"].Word != d.Regs[d.SP] || AMD64.Regs["rbp"].Word != d.Regs[d.FP] || AMD64.Regs["r12"].Word != d.Regs[12] {
		t.Errorf("amd64's DWARF numbers: sp %d fp %d r12 %d", d.Regs[d.SP], d.Regs[d.FP], d.Regs[12])
	}
	if r := AMD64.Regs["ah"]; r.Word != AMD64.Result || r.Shift != 8 || r.Bits != 8 {
		t.Errorf("amd64: %%ah is %+v", r)
	}
}
