/* The tracee of TestInjectKeepsTrapState: it ignores SIGTRAP and blocks
 * it, says "ready" and sleeps 1 s in one nanosleep, during which
 * system calls are injected into it; then it prints how long it slept (a
 * call cut short, not restarted, is too short; one restarted from its
 * start, not resumed, too long) and its SIGTRAP state. */
#include <signal.h>
#include <stdio.h>
#include <time.h>

int main(void)
{
	struct timespec a, b, d = {1, 0};
	sigset_t s;
	struct sigaction act;
	signal(SIGTRAP, SIG_IGN);
	sigemptyset(&s);
	sigaddset(&s, SIGTRAP);
	sigprocmask(SIG_BLOCK, &s, NULL);
	printf("ready\n");
	fflush(stdout);
	clock_gettime(CLOCK_MONOTONIC, &a);
	int r = nanosleep(&d, NULL);
	clock_gettime(CLOCK_MONOTONIC, &b);
	long ms = (b.tv_sec - a.tv_sec) * 1000 + (b.tv_nsec - a.tv_nsec) / 1000000;
	sigprocmask(SIG_BLOCK, NULL, &s);
	sigaction(SIGTRAP, NULL, &act);
	printf("nanosleep=%d ms=%ld blocked=%d ignored=%d\n", r, ms, sigismember(&s, SIGTRAP), act.sa_handler == SIG_IGN);
	return 0;
}
