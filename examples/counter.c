/* A small multithreaded program to try probe on: each thread calls
 * work() a few times; main prints a checksum that tracing must not change.
 *   make example
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

static volatile long total;

__attribute__((noinline)) long work(long i)
{
	__atomic_add_fetch(&total, i, __ATOMIC_RELAXED);
	return i * i;
}

static void *worker(void *arg)
{
	long n = (long)arg, sum = 0;
	for (long i = 0; i < n; i++)
		sum += work(i);
	return (void *)sum;
}

int main(int argc, char **argv)
{
	long calls = argc > 1 ? atol(argv[1]) : 3;
	int threads = argc > 2 ? atoi(argv[2]) : 2;
	pthread_t tid[64];
	long sum = 0;

	if (threads < 1 || threads > 64)
		threads = 2;
	for (int i = 0; i < threads; i++)
		pthread_create(&tid[i], NULL, worker, (void *)calls);
	for (int i = 0; i < threads; i++) {
		void *r;
		pthread_join(tid[i], &r);
		sum += (long)r;
	}
	printf("threads=%d calls=%ld sum=%ld total=%ld\n", threads, calls, sum, total);
	return 0;
}
