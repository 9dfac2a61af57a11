/* The pipeline's tracee (bench/pipeline.sh, integration/pipeline_test.go):
 * main calls one(), a one-line function, N times (default 2,000,000) and
 * prints a checksum. With DELAY it first prints "ready" and sleeps DELAY
 * milliseconds (time for a tracer to attach).
 *   calls [N [DELAY]]
 */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
__attribute__((noinline, noipa)) long one(long a, long b) { return a * 3 + (b ^ 7); }
int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 2000000, s = 0;
	if (argc > 2) {
		printf("ready\n");
		fflush(stdout);
		usleep(atol(argv[2]) * 1000);
	}
	for (long i = 0; i < n; i++)
		s = one(s, i) & 0xffffff;
	printf("%ld\n", s);
	return 0;
}
