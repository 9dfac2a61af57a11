package fetch

import (
	"testing"

	"golang.org/x/sys/unix"

	"github.com/probedbg/probe/symbols"
)

// TestPrototypeTable: every line of the table parses, and a few say what
// ltrace's say.
func TestPrototypeTable(t *testing.T) {
	table := prototypes()
	if len(table) < 145 {
		t.Fatalf("%d prototypes, want the table's ~150", len(table))
	}
	if f := table["fcntl"]; !f.Variadic || len(f.Params) != 2 || f.Params[1].Name != "cmd" {
		t.Errorf("fcntl: %+v", f)
	}
	if p := table["pipe2"]; len(p.Params) != 2 || p.Params[1].Format != "oflags" {
		t.Errorf("pipe2: %+v", p)
	}
	open := table["open"]
	if len(open.Params) != 3 || !open.Params[0].String || open.Params[1].Format != "oflags" || open.Params[2].Format != "mode" ||
		open.Result.Class != symbols.ClassInt || !open.Result.Signed {
		t.Errorf("open: %+v", open)
	}
	if p := table["printf"]; !p.Variadic || len(p.Params) != 1 {
		t.Errorf("printf: %+v", p)
	}
	if f := table["free"]; f.Result.Class != symbols.ClassVoid || f.Params[0].Class != symbols.ClassPointer {
		t.Errorf("free: %+v", f)
	}
	if s, ok := Prototype("__strlen_avx2"); !ok || s.Result.Size != 8 || s.Result.Signed {
		t.Errorf("__strlen_avx2 as strlen: %+v, %v", s, ok)
	}
	if _, ok := Prototype("__libc_malloc_impl_x"); ok {
		t.Errorf("__libc_malloc_impl_x found a prototype")
	}
	for _, c := range []struct {
		flags uint64
		want  string
	}{
		{unix.O_RDONLY, "O_RDONLY"},
		{unix.O_WRONLY | unix.O_CREAT | unix.O_EXCL, "O_WRONLY|O_CREAT|O_EXCL"},
		{unix.O_RDWR | unix.O_CLOEXEC | 1<<30, "O_RDWR|O_CLOEXEC|0x40000000"},
	} {
		if got := openFlags(c.flags); got != c.want {
			t.Errorf("openFlags(%#x) = %s, want %s", c.flags, got, c.want)
		}
	}
	for _, bad := range []string{"int f(", "f(int)", "int f(quux)", "quux f()"} {
		if _, _, err := parsePrototype(bad); err == nil {
			t.Errorf("parsePrototype(%q): no error", bad)
		}
	}
}
