// cxxnames: functions C++ mangles, probed by the names users write:
// a free function (twice), a class's method, one in a namespace, and
// an overloaded pair (only their mangled names tell them apart).
#include <cstdio>
#include <cstdlib>

namespace geo {
struct Rect {
	long w, h;
	__attribute__((noinline, noipa)) long area() const { return w * h; }
};
__attribute__((noinline, noipa)) long scale(long x) { return x * 3; }
} // namespace geo

__attribute__((noinline, noipa)) long twice(long x) { return x * 2; }
__attribute__((noinline, noipa)) long over(long x) { return x + 1; }
__attribute__((noinline, noipa)) long over(double x) { return (long)x + 2; }

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 3;
	long s = 0;
	for (int i = 0; i < n; i++) {
		geo::Rect r{i, 2};
		s += twice(i) + r.area() + geo::scale(i) + over((long)i) + over(0.5 * i);
	}
	printf("s=%ld\n", s);
	return 0;
}
