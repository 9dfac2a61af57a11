/* Return-probe tracee.
 *   ret N          N rounds of mid() -> leaf(); leaf() longjmps out of both
 *                  when i % 3 == 0. Prints s=... jumps=...
 *   ret 0 M        then outer() calls slow() M times (20 ms each), for
 *                  detaching while hijacked frames are live.
 */
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static jmp_buf jb;

__attribute__((noinline, noipa)) int leaf(int i)
{
	if (i % 3 == 0)
		longjmp(jb, 1);
	return i;
}

__attribute__((noinline, noipa)) int mid(int i) { return leaf(i) + 1; }

__attribute__((noinline, noipa)) int slow(int i)
{
	usleep(20000);
	return i + 1;
}

__attribute__((noinline, noipa)) int outer(int n)
{
	int s = 0;
	for (int i = 0; i < n; i++)
		s += slow(i);
	return s;
}

int main(int argc, char **argv)
{
	int n = atoi(argv[1]);
	long s = 0;
	volatile int jumps = 0;

	for (volatile int i = 0; i < n; i++) {
		if (setjmp(jb) == 0)
			s += mid(i);
		else
			jumps++;
	}
	printf("s=%ld jumps=%d\n", s, jumps);
	fflush(stdout);
	if (argc > 2) {
		printf("ready\n");
		fflush(stdout);
		printf("outer=%d\n", outer(atoi(argv[2])));
	}
	return 0;
}
