package symbols

import (
	"os"
	"testing"
)

// The cost of loading a big binary's symbols and DWARF, as probe list and
// a probe with a DWARF name pay it: go test -bench Load ./symbols. The
// binary is $PROBE_BIG_BINARY (e.g. a 30 MB Go binary such as the
// compiler: go build -o /tmp/compile cmd/compile), else this test binary.

func bigBinary(b *testing.B) string {
	if p := os.Getenv("PROBE_BIG_BINARY"); p != "" {
		return p
	}
	p, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	return p
}

// BenchmarkLoadSymbols: open the binary and list its functions.
func BenchmarkLoadSymbols(b *testing.B) {
	path := bigBinary(b)
	for b.Loop() {
		s, err := LoadBinary(path)
		if err != nil {
			b.Fatal(err)
		}
		if len(s.Main().Functions()) == 0 {
			b.Fatal("no functions")
		}
		s.Close()
	}
}

// BenchmarkLoadDWARF: open the binary, find a function (runtime.mallocgc,
// or main in a C program) and the names of its parameters through DWARF.
func BenchmarkLoadDWARF(b *testing.B) {
	path := bigBinary(b)
	for b.Loop() {
		s, err := LoadBinary(path)
		if err != nil {
			b.Fatal(err)
		}
		m, sym, err := s.Lookup("runtime.mallocgc")
		if err != nil {
			m, sym, err = s.Lookup("main") // a C program
		}
		if err != nil {
			b.Fatal(err)
		}
		d, err := m.Debug()
		if err != nil {
			b.Fatal(err)
		}
		if _, err := d.Params(sym.Addr + m.Bias); err != nil {
			b.Fatal(err)
		}
		s.Close()
	}
}
