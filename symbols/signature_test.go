//go:build amd64

package symbols

import (
	"os"
	"path/filepath"
	"testing"
)

// classesCxx has a function returning each kind of C++ class: by value
// (trivial for calls) or by a hidden pointer (the Itanium C++ ABI: a
// copy or move constructor or a destructor not trivial), each 16 bytes
// or less, where its size alone says registers.
const classesCxx = `#include <string>
struct Plain { long a, b; };
struct Dtor { long a; ~Dtor(); };
Dtor::~Dtor() {}
struct DefaultedIn { long a; ~DefaultedIn() = default; };
struct DefaultedOut { long a; ~DefaultedOut(); };
DefaultedOut::~DefaultedOut() = default;
struct Copy { long a; Copy() : a(0) {} Copy(const Copy &o) : a(o.a) {} };
struct Move { long a; Move() : a(0) {} Move(Move &&o) : a(o.a) {} };
struct Virtual { long a; virtual long f() { return a; } };
struct Member { Dtor d; };
struct Base : Dtor {};
struct VBase : virtual Plain {};
struct Array { Dtor d[1]; };
struct NoCopy { long a; NoCopy() : a(0) {} NoCopy(const NoCopy &) = delete; };
struct MoveOnly { long a; MoveOnly() : a(0) {} MoveOnly(const MoveOnly &) = delete; MoveOnly(MoveOnly &&) = default; };
template <class T> struct Box { T a; Box() : a() {} Box(const Box &o) : a(o.a) {} };
struct Ctor { long a; Ctor(long x) : a(x) {} };
#define F(T) extern "C" __attribute__((noinline, used)) T make_##T() { return T(); }
F(NoCopy) F(Plain) F(Dtor) F(DefaultedIn) F(DefaultedOut) F(Copy) F(Move) F(Virtual) F(Member) F(Base) F(VBase) F(Array) F(MoveOnly)
extern "C" __attribute__((noinline, used)) Ctor make_Ctor() { return Ctor(1); }
extern "C" __attribute__((noinline, used)) Box<long> make_Box() { return Box<long>(); }
extern "C" __attribute__((noinline, used)) std::string make_string() { return "x"; }
int main() { return 0; }
`

// TestSignatureByReference: a class is taken as passed by reference
// where the C++ ABI says, from gcc's DWARF, which has no
// DW_AT_calling_convention: as g++ returns each (by a hidden pointer in
// %rdi or not, checked in its code).
func TestSignatureByReference(t *testing.T) {
	needTools(t, "g++")
	dir := t.TempDir()
	src := filepath.Join(dir, "classes.cpp")
	if err := os.WriteFile(src, []byte(classesCxx), 0o644); err != nil {
		t.Fatal(err)
	}
	exe := filepath.Join(dir, "classes")
	run(t, dir, "g++", "-O0", "-g", "-o", exe, src)
	s, d := dwarfBinary(t, exe)
	for name, want := range map[string]bool{
		"Plain": false, "Dtor": true, "DefaultedIn": false, "DefaultedOut": true,
		"Copy": true, "Move": true, "Virtual": true, "Member": true, "Base": true,
		"VBase": true, "Array": true, "NoCopy": true, "MoveOnly": false, "Ctor": false, "Box": true,
		"string": true,
	} {
		sym, ok := s.Main().Lookup("make_" + name)
		if !ok {
			t.Fatalf("no make_%s", name)
		}
		sig, err := d.Signature(sym.Addr + s.Main().Bias)
		if err != nil {
			t.Fatalf("make_%s: %v", name, err)
		}
		if got := sig.Result.ByReference; got != want || sig.Result.Class != ClassAggregate {
			t.Errorf("%s: class %v, by reference %v, want an aggregate, %v", name, sig.Result.Class, got, want)
		}
	}
}
