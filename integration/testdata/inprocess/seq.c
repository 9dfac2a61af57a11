/*
 * seq: tracee for the tests of in-process probes (probe/inproc.go). Every
 * call is work(who, i) with i counting each caller's calls from 0, so a
 * trace shows by itself whether a record is missing, doubled or garbled.
 *
 *   seq threads T N   T threads call work(thread, i) N times each
 *   seq signals N [H] the main thread calls work(0, i) N times, and on
 *                     until H (1,000) signals are handled, while a second
 *                     thread sends it SIGUSR1 as fast as it can; the
 *                     handler calls work(1, k), k counting handled
 *                     signals: records made inside records
 *   seq fork N        the child of a fork calls work(2, i) N times, then
 *                     the parent work(0, i) N times; then each calls
 *                     peek(&cell, 0), cell 2 in the child, 0 in the parent
 *   seq loop T        T threads call work(thread, i) until stdin closes,
 *                     pausing 1 ms every 64 calls
 *   seq paced N       the main thread calls work(0, i) N times, each
 *                     after 2 us of its own work, and says how many page
 *                     faults it took meanwhile (its first writes of
 *                     pages of memory: of a ring, when traced)
 *
 * It prints what it did, the same traced and untraced.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static volatile long sink;

__attribute__((noinline, noipa)) long work(long who, long i)
{
	sink += who ^ i;
	sink ^= 3;
	return who + i;
}

static long n;
static volatile int stop;

static void *caller(void *arg)
{
	long who = (long)arg, s = 0, i;
	for (i = 0; n ? i < n : !stop; i++) {
		long r = work(who, i);
		if (r != who + i) { /* a return gone wrong */
			fprintf(stderr, "work(%ld, %ld) = %ld\n", who, i, r);
			exit(1);
		}
		s += r;
		/* A loop runs until told: at a pace a trace can keep up with. */
		if (!n && i % 64 == 63)
			usleep(1000);
	}
	return (void *)i;
}

static void threads(int t, int loop)
{
	pthread_t th[64];
	long calls = 0;
	for (long i = 0; i < t; i++)
		pthread_create(&th[i], NULL, caller, (void *)i);
	if (loop) {
		char c;
		printf("ready\n");
		fflush(stdout);
		while (read(0, &c, 1) > 0)
			;
		stop = 1;
	}
	for (int i = 0; i < t; i++) {
		void *r;
		pthread_join(th[i], &r);
		calls += (long)r;
	}
	if (loop)
		printf("threads=%d\n", t); /* the calls depend on the time */
	else
		printf("threads=%d calls=%ld\n", t, calls);
}

static volatile sig_atomic_t handled;
static volatile int done;

static void on_usr1(int sig)
{
	(void)sig;
	work(1, handled);
	handled = handled + 1;
}

static void *sender(void *arg)
{
	pthread_t main = *(pthread_t *)arg;
	while (!done)
		pthread_kill(main, SIGUSR1);
	return NULL;
}

static void signals(long count, long want)
{
	pthread_t self = pthread_self(), th;
	signal(SIGUSR1, on_usr1);
	pthread_create(&th, NULL, sender, &self);
	while (!handled) /* the signals have begun */
		;
	long i;
	for (i = 0; i < count || handled < want; i++)
		work(0, i);
	done = 1;
	pthread_join(th, NULL);
	signal(SIGUSR1, SIG_IGN);
	/* Both vary: printed for the test to compare. */
	printf("main=%ld handled=%ld\n", i, (long)handled);
}

/* A cell each process of a fork writes its own value to: a probe that
 * reads it at peek shows whose memory it read. */
static long cell;

__attribute__((noinline, noipa)) long peek(const long *p, long i)
{
	return *p + i;
}

static void forked(long count)
{
	pid_t pid = fork();
	if (pid == 0) {
		cell = 2;
		for (long i = 0; i < count; i++)
			work(2, i);
		peek(&cell, 0);
		_exit(0);
	}
	int st;
	waitpid(pid, &st, 0);
	for (long i = 0; i < count; i++)
		work(0, i);
	peek(&cell, 0);
	printf("parent=%ld child=%ld status=%d\n", count, count, WEXITSTATUS(st));
}

static long now_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1000000000L + t.tv_nsec;
}

static void paced(long n)
{
	struct rusage r0, r1;
	getrusage(RUSAGE_THREAD, &r0);
	for (long i = 0; i < n; i++) {
		long until = now_ns() + 2000;
		while (now_ns() < until)
			;
		work(0, i);
	}
	getrusage(RUSAGE_THREAD, &r1);
	printf("calls=%ld faults=%ld\n", n, r1.ru_minflt - r0.ru_minflt + r1.ru_majflt - r0.ru_majflt);
}

int main(int argc, char **argv)
{
	if (argc >= 4 && strcmp(argv[1], "threads") == 0) {
		n = atol(argv[3]);
		threads(atoi(argv[2]), 0);
	} else if (argc >= 3 && strcmp(argv[1], "signals") == 0) {
		signals(atol(argv[2]), argc >= 4 ? atol(argv[3]) : 1000);
	} else if (argc >= 3 && strcmp(argv[1], "fork") == 0) {
		forked(atol(argv[2]));
	} else if (argc >= 3 && strcmp(argv[1], "loop") == 0) {
		threads(atoi(argv[2]), 1);
	} else if (argc >= 3 && strcmp(argv[1], "paced") == 0) {
		paced(atol(argv[2]));
	} else {
		fprintf(stderr, "usage: seq threads T N | signals N | fork N | loop T | paced N\n");
		return 2;
	}
	return 0;
}
