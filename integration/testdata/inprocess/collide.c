/*
 * collide: two threads whose ids are equal modulo 512, the number of
 * rings. B records first, into the ring its id picks; A finds that one
 * taken and records into the next. Then, while A is inside hooked(),
 * whose return is hooked in its ring, B exits and its ring is given
 * back; A records again (work) and returns from hooked(): both must find
 * A's own ring, not B's old one, free now and first in line.
 *
 * Threads are started and joined until one's id matches B's; they call
 * nothing probed. Prints what hooked() returned.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#define RINGS 512

static volatile long sink;

__attribute__((noinline, noipa)) long work(long x)
{
	sink += x;
	sink ^= 3;
	return x + 1;
}

static pthread_t b;
static volatile pid_t btid;
static volatile int b_exit;

static void *thread_b(void *arg)
{
	(void)arg;
	work(1);
	btid = gettid();
	while (!b_exit)
		usleep(1000);
	return NULL;
}

__attribute__((noinline, noipa)) long hooked(long x)
{
	b_exit = 1;
	pthread_join(b, NULL);
	usleep(200000); /* B's ring is given back meanwhile */
	return work(x) + 1;
}

static void *thread_a(void *arg)
{
	(void)arg;
	if ((gettid() - btid) % RINGS != 0)
		return NULL;
	printf("hooked=%ld\n", hooked(5));
	return (void *)1;
}

int main(void)
{
	pthread_create(&b, NULL, thread_b, NULL);
	while (!btid)
		usleep(1000);
	for (int tries = 0; tries < 200000; tries++) {
		pthread_t a;
		void *done;
		if (pthread_create(&a, NULL, thread_a, NULL) != 0)
			return 1;
		pthread_join(a, &done);
		if (done)
			return 0;
	}
	fprintf(stderr, "no thread id matched\n");
	return 1;
}
