/*
 * dwarf: functions whose parameters a probe names by their DWARF names,
 * each of a kind the DWARF layer reads differently at the entry of -O2
 * code: integers and an enum and a bool in registers, a pointer (printed
 * as its address), a small struct passed in two registers, a larger one
 * and a seventh argument passed on the stack, a string (which needs
 * memory beyond the stack), a double and a float (in SSE registers). Each is called three times with values that
 * change. Prints what they computed.
 */
#include <stdbool.h>
#include <stdio.h>

enum color { RED, GREEN, BLUE };

struct pair {
	long a, b;
};

struct big {
	long x, y, z;
	int w;
};

static volatile long sink;

__attribute__((noinline)) long scalars(int i, unsigned char c, bool b, enum color k, long l)
{
	sink += i + c + b + k + l;
	return sink;
}

__attribute__((noinline)) long pointers(struct pair *p, const char *s)
{
	sink += p->a + s[0];
	return sink;
}

__attribute__((noinline)) long byvalue(struct pair p, struct big g)
{
	sink += p.a + p.b + g.x + g.w;
	return sink;
}

__attribute__((noinline)) long seventh(long a, long b, long c, long d, long e, long f, long g)
{
	sink += a + b + c + d + e + f + g;
	return sink;
}

__attribute__((noinline)) double floats(double d, float f)
{
	sink += (long)(d + f);
	return d * f;
}

int main(void)
{
	static const char *names[] = {"zero", "one", "two"};
	long r = 0;
	for (int i = 0; i < 3; i++) {
		struct pair p = {i, -i};
		struct big g = {i * 10, i * 20, i * 30, -i};
		r += scalars(i - 1, (unsigned char)(200 + i), i & 1, (enum color)i, -100L * i);
		r += pointers(&p, names[i]);
		r += byvalue(p, g);
		r += seventh(1, 2, 3, 4, 5, 6, 70 + i);
		r += (long)floats(i * 1.5, -i * 0.25f);
	}
	printf("r=%ld\n", r);
	return 0;
}
