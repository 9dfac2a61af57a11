/* sleeper MODE MS: says "ready", then sleeps MS milliseconds one way
 * (nanosleep, clock_nanosleep, poll, futex: a timed condition wait) and
 * says whether the sleep lasted its whole length and returned as it
 * should; a probe that attaches and detaches meanwhile must change
 * neither. */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static long now_ms(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

int main(int argc, char **argv)
{
	if (argc != 3)
		return 2;
	long ms = atol(argv[2]);
	struct timespec d = {ms / 1000, (ms % 1000) * 1000000};
	printf("ready\n");
	fflush(stdout);
	long t0 = now_ms();
	int r;
	if (strcmp(argv[1], "nanosleep") == 0) {
		r = nanosleep(&d, NULL);
	} else if (strcmp(argv[1], "clock") == 0) {
		r = clock_nanosleep(CLOCK_MONOTONIC, 0, &d, NULL);
	} else if (strcmp(argv[1], "poll") == 0) {
		r = poll(NULL, 0, (int)ms);
	} else {
		/* On the monotonic clock, as the sleep is measured: a step of
		 * the wall clock (this VM's jumps) would end it early. */
		pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
		pthread_condattr_t attr;
		pthread_cond_t cv;
		pthread_condattr_init(&attr);
		pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
		pthread_cond_init(&cv, &attr);
		struct timespec until;
		clock_gettime(CLOCK_MONOTONIC, &until);
		until.tv_sec += d.tv_sec;
		until.tv_nsec += d.tv_nsec;
		if (until.tv_nsec >= 1000000000) {
			until.tv_sec++;
			until.tv_nsec -= 1000000000;
		}
		pthread_mutex_lock(&mu);
		r = pthread_cond_timedwait(&cv, &mu, &until) == ETIMEDOUT ? 0 : -1;
		pthread_mutex_unlock(&mu);
	}
	long slept = now_ms() - t0;
	printf("%s: returned %d, whole sleep %s\n", argv[1], r, slept >= ms ? "yes" : "no");
	return 0;
}
