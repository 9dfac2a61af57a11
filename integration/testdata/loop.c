/*
 * loop: short-lived tracee for probe's integration tests.
 *
 * usage: loop [N [T [R]]]
 *   N  calls of work() per thread (default 10)
 *   T  number of threads (default 1: work() is called from the main thread;
 *      T > 1: T pthreads each call work() N times)
 *   R  calls of rand() made by the main thread after the workers finished
 *      (default 0)
 *
 * environment:
 *   LOOP_EXIT=S  exit with status S (default 0)
 *   LOOP_KILL=N  after printing, kill itself with signal N
 *   LOOP_USR1=K  before the work, raise SIGUSR1 K times (a handler counts
 *                them) and print " usr1=<count>"
 *
 * Output is deterministic, traced or not:
 *   stdout: "sum=<sum> calls=<T*N>[ rand=<sum>][ usr1=<count>]\n"
 *   stderr: "loop: done\n"
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

volatile int scale = 3;
volatile int last;

/* A data object: probing it must be rejected. */
int counter_data;

__attribute__((noinline, noipa)) int work(int i)
{
	int r = i * scale + (i >> 2);

	last = r;
	return r & 0xffff;
}

struct worker {
	pthread_t th;
	int n;
	long sum;
};

static void *run_worker(void *p)
{
	struct worker *w = p;
	long s = 0;

	for (int i = 0; i < w->n; i++)
		s += work(i);
	w->sum = s;
	return NULL;
}

static volatile sig_atomic_t usr1_count;

static void on_usr1(int sig)
{
	(void)sig;
	usr1_count++;
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 10;
	int t = argc > 2 ? atoi(argv[2]) : 1;
	int r = argc > 3 ? atoi(argv[3]) : 0;
	const char *e;
	int k;
	long sum = 0, rs = 0;
	struct worker *ws;

	if (t < 1)
		t = 1;

	e = getenv("LOOP_USR1");
	k = e ? atoi(e) : 0;
	if (k > 0) {
		struct sigaction sa;

		memset(&sa, 0, sizeof sa);
		sa.sa_handler = on_usr1;
		sigemptyset(&sa.sa_mask);
		sigaction(SIGUSR1, &sa, NULL);
		for (int i = 0; i < k; i++)
			raise(SIGUSR1);
	}

	ws = calloc(t, sizeof *ws);
	if (!ws) {
		perror("calloc");
		return 111;
	}
	if (t == 1) {
		ws[0].n = n;
		run_worker(&ws[0]);
	} else {
		for (int i = 0; i < t; i++) {
			ws[i].n = n;
			if (pthread_create(&ws[i].th, NULL, run_worker, &ws[i]) != 0) {
				perror("pthread_create");
				return 111;
			}
		}
		for (int i = 0; i < t; i++)
			pthread_join(ws[i].th, NULL);
	}
	for (int i = 0; i < t; i++)
		sum += ws[i].sum;
	counter_data = t;

	if (r > 0) {
		srand(12345);
		for (int i = 0; i < r; i++)
			rs += rand() % 1000;
	}

	printf("sum=%ld calls=%ld", sum, (long)t * n);
	if (r > 0)
		printf(" rand=%ld", rs);
	if (k > 0)
		printf(" usr1=%d", (int)usr1_count);
	printf("\n");
	fflush(stdout);
	fprintf(stderr, "loop: done\n");

	e = getenv("LOOP_KILL");
	if (e && atoi(e) > 0) {
		signal(atoi(e), SIG_DFL);
		raise(atoi(e));
	}
	e = getenv("LOOP_EXIT");
	return e ? atoi(e) : 0;
}
