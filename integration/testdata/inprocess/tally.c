/*
 * tally: tracee for the tests of probes counted in the tracee
 * (probe/tally.go). T threads each call f(v, w, x) N times, i from 0:
 *   v = i * 0x9E3779B97F4A7C15 (the golden ratio's bits: every bit,
 *       the top one half the time),
 *   w = the low half of v, sign-extended,
 *   x = i,
 * so the same values come traced and untraced, in every run, and a
 * histogram of them shows signed, unsigned, part-register and bitfield
 * values alike.
 *
 *   tally T N
 *
 * It prints the calls made and a checksum of f's results.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

static volatile unsigned long sink;

__attribute__((noinline, noipa)) unsigned long f(unsigned long v, long w, long x)
{
	sink += v ^ (unsigned long)w;
	return v + (unsigned long)w + (unsigned long)x;
}

static long n;

static void *caller(void *arg)
{
	unsigned long sum = 0;
	(void)arg;
	for (long i = 0; i < n; i++) {
		unsigned long v = (unsigned long)i * 0x9E3779B97F4A7C15ul;
		sum += f(v, (long)(int)v, i);
	}
	return (void *)sum;
}

int main(int argc, char **argv)
{
	if (argc != 3)
		return 2;
	int t = atoi(argv[1]);
	n = atol(argv[2]);
	pthread_t th[64];
	unsigned long sum = 0;
	for (long i = 0; i < t && i < 64; i++)
		pthread_create(&th[i], NULL, caller, NULL);
	for (long i = 0; i < t && i < 64; i++) {
		void *r;
		pthread_join(th[i], &r);
		sum += (unsigned long)r;
	}
	printf("calls=%ld sum=%lx\n", t * n, sum);
	return 0;
}
