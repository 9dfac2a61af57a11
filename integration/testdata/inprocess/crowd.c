/*
 * crowd: CROWD threads alive at once whose ids are all equal modulo 512,
 * the number of rings, as when thread ids wrap around pid_max while a
 * process has hundreds of threads: every one of them picks the same ring
 * first. Each calls work() CALLS times; every call must be recorded.
 *
 * Threads are started and joined until enough ids match the first's;
 * those that do not match call nothing probed. Prints "calls=N sum=S".
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#define RINGS 512
#define CROWD 24
#define CALLS 100

static volatile long sink;
static pid_t first;
static pthread_barrier_t all_alive;
static long sums[CROWD];
static volatile int decided; /* the newest thread knows whether it matches: 1 yes, 2 no */

__attribute__((noinline, noipa)) long work(long id, long i)
{
	sink += i;
	return id * 1000 + i;
}

static void *member(void *arg)
{
	long id = (long)arg, sum = 0;
	if (id > 0 && (gettid() - first) % RINGS != 0) {
		decided = 2;
		return NULL;
	}
	if (id == 0)
		first = gettid();
	decided = 1;
	pthread_barrier_wait(&all_alive);
	for (long i = 0; i < CALLS; i++)
		sum += work(id, i);
	sums[id] = sum;
	return (void *)1;
}

int main(void)
{
	pthread_t th[CROWD];
	int n = 0;
	pthread_barrier_init(&all_alive, NULL, CROWD);
	for (int tries = 0; n < CROWD && tries < 1000000; tries++) {
		decided = 0;
		if (pthread_create(&th[n], NULL, member, (void *)(long)n) != 0)
			return 1;
		while (!decided)
			sched_yield();
		if (decided == 2) {
			pthread_join(th[n], NULL);
			continue;
		}
		n++; /* it waits at the barrier: joined at the end */
	}
	if (n < CROWD) {
		fprintf(stderr, "only %d thread ids matched\n", n);
		return 1;
	}
	long total = 0;
	for (int i = 0; i < CROWD; i++) {
		pthread_join(th[i], NULL);
		total += sums[i];
	}
	printf("calls=%d sum=%ld\n", CROWD * CALLS, total);
	return 0;
}
