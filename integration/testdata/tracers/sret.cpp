// The C++ tracee of TestFuncArgsResults: a class with a destructor of
// its own is returned and passed by a hidden pointer whatever its size
// (the C++ ABI), as is std::string; a plain struct of the same size is
// not. It prints what they computed: traced, it must print the same.
#include <cstdio>
#include <string>

struct Tok { long a, b; ~Tok(); };   // 16 bytes, but by reference
Tok::~Tok() { __asm__ volatile(""); }
struct Plain { long a, b; };         // 16 bytes: in two registers
struct Namer {                       // this: after the hidden pointer
	long base;
	__attribute__((noinline)) std::string name(int v) const { return std::to_string(base + v); }
};

__attribute__((noinline)) std::string str_of(int v, long w) { return std::to_string(v + w); }
__attribute__((noinline)) Tok mktok(int a, long b) { return Tok{a, b}; }
__attribute__((noinline)) Plain mkplain(int a, long b) { return Plain{a, b}; }
__attribute__((noinline)) long usetok(Tok t, int after) { return t.a + t.b + after; }

int main()
{
	long s = 0;
	for (int i = 0; i < 2; i++)
		s += str_of(i, 10).size();
	s += mktok(1, 2).b;
	s += mkplain(3, 4).b;
	s += usetok(Tok{5, 6}, 7);
	Namer n{20};
	s += n.name(3).size();
	std::printf("%ld\n", s);
	return 0;
}
