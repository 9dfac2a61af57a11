/* pacret: hooked calls parked three deep while a tracer lets go (built
 * with pointer authentication: each saves its return address signed).
 *
 * It prints "ready", and on a line of stdin calls level1(5) N times
 * (argv[1], default 1000), then once more: level3 prints "parked" and
 * waits for another line inside the three calls before they return.
 * It prints the sum of every result. */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static int park;

__attribute__((noinline)) long level3(long x)
{
	if (park) {
		char c;
		printf("parked\n");
		fflush(stdout);
		while (read(0, &c, 1) == 1 && c != '\n')
			;
	}
	return x * 2;
}

__attribute__((noinline)) long level2(long x) { return level3(x + 1) + 1; }

__attribute__((noinline)) long level1(long x) { return level2(x * 3) + 7; }

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 1000, sum = 0;
	char c;
	printf("ready\n");
	fflush(stdout);
	while (read(0, &c, 1) == 1 && c != '\n')
		;
	for (long i = 0; i < n; i++)
		sum += level1(i);
	park = 1;
	sum += level1(5);
	printf("sum %ld\n", sum);
	return 0;
}
