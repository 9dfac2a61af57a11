/*
 * spin: long-running tracee for probe attach tests.
 *
 * usage: spin [T [MS [STOPFILE]]]
 *   T         number of worker threads (default 1), named "spin-w0".."spin-w<T-1>"
 *   MS        run for at most MS milliseconds from start (default 10000)
 *   STOPFILE  stop early once this file exists
 *
 * Each worker calls work(k) for k = 0, 1, 2, ... and, every 10 calls,
 * sleeps 1 ms and checks the deadline and STOPFILE: at most ~10,000
 * calls a second, whether each stops the thread or is recorded in it (a
 * test reads every event).
 *
 * Once every worker is named and about to start, main prints "ready" on
 * stdout (flushed). At the end it prints
 *   "total=<calls> check=<calls whose result was right>"
 * and, if a worker's running sum of work()'s results does not match the
 * closed form for its number of calls, "check=BAD" instead. A tracer that
 * corrupts registers or the stack makes total != check (or check=BAD).
 * Exits 0.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

volatile long scale = 3;
volatile long last;

__attribute__((noinline, noipa)) long work(long i)
{
	long r = i * scale + 1;

	last = r;
	return r;
}

struct spinner {
	pthread_t th;
	int idx;
	long count; /* calls of work() */
	long good;  /* calls whose result was 3k+1 */
	long acc;   /* sum of results */
};

static struct timespec start;
static long limit_ms;
static const char *stopfile;
static pthread_barrier_t barrier;

static long elapsed_ms(void)
{
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	return (now.tv_sec - start.tv_sec) * 1000 +
	       (now.tv_nsec - start.tv_nsec) / 1000000;
}

static void *spin(void *p)
{
	struct spinner *s = p;
	char name[16];

	snprintf(name, sizeof name, "spin-w%d", s->idx);
	pthread_setname_np(pthread_self(), name);
	pthread_barrier_wait(&barrier);

	for (long k = 0;; k++) {
		long r = work(k);

		s->count++;
		s->acc += r;
		if (r == 3 * k + 1)
			s->good++;
		if (k % 10 == 9) {
			struct timespec ts = {0, 1000000};

			nanosleep(&ts, NULL);
			if (elapsed_ms() >= limit_ms)
				break;
			if (stopfile && access(stopfile, F_OK) == 0)
				break;
		}
	}
	return NULL;
}

int main(int argc, char **argv)
{
	int t = argc > 1 ? atoi(argv[1]) : 1;
	long total = 0, check = 0;
	int bad = 0;
	struct spinner *ss;

	limit_ms = argc > 2 ? atol(argv[2]) : 10000;
	stopfile = argc > 3 ? argv[3] : NULL;
	if (t < 1)
		t = 1;
	clock_gettime(CLOCK_MONOTONIC, &start);

	ss = calloc(t, sizeof *ss);
	if (!ss) {
		perror("calloc");
		return 111;
	}
	pthread_barrier_init(&barrier, NULL, t + 1);
	for (int i = 0; i < t; i++) {
		ss[i].idx = i;
		if (pthread_create(&ss[i].th, NULL, spin, &ss[i]) != 0) {
			perror("pthread_create");
			return 111;
		}
	}
	pthread_barrier_wait(&barrier);
	printf("ready\n");
	fflush(stdout);

	for (int i = 0; i < t; i++)
		pthread_join(ss[i].th, NULL);
	for (int i = 0; i < t; i++) {
		long n = ss[i].count;

		total += n;
		check += ss[i].good;
		if (ss[i].acc != 3 * n * (n - 1) / 2 + n)
			bad = 1;
	}
	if (bad)
		printf("total=%ld check=BAD\n", total);
	else
		printf("total=%ld check=%ld\n", total, check);
	return 0;
}
