/* A small C program of ~120,000 calls of a few kinds, for timing
 * function_graph against uftrace (bench/pipeline.sh): recursion (fib),
 * a qsort comparator called from libc, and a hash over strings. It prints
 * a checksum of all three.
 *   gcc -O2 -g -o mixed bench/mixed.c   (and -pg for uftrace)
 */
#include <stdio.h>
#include <stdlib.h>

__attribute__((noinline)) long fib(int n) { return n < 2 ? n : fib(n - 1) + fib(n - 2); }

__attribute__((noinline)) int compare(const void *a, const void *b)
{
	int x = *(const int *)a, y = *(const int *)b;
	return (x > y) - (x < y);
}

__attribute__((noinline)) unsigned long hash(const char *s)
{
	unsigned long h = 1469598103934665603UL;
	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211UL;
	return h;
}

int main(void)
{
	enum { N = 6000, STRINGS = 40000 };
	static int v[N];
	unsigned long sum = fib(18);
	srand(1);
	for (int i = 0; i < N; i++)
		v[i] = rand() % 100000;
	qsort(v, N, sizeof v[0], compare);
	for (int i = 0; i < N; i += 100)
		sum += v[i];
	char buf[32];
	for (int i = 0; i < STRINGS; i++) {
		snprintf(buf, sizeof buf, "key-%d", i);
		sum ^= hash(buf);
	}
	printf("%lu\n", sum);
	return 0;
}
