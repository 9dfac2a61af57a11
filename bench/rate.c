/* The throughput tracee: THREADS threads call leaf() as fast as they can;
 * it prints how many calls a second they made in all between 0.5 s and
 * 2.5 s from its start, then exits.
 *   rate THREADS
 * bench/run.sh attaches probe to it within its first half second.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static volatile int stop;

/* Each thread's count, a cache line each: nothing shared while they run. */
static struct {
	volatile long n;
	char pad[56];
} counts[64];

__attribute__((noinline, noipa)) long leaf(long a, long b) { return a * 2 + b; }

static void *worker(void *arg)
{
	long i = (long)arg, s = 0;
	while (!stop) {
		s += leaf(counts[i].n, i);
		counts[i].n++;
	}
	return (void *)s;
}

static long total(int threads)
{
	long t = 0;
	for (int i = 0; i < threads; i++)
		t += counts[i].n;
	return t;
}

static void sleep_ms(long ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000};
	nanosleep(&ts, NULL);
}

int main(int argc, char **argv)
{
	int threads = argc > 1 ? atoi(argv[1]) : 8;
	pthread_t th[64];
	if (threads < 1 || threads > 64)
		threads = 8;
	for (long i = 0; i < threads; i++)
		pthread_create(&th[i], NULL, worker, (void *)i);
	sleep_ms(500);
	long before = total(threads);
	sleep_ms(2000);
	long after = total(threads);
	stop = 1;
	for (int i = 0; i < threads; i++)
		pthread_join(th[i], NULL);
	printf("%ld\n", (after - before) / 2);
	return 0;
}
