/* Four threads of a known call shape for the function tracers.
 *   threads N
 *     each of 4 threads: thread() -> worker() -> step() N times -> twig()
 *     twice each, all at once (they wait for each other at a barrier
 *     first) so that their calls interleave. Prints the sum.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#define THREADS 4

static pthread_barrier_t barrier;
static int n;

__attribute__((noinline, noipa)) long twig(long x) { return x + 1; }

__attribute__((noinline, noipa)) long step(long x) { return twig(x) + twig(x * 2); }

__attribute__((noinline, noipa)) long worker(long id)
{
	long s = 0;
	for (int i = 0; i < n; i++)
		s += step(id * 1000 + i);
	return s;
}

static void *thread(void *arg)
{
	pthread_barrier_wait(&barrier);
	return (void *)worker((long)arg);
}

int main(int argc, char **argv)
{
	n = atoi(argv[1]);
	pthread_t th[THREADS];
	pthread_barrier_init(&barrier, NULL, THREADS);
	for (long i = 0; i < THREADS; i++)
		pthread_create(&th[i], NULL, thread, (void *)i);
	long total = 0;
	for (int i = 0; i < THREADS; i++) {
		void *r;
		pthread_join(th[i], &r);
		total += (long)r;
	}
	printf("threads=%d total=%ld\n", THREADS, total);
	return 0;
}
