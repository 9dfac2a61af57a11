/*
 * stress: the tracee of the load and fault suite (reliability_test.go).
 * It checks itself, so that a tracer that corrupts it is caught by the
 * tracee, not guessed at from outside.
 *
 * usage: stress spin T      T workers call work() and rec() in rounds
 *        stress cmd T       T workers call work() only when told (go N)
 *        stress exits R T   R rounds of T threads that end inside leave()
 *
 * spin and cmd read commands on stdin, one a line:
 *   check    compare the text of every loaded object with its file and
 *            look at the workers' results so far; print "check ok", or
 *            "check BAD" (a breakpoint left behind or a wrong result)
 *   go N     (cmd) every worker calls work() N times; then "done N"
 *   pause    (spin) every worker stops after its round; then the calls
 *            so far go to stderr ("calls=N") and "paused" to stdout
 *   resume   (spin) the workers go on; "resumed"
 *   exit N   _exit(N) at once, whatever the workers are doing
 *   stop     (or end of input) workers finish their round; print
 *            "worker I ok" (or BAD) for each, then "text ok" (or BAD)
 * At start, once every worker runs, "ready" is printed. stdout does not
 * depend on how long the workers ran; the number of calls of work() goes
 * to stderr as "calls=N". The main thread calls canary() every
 * millisecond or so: its first hit tells that the probes are in.
 *
 * exits: each thread calls work() 10 times, then leave(i), which ends the
 * thread inside it by pthread_exit (i%3 == 0), by the exit system call
 * (i%3 == 1), or returns (i%3 == 2). Prints "threads=N work=M" and exits 0.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <link.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "../textcheck.h"

volatile long scale = 3;

__attribute__((noinline)) long work(long i)
{
	__asm__ volatile("" ::: "memory");
	return i * scale + 1;
}

/* rec(n) = n(n+1)/2 through n nested calls, for return trampolines. */
__attribute__((noinline)) long rec(long n)
{
	__asm__ volatile("" ::: "memory");
	if (n == 0)
		return 0;
	return rec(n - 1) + n;
}

__attribute__((noinline)) void canary(void)
{
	__asm__ volatile("" ::: "memory");
}

#define ROUND 500
#define DEPTH 48
#define MAXW 64

struct worker {
	pthread_t th;
	long calls; /* of work() */
	long bad;   /* results that were wrong */
	long go;    /* cmd: calls asked for */
};

static struct worker workers[MAXW];
static int nworkers;
static atomic_int stopping;

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static long generation, finished;

/* any_bad tells whether a worker has seen a wrong result so far. */
static int any_bad(void)
{
	for (int i = 0; i < nworkers; i++)
		if (__atomic_load_n(&workers[i].bad, __ATOMIC_RELAXED))
			return 1;
	return 0;
}

/* One round: ROUND calls of work() and a recursion DEPTH deep, each
 * result checked against its closed form. */
static void round_of_calls(struct worker *w, long n)
{
	long acc = 0;

	for (long k = 0; k < n; k++) {
		long r = work(k);
		if (r != 3 * k + 1)
			w->bad++;
		acc += r;
		w->calls++;
	}
	if (acc != 3 * (n * (n - 1) / 2) + n)
		w->bad++;
}

static int paused, parked;

/* park holds a spinner while "pause" is in force. */
static void park(void)
{
	pthread_mutex_lock(&mu);
	if (paused) {
		parked++;
		pthread_cond_broadcast(&cv);
		while (paused && !atomic_load(&stopping))
			pthread_cond_wait(&cv, &mu);
		parked--;
	}
	pthread_mutex_unlock(&mu);
}

static void *spinner(void *p)
{
	struct worker *w = p;

	while (!atomic_load(&stopping)) {
		park();
		round_of_calls(w, ROUND);
		if (rec(DEPTH) != DEPTH * (DEPTH + 1) / 2)
			w->bad++;
	}
	return NULL;
}

static void *commanded(void *p)
{
	struct worker *w = p;
	long seen = 0;

	for (;;) {
		pthread_mutex_lock(&mu);
		while (generation == seen && !atomic_load(&stopping))
			pthread_cond_wait(&cv, &mu);
		seen = generation;
		pthread_mutex_unlock(&mu);
		if (atomic_load(&stopping))
			return NULL;
		round_of_calls(w, w->go);
		pthread_mutex_lock(&mu);
		finished++;
		pthread_cond_broadcast(&cv);
		pthread_mutex_unlock(&mu);
	}
}

/* readline reads a line of stdin into buf, waiting at most ms (-1: for
 * ever). It returns 1 for a line, 0 for none yet, -1 at end of input. */
static int readline(char *buf, size_t cap, int ms)
{
	static char in[4096];
	static size_t have;

	for (;;) {
		char *nl = memchr(in, '\n', have);
		if (nl) {
			size_t n = nl - in;
			if (n >= cap)
				n = cap - 1;
			memcpy(buf, in, n);
			buf[n] = 0;
			have -= nl + 1 - in;
			memmove(in, nl + 1, have);
			return 1;
		}
		struct pollfd pfd = {0, POLLIN, 0};
		int r = poll(&pfd, 1, ms);
		if (r == 0)
			return 0;
		if (r < 0)
			continue; /* EINTR */
		ssize_t got = read(0, in + have, sizeof in - have);
		if (got <= 0 || (have += got) == sizeof in)
			return -1;
	}
}

static int serve(int cmd)
{
	char line[256];

	for (;;) {
		int r = readline(line, sizeof line, 1);
		canary();
		if (r == 0)
			continue;
		if (r < 0 || strcmp(line, "stop") == 0)
			break;
		long n;
		if (strcmp(line, "check") == 0) {
			printf("check %s\n", text_intact() && !any_bad() ? "ok" : "BAD");
		} else if (sscanf(line, "exit %ld", &n) == 1) {
			_exit((int)n);
		} else if (!cmd && strcmp(line, "pause") == 0) {
			pthread_mutex_lock(&mu);
			paused = 1;
			while (parked < nworkers)
				pthread_cond_wait(&cv, &mu);
			long calls = 0;
			for (int i = 0; i < nworkers; i++)
				calls += workers[i].calls;
			pthread_mutex_unlock(&mu);
			fprintf(stderr, "calls=%ld\n", calls);
			printf("paused\n");
		} else if (!cmd && strcmp(line, "resume") == 0) {
			pthread_mutex_lock(&mu);
			paused = 0;
			pthread_cond_broadcast(&cv);
			pthread_mutex_unlock(&mu);
			printf("resumed\n");
		} else if (cmd && sscanf(line, "go %ld", &n) == 1) {
			pthread_mutex_lock(&mu);
			for (int i = 0; i < nworkers; i++)
				workers[i].go = n;
			finished = 0;
			generation++;
			pthread_cond_broadcast(&cv);
			while (finished < nworkers)
				pthread_cond_wait(&cv, &mu);
			pthread_mutex_unlock(&mu);
			printf("done %ld\n", n);
		} else {
			printf("unknown command %s\n", line);
		}
		fflush(stdout);
	}
	pthread_mutex_lock(&mu);
	atomic_store(&stopping, 1);
	pthread_cond_broadcast(&cv);
	pthread_mutex_unlock(&mu);
	long calls = 0;
	int bad = 0;
	for (int i = 0; i < nworkers; i++) {
		pthread_join(workers[i].th, NULL);
		printf("worker %d %s\n", i, workers[i].bad ? "BAD" : "ok");
		calls += workers[i].calls;
		bad |= workers[i].bad != 0;
	}
	int text_ok = text_intact();
	printf("text %s\n", text_ok ? "ok" : "BAD");
	fprintf(stderr, "calls=%ld\n", calls);
	return bad || !text_ok;
}

static atomic_long exits_work;

__attribute__((noinline)) long leave(long i)
{
	__asm__ volatile("" ::: "memory");
	if (i % 3 == 0)
		pthread_exit(NULL);
	if (i % 3 == 1)
		syscall(SYS_exit, 0); /* this thread only, no unwinding */
	return i;
}

static void *exiting(void *p)
{
	long i = (long)p;

	for (long k = 0; k < 10; k++)
		if (work(k) == 3 * k + 1)
			atomic_fetch_add(&exits_work, 1);
	leave(i);
	return NULL;
}

static int exits(int rounds, int threads)
{
	pthread_t ts[MAXW];
	long n = 0;

	for (int r = 0; r < rounds; r++) {
		for (int i = 0; i < threads; i++, n++)
			if (pthread_create(&ts[i], NULL, exiting, (void *)n) != 0)
				return 1;
		for (int i = 0; i < threads; i++)
			pthread_join(ts[i], NULL);
	}
	printf("threads=%ld work=%ld\n", n, atomic_load(&exits_work));
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 4 && strcmp(argv[1], "exits") == 0)
		return exits(atoi(argv[2]), atoi(argv[3]) % MAXW);
	if (argc != 3 || (strcmp(argv[1], "spin") && strcmp(argv[1], "cmd"))) {
		fprintf(stderr, "usage: stress spin|cmd THREADS | stress exits ROUNDS THREADS\n");
		return 2;
	}
	int cmd = strcmp(argv[1], "cmd") == 0;
	nworkers = atoi(argv[2]);
	if (nworkers < 1 || nworkers > MAXW)
		return 2;
	for (int i = 0; i < nworkers; i++)
		if (pthread_create(&workers[i].th, NULL, cmd ? commanded : spinner, &workers[i]) != 0)
			return 1;
	printf("ready\n");
	fflush(stdout);
	return serve(cmd);
}
