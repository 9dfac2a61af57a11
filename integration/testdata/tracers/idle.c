/* A long-running tracee to attach to.
 *   idle
 *     calls leaf() once a millisecond until SIGUSR1, then prints how
 *     many calls it made and whether their results were all right.
 */
#include <signal.h>
#include <stdio.h>
#include <time.h>

static volatile sig_atomic_t stop;

__attribute__((noinline, noipa)) long leaf(long x) { return x * 3; }

__attribute__((noinline, noipa)) long tick(long i) { return leaf(i); }

static void on_usr1(int sig) { (void)sig; stop = 1; }

int main(void)
{
	signal(SIGUSR1, on_usr1);
	printf("ready\n");
	fflush(stdout);
	long calls = 0, bad = 0;
	struct timespec ms = {0, 1000000};
	while (!stop) {
		if (tick(calls) != calls * 3)
			bad++;
		calls++;
		nanosleep(&ms, NULL);
	}
	printf("calls>0=%d bad=%ld\n", calls > 0, bad);
	return 0;
}
