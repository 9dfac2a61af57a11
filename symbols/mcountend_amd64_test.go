package symbols

import (
	"regexp"
	"strings"
	"testing"
)

// keepsFrameRE matches objdump's text of a prologue instruction after
// `push %rbp; mov %rsp,%rbp` that keeps the frame (keepsFrame).
var keepsFrameRE = regexp.MustCompile(`^(push\s+%\w+|(sub|add|and)\s+\$0x[0-9a-f]+,%rsp)$`)

// TestMcountCallEnd: past plain -pg's call of mcount, in a function whose
// prologue objdump shows as push %rbp; mov %rsp,%rbp and pushes or sp
// adjustments, and nowhere else (-mfentry's call is FentryCallEnd's).
func TestMcountCallEnd(t *testing.T) {
	for _, flags := range []string{"-pg -fPIE -pie", "-O2 -pg -no-pie", "-pg -fcf-protection -fPIE -pie", "-O2 -pg -mfentry -fPIE -pie", "-fpatchable-function-entry=5"} {
		t.Run(flags, func(t *testing.T) {
			t.Parallel()
			path := buildProg(t, t.TempDir(), "prog", strings.Fields(flags)...)
			m := openTestModule(t, path)
			dis := disassemble(t, path)
			framed := 0
			for _, fn := range progFuncSymbols(t, path) {
				want := 0
				insns := dis[fn.Value]
				if len(insns) > 0 && insns[0].text == "endbr64" {
					insns = insns[1:]
				}
				if !strings.Contains(flags, "-mfentry") && len(insns) > 2 && insns[0].text == "push   %rbp" && insns[1].text == "mov    %rsp,%rbp" {
					for _, in := range insns[2:] {
						if disMcountCallRE.MatchString(in.text) {
							want = int(in.addr + uint64(len(in.raw)) - fn.Value)
							framed++
							break
						}
						if !keepsFrameRE.MatchString(strings.Join(strings.Fields(in.text), "   ")) {
							break
						}
					}
				}
				got, above, _ := m.McountCallEnd(Symbol{Name: fn.Name, Addr: fn.Value, Size: fn.Size})
				if got != want || got > 0 && above != 8 {
					t.Errorf("McountCallEnd(%s): got %#x (sp at the entry %%rbp+%d), want %#x (%%rbp+8) (objdump: %+v)", fn.Name, got, above, want, insns[:min(len(insns), 6)])
				}
			}
			if strings.Contains(flags, "-pg") && !strings.Contains(flags, "-mfentry") && framed == 0 {
				t.Errorf("no function of the -pg build ends its prologue with a call of mcount")
			}
		})
	}
}
