package arch

import (
	"strconv"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// TestHostWords checks arm64's words against ptrace's struct.
func TestHostWords(t *testing.T) {
	var r unix.PtraceRegs
	if int(unsafe.Sizeof(r)/8) != ARM64.Words {
		t.Fatalf("PtraceRegs has %d words, the table %d", unsafe.Sizeof(r)/8, ARM64.Words)
	}
	want := map[string]uintptr{"sp": unsafe.Offsetof(r.Sp), "pc": unsafe.Offsetof(r.Pc), "pstate": unsafe.Offsetof(r.Pstate)}
	for i := range 31 {
		want["x"+strconv.Itoa(i)] = unsafe.Offsetof(r.Regs) + uintptr(8*i)
	}
	for name, off := range want {
		if got := ARM64.Regs[name].Word; uintptr(got)*8 != off {
			t.Errorf("%%%s: word %d, PtraceRegs has it at byte %d", name, got, off)
		}
	}
}
