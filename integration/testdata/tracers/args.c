/* The tracee of TestFuncArgs: functions with parameters of every class
 * the calling conventions place differently (integers of each size,
 * chars, bool, an enum, strings, pointers, more than the registers hold,
 * structs small and large, doubles) and results of each. It prints what
 * they computed: traced, it must print the same. */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

enum color { RED, GREEN = 5, BLUE };
struct pair { int a; long b; };
struct big { long x[4]; };
struct pt { double x, y; };

__attribute__((noinline)) int add(int a, int b) { return a + b; }
__attribute__((noinline)) unsigned long scale(unsigned long v, unsigned char k, char c, short s) { return v * k + c + s; }
__attribute__((noinline)) size_t greet(const char *name, bool loud) { return strlen(name) + loud; }
__attribute__((noinline)) long many(long a, long b, long c, long d, long e, long f, long g, int h, int i) { return a + b + c + d + e + f + g + h + i; }
__attribute__((noinline)) long bypair(struct pair p, enum color col) { return p.a + p.b + col; }
__attribute__((noinline)) long bybig(struct big bg, int tail) { return bg.x[0] + bg.x[3] + tail; }
__attribute__((noinline)) double dist(struct pt p, double k) { return (p.x * p.x + p.y * p.y) * k; }
__attribute__((noinline)) enum color next(enum color c) { return c == RED ? GREEN : BLUE; }
__attribute__((noinline)) void nothing(void) { __asm__ volatile(""); }
__attribute__((noinline)) const char *pick(int i) { return i ? "yes" : "no"; }

int main(int argc, char **argv)
{
	struct pair p = {3, 4};
	struct big bg = {{1, 2, 3, 4}};
	struct pt q = {1.5, 2.0};
	long r = add(2, 3);
	(void)argv;
	r += scale(10, 3, 'x', -7);
	r += greet("world", true);
	r += many(1, 2, 3, 4, 5, 6, 7, -8, 9);
	r += bypair(p, BLUE);
	r += bybig(bg, 9);
	r += (long)dist(q, 2.0);
	r += next(RED);
	nothing();
	printf("%ld %s\n", r, pick(argc > 1));
	return 0;
}
