/*
 * mailbox: tracee for the mailbox tests (probe/mailbox.go).
 *
 *   mailbox threads T N   T threads, all alive at once (their ids span
 *                         more than the mailbox's 256 slots when T > 256,
 *                         so some share a slot), each calls leaf() N times
 *   mailbox signals N     main calls leaf() N times while an interval
 *                         timer's SIGALRM handler calls it too: handlers
 *                         run inside claims of the slot, and nest calls
 *
 * leaf(a, b) returns 3a + b, and every caller checks it. At the end it
 * prints "calls=C bad=B": the calls of leaf() made, and those whose
 * result was wrong.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>

__attribute__((noinline, noipa)) long leaf(long a, long b) { return 3 * a + b; }

static long per_thread;
static pthread_barrier_t all_alive;
static long calls, bad;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;

static void *worker(void *arg)
{
	long id = (long)arg, wrong = 0;
	pthread_barrier_wait(&all_alive);
	for (long i = 0; i < per_thread; i++)
		wrong += leaf(i, id) != 3 * i + id;
	pthread_mutex_lock(&mu);
	calls += per_thread;
	bad += wrong;
	pthread_mutex_unlock(&mu);
	return NULL;
}

static volatile sig_atomic_t in_handler;
static volatile long handler_calls, handler_bad;

static void on_alarm(int sig)
{
	long n = handler_calls;
	(void)sig;
	handler_bad += leaf(n, -1) != 3 * n - 1;
	handler_calls = n + 1;
}

int main(int argc, char **argv)
{
	if (argc == 4 && strcmp(argv[1], "threads") == 0) {
		long t = atol(argv[2]);
		pthread_t *th = calloc(t, sizeof *th);
		per_thread = atol(argv[3]);
		pthread_barrier_init(&all_alive, NULL, t);
		for (long i = 0; i < t; i++)
			if (pthread_create(&th[i], NULL, worker, (void *)i) != 0) {
				perror("pthread_create");
				return 1;
			}
		for (long i = 0; i < t; i++)
			pthread_join(th[i], NULL);
	} else if (argc == 3 && strcmp(argv[1], "signals") == 0) {
		long n = atol(argv[2]);
		struct sigaction sa;
		memset(&sa, 0, sizeof sa);
		sa.sa_handler = on_alarm;
		sa.sa_flags = SA_RESTART;
		sigaction(SIGALRM, &sa, NULL);
		struct itimerval it = {{0, 200}, {0, 200}};
		setitimer(ITIMER_REAL, &it, NULL);
		for (long i = 0; i < n; i++)
			bad += leaf(i, 1) != 3 * i + 1;
		memset(&it, 0, sizeof it);
		setitimer(ITIMER_REAL, &it, NULL);
		calls = n + handler_calls;
		bad += handler_bad;
	} else {
		fprintf(stderr, "usage: mailbox threads T N | mailbox signals N\n");
		return 2;
	}
	printf("calls=%ld bad=%ld\n", calls, bad);
	return 0;
}
