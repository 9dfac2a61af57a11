package tracee

import (
	"strings"
	"testing"
)

func TestBTIGuarded(t *testing.T) {
	const smaps = `aaaab0000000-aaaab0001000 r-xp 00000000 fe:01 123  /usr/bin/prog
Size:                  4 kB
VmFlags: rd ex mr mw me bt
aaaab0010000-aaaab0011000 r-xp 00000000 fe:01 124  /usr/lib/libx.so
Size:                  4 kB
VmFlags: rd ex mr mw me
`
	for _, tc := range []struct {
		addr     uint64
		guarded  bool
		mappedIn bool
	}{{0xaaaab0000010, true, true}, {0xaaaab0010ffc, false, true}, {0xaaaab0002000, false, false}} {
		got, err := btiGuarded(strings.NewReader(smaps), tc.addr)
		if got != tc.guarded || (err == nil) != tc.mappedIn {
			t.Errorf("%#x: %v, %v; want %v, mapped %v", tc.addr, got, err, tc.guarded, tc.mappedIn)
		}
	}
}
