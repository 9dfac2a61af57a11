// C++ exceptions through traced frames.
//   exc N
//     main -> catcher() N times -> middle() -> thrower(), which throws;
//     middle and thrower hold objects with destructors (run while
//     unwinding) and never return; catcher catches. Prints the result.
#include <cstdio>
#include <cstdlib>
#include <stdexcept>

static int destroyed;

struct Guard {
	int v;
	explicit Guard(int v) : v(v) {}
	~Guard() { destroyed += v; }
};

__attribute__((noinline)) int thrower(int i)
{
	Guard g(1);
	if (i >= 0)
		throw std::runtime_error("boom");
	return g.v;
}

__attribute__((noinline)) int middle(int i)
{
	Guard g(10);
	return thrower(i) + g.v;
}

__attribute__((noinline)) int catcher(int i)
{
	try {
		return middle(i);
	} catch (const std::exception &e) {
		return i + 100;
	}
}

int main(int argc, char **argv)
{
	int n = atoi(argv[1]);
	long s = 0;
	for (int i = 0; i < n; i++)
		s += catcher(i);
	printf("caught=%ld destroyed=%d\n", s, destroyed);
	return 3;
}
