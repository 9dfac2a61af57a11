/* The throughput tracee: THREADS threads call leaf() as fast as they can
 * for MS milliseconds, then it prints how many calls they made in all.
 *   rate THREADS MS
 * bench/run.sh attaches probe to it for most of that time.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static volatile int stop;

__attribute__((noinline, noipa)) long leaf(long a, long b) { return a * 2 + b; }

static void *worker(void *arg)
{
	long n = 0, s = 0;
	while (!stop)
		s += leaf(n++, (long)arg);
	return (void *)n;
}

int main(int argc, char **argv)
{
	int threads = argc > 1 ? atoi(argv[1]) : 8;
	long ms = argc > 2 ? atol(argv[2]) : 2000;
	pthread_t th[64];
	long total = 0;
	if (threads < 1 || threads > 64)
		threads = 8;
	for (long i = 0; i < threads; i++)
		pthread_create(&th[i], NULL, worker, (void *)i);
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000};
	nanosleep(&ts, NULL);
	stop = 1;
	for (int i = 0; i < threads; i++) {
		void *r;
		pthread_join(th[i], &r);
		total += (long)r;
	}
	printf("%ld\n", total);
	return 0;
}
