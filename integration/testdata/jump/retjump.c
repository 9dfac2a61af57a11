/*
 * retjump: the tracee of the return-hook jump tests (jump_test.go). Every
 * function is entered with a return probe or function_graph hooking its
 * return; each counts its own calls, printed at the end, so a test can
 * check the traced counts exactly, and each result depends on the
 * instructions the jmp at its entry covers.
 *
 * usage: retjump N    run N rounds, print the sums and the call counts
 *
 * fib recurses; tail ends in a tail call (gcc -O2: jmp leaf), so leaf
 * is entered with tail's hijacked return address at [sp].
 */
#include <stdio.h>
#include <stdlib.h>

long calls_leaf, calls_fib, calls_tail, calls_outer;
long table[8] = {3, 1, 4, 1, 5, 9, 2, 6};

__attribute__((noinline)) long leaf(long x)
{
	volatile long v = x;
	calls_leaf++;
	return v * 3 + 1;
}

/* No tail-recursion elimination: each counted call is a real call. */
__attribute__((noinline, optimize("no-optimize-sibling-calls"))) long fib(long n)
{
	calls_fib++;
	if (n < 2)
		return leaf(n);
	return fib(n - 1) + fib(n - 2);
}

__attribute__((noinline)) long tail(long x)
{
	calls_tail++;
	return leaf(x + table[x & 7]);
}

__attribute__((noinline)) long outer(long x)
{
	volatile long v = x;
	calls_outer++;
	return tail(v) + fib(v & 7);
}

int main(int argc, char **argv)
{
	if (argc != 2)
		return 2;
	long n = atol(argv[1]), sum = 0;
	for (long i = 1; i <= n; i++)
		sum += outer(i);
	printf("sum=%ld leaf=%ld fib=%ld tail=%ld outer=%ld\n", sum, calls_leaf, calls_fib, calls_tail, calls_outer);
	return 0;
}
