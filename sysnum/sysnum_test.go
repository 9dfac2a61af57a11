package sysnum

import (
	"testing"

	"golang.org/x/sys/unix"
)

func TestTable(t *testing.T) {
	for name, want := range map[string]int{"openat": unix.SYS_OPENAT, "read": unix.SYS_READ, "clone": unix.SYS_CLONE, "execve": unix.SYS_EXECVE} {
		if nr, ok := Number(name); !ok || nr != want {
			t.Errorf("Number(%q) = %d, %v; want %d", name, nr, ok, want)
		}
		if got := Name(want); got != name {
			t.Errorf("Name(%d) = %q, want %q", want, got, name)
		}
	}
	if _, ok := Number("sys_openat"); ok {
		t.Error("Number takes names without the sys_ prefix")
	}
	if len(Names()) < 300 {
		t.Errorf("only %d syscalls", len(Names()))
	}
}
