/* The tracee of TestInjectSyscallUnderSignals: counts SIGRTMIN (queued,
 * never merged), prints the count at SIGRTMIN+1 and exits. It spins, and
 * now and then sleeps, so that it is stopped in its own code and inside a
 * system call. */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static volatile sig_atomic_t got;

static void count(int sig) { (void)sig; got++; }

static void report(int sig) {
	char buf[32];
	int n = snprintf(buf, sizeof buf, "%d\n", (int)got);
	(void)sig;
	write(1, buf, n);
	_exit(0);
}

int main(void) {
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_flags = SA_RESTART;
	sa.sa_handler = count;
	/* The report must not cut in on a count. */
	sigaddset(&sa.sa_mask, SIGRTMIN + 1);
	sigaction(SIGRTMIN, &sa, 0);
	sa.sa_handler = report;
	sigaction(SIGRTMIN + 1, &sa, 0);
	printf("ready %d\n", SIGRTMIN); /* glibc's, not the kernel's 32 */
	fflush(stdout);
	for (unsigned long spins = 0;; spins++) {
		if ((spins & 0xffff) == 0) {
			struct timespec ts = {0, 20000};
			nanosleep(&ts, 0);
		}
	}
}
