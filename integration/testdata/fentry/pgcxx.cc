// pgcxx: C++ for the -pg builds (plain and -mfentry): classes with a
// virtual call, a template, an exception thrown through two functions and
// caught in a third, std::sort with a lambda. Every function of namespace
// pg counts its calls; the program checks its own results.
//
//   pgcxx N     N rounds; prints the results, then each function's calls
//               ("name calls", as function_graph names it)
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <vector>

#define NOINLINE __attribute__((noinline))

namespace pg {

static long calls[10];
enum { kCircle, kSquare, kScale, kTotal, kLess, kSorted, kGuard, kThrower, kMiddle, kCatcher };
static const char *const names[] = {
	"pg::Circle::area", "pg::Square::area", "pg::scale", "pg::total<double>",
	"pg::sorted()::{lambda(int, int)#1}::operator()",
	"pg::sorted", "pg::Guard::~Guard", "pg::thrower", "pg::middle", "pg::catcher",
};

struct Shape {
	virtual ~Shape() {}
	virtual double area() const = 0;
};

struct Circle : Shape {
	double r;
	explicit Circle(double r) : r(r) {}
	NOINLINE double area() const override { calls[kCircle]++; return 3 * r * r; }
};

struct Square : Shape {
	double s;
	explicit Square(double s) : s(s) {}
	NOINLINE double area() const override { calls[kSquare]++; return s * s; }
};

NOINLINE double scale(const Shape &sh, double k) { calls[kScale]++; return sh.area() * k; }

template <typename T> NOINLINE T total(const std::vector<Shape *> &v, T k)
{
	calls[kTotal]++;
	T sum = 0;
	for (const Shape *s : v)
		sum += scale(*s, k);
	return sum;
}

NOINLINE std::vector<int> sorted(std::vector<int> v)
{
	calls[kSorted]++;
	std::sort(v.begin(), v.end(), [](int a, int b) NOINLINE { calls[kLess]++; return a > b; });
	return v;
}

struct Guard {
	int *v;
	explicit Guard(int *v) : v(v) {}
	NOINLINE ~Guard() { calls[kGuard]++; ++*v; }
};

static int unwound;

NOINLINE int thrower(int i)
{
	calls[kThrower]++;
	Guard g(&unwound);
	if (i % 3 == 0)
		throw std::runtime_error("three");
	return i;
}

NOINLINE int middle(int i)
{
	calls[kMiddle]++;
	Guard g(&unwound);
	return thrower(i) * 2;
}

NOINLINE int catcher(int i)
{
	calls[kCatcher]++;
	try {
		return middle(i);
	} catch (const std::runtime_error &) {
		return -1;
	}
}

} // namespace pg

int main(int argc, char **argv)
{
	int rounds = argc > 1 ? atoi(argv[1]) : 1;
	std::vector<pg::Shape *> shapes;
	for (int i = 0; i < 6; i++)
		shapes.push_back(i % 2 ? (pg::Shape *)new pg::Circle(i) : new pg::Square(i));
	double area = 0;
	long order = 0, caught = 0, got = 0;
	for (int r = 0; r < rounds; r++) {
		area += pg::total<double>(shapes, r + 1);
		std::vector<int> v;
		for (int i = 0; i < 40; i++)
			v.push_back((i * 37 + r) % 41);
		std::vector<int> s = pg::sorted(v);
		for (size_t i = 1; i < s.size(); i++)
			order += s[i - 1] >= s[i];
		for (int i = 0; i < 10; i++) {
			int x = pg::catcher(r * 10 + i);
			if (x < 0)
				caught++;
			else
				got += x;
		}
	}
	// What each part must have come to, worked out here without them.
	double want = 0;
	for (int r = 0; r < rounds; r++)
		for (int i = 0; i < 6; i++)
			want += (i % 2 ? 3.0 * i * i : 1.0 * i * i) * (r + 1);
	long wantCaught = 0, wantGot = 0;
	for (int r = 0; r < rounds; r++)
		for (int i = 0; i < 10; i++)
			(r * 10 + i) % 3 == 0 ? wantCaught++ : wantGot += 2 * (r * 10 + i);
	bool ok = area == want && order == 39L * rounds && caught == wantCaught && got == wantGot &&
		  pg::unwound == 2 * 10 * rounds;
	printf("area=%.0f order=%ld caught=%ld got=%ld unwound=%d %s\n", area, order, caught, got, pg::unwound, ok ? "ok" : "bad");
	for (int i = 0; i < 10; i++)
		printf("%s %ld\n", pg::names[i], pg::calls[i]);
	return ok ? 0 : 1;
}
