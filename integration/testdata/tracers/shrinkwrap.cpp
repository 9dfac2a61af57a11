// shrinkwrap: deep() saves its return address only on the path that
// throws (gcc shrink-wraps it at -O2: its paciasp and stp come after the
// fast path's ret, 56 bytes in). main catches each throw and prints
// s=129.
#include <cstdio>
#include <stdexcept>

__attribute__((noinline)) long deep(int d, long x)
{
	if (d == 0) {
		if (x % 5 == 0)
			throw std::logic_error("deep");
		return x;
	}
	return deep(d - 1, x) + 1;
}

int main()
{
	long s = 0;
	for (int i = 0; i < 3; i++) {
		try {
			s += deep(3, 10 + i);
		} catch (const std::exception &e) {
			s += 100;
		}
	}
	printf("s=%ld\n", s);
	return 0;
}
