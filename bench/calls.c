/* The pipeline's tracee (bench/pipeline.sh): main calls one(), a
 * one-line function, N times (default 2,000,000) and prints a checksum.
 *   calls [N]
 */
#include <stdio.h>
#include <stdlib.h>
__attribute__((noinline, noipa)) long one(long a, long b) { return a * 3 + (b ^ 7); }
int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 2000000, s = 0;
	for (long i = 0; i < n; i++)
		s = one(s, i) & 0xffffff;
	printf("%ld\n", s);
	return 0;
}
