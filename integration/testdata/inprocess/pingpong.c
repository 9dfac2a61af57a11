// Two threads that take turns: main calls ping(i), then the worker
// pong(i), n times. Their probes' events must come in that order.
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int turn; // 0: main's, 1: the worker's
static long n;
static volatile long sum;

__attribute__((noinline)) void ping(long i) { sum += i; }
__attribute__((noinline)) void pong(long i) { sum -= i; }

static void wait_turn(int mine) {
	pthread_mutex_lock(&mu);
	while (turn != mine)
		pthread_cond_wait(&cv, &mu);
	pthread_mutex_unlock(&mu);
}

static void pass_turn(int next) {
	pthread_mutex_lock(&mu);
	turn = next;
	pthread_cond_signal(&cv);
	pthread_mutex_unlock(&mu);
}

static void *worker(void *arg) {
	(void)arg;
	for (long i = 0; i < n; i++) {
		wait_turn(1);
		pong(i);
		pass_turn(0);
	}
	return NULL;
}

int main(int argc, char **argv) {
	n = argc > 1 ? atol(argv[1]) : 1000;
	pthread_t th;
	pthread_create(&th, NULL, worker, NULL);
	for (long i = 0; i < n; i++) {
		wait_turn(0);
		ping(i);
		pass_turn(1);
	}
	pthread_join(th, NULL);
	printf("sum=%ld\n", sum);
	return 0;
}
