/*
 * deeprec: rec(x, 20) recurses 20 deep to leaf(), N times (default
 * 200000): ~4.4 million calls, every one returning; no longjmp, no
 * exception. Prints their sum.
 */
#include <stdio.h>
#include <stdlib.h>

__attribute__((noinline)) unsigned long leaf(unsigned long x) { return x * 2654435761UL ^ (x >> 7); }

__attribute__((noinline)) unsigned long rec(unsigned long x, int d)
{
	return d == 0 ? leaf(x) : rec(x + d, d - 1) ^ d;
}

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 200000;
	unsigned long s = 0;
	for (long i = 0; i < n; i++)
		s += rec(i, 20);
	printf("s=%lx\n", s);
	return 0;
}
