/* Function-tracer tracee of a known call shape.
 *   shape N R J [EXIT]
 *     main -> top() N times -> mid() 3 times each -> leaf() twice each;
 *     main -> recurse(R) -> recurse(R-1) ... -> recurse(0): R+1 calls;
 *     main -> jumper() J times -> hop(2) -> hop(1) -> hop(0), which
 *       longjmps back into jumper: the three hop frames never return.
 *   Prints the results and exits with status EXIT (default 0).
 */
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>

static jmp_buf jb;

__attribute__((noinline, noipa)) int leaf(int x) { return x * 2 + 1; }

__attribute__((noinline, noipa)) int mid(int x) { return leaf(x) + leaf(x + 1); }

__attribute__((noinline, noipa)) int top(int x)
{
	int s = 0;
	for (int i = 0; i < 3; i++)
		s += mid(x + i);
	return s;
}

__attribute__((noinline, noipa)) long recurse(int n)
{
	if (n == 0)
		return 0;
	return recurse(n - 1) + n;
}

__attribute__((noinline, noipa)) void hop(int n)
{
	if (n < 0)
		return;
	if (n == 0)
		longjmp(jb, 7);
	hop(n - 1);
}

__attribute__((noinline, noipa)) int jumper(void)
{
	int v = setjmp(jb);
	if (v == 0)
		hop(2); /* does not return */
	return v;
}

int main(int argc, char **argv)
{
	if (argc < 4) {
		fprintf(stderr, "usage: shape N R J [EXIT]\n");
		return 64;
	}
	int n = atoi(argv[1]), r = atoi(argv[2]), j = atoi(argv[3]);
	long s = 0;
	for (int i = 0; i < n; i++)
		s += top(i);
	long rs = recurse(r);
	int js = 0;
	for (int i = 0; i < j; i++)
		js += jumper();
	printf("top=%ld recurse=%ld jumps=%d\n", s, rs, js);
	return argc > 4 ? atoi(argv[4]) : 0;
}
