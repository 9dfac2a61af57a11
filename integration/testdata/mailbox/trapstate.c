/*
 * trapstate: tracee for the tests of a program's own SIGTRAP state
 * (tracee/trapstate.go). A breakpoint's SIGTRAP is forced by the kernel:
 * where SIGTRAP is blocked in the thread or ignored, the kernel resets its
 * action to SIG_DFL and unblocks it in the thread. Each mode checks that
 * calls of the probed work() leave SIGTRAP as the program set it.
 *
 *   trapstate handler T N    a SIGTRAP handler; T threads block SIGTRAP
 *                            and call work() N times each, check their
 *                            mask and the action, then unblock SIGTRAP
 *                            and raise it: each must reach the handler
 *   trapstate default T N    the same without a handler: only the masks
 *   trapstate ignored T N    SIG_IGN, not blocked: raised, it is ignored
 *                            (the action itself is not read: while
 *                            traced it may read SIG_DFL, see README)
 *   trapstate in-handler N   a SIGTRAP handler that calls work(), raised
 *                            N times: the handler runs every time
 *   trapstate loop MODE T    as MODE (handler, default or ignored), the
 *                            threads calling work() until stdin closes;
 *                            then the action is read in every mode
 *
 * It prints what it found, the same traced and untraced, and exits 1 if
 * any check failed.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static volatile int sink;

/* Long enough to be jump-optimised, and called so at every entry. */
__attribute__((noinline, noipa)) int work(int x)
{
	sink += x;
	sink ^= 3;
	return 2 * x + 1;
}

static volatile sig_atomic_t handled;
static __thread volatile sig_atomic_t handled_here; /* by this thread */
/* Threads raise SIGTRAP at once: the count is atomic, or two handlers
 * may add one each and leave one more. */
static void plain_trap(int sig) { (void)sig; __atomic_add_fetch(&handled, 1, __ATOMIC_RELAXED); handled_here++; }
static void calling_trap(int sig) { (void)sig; work(__atomic_add_fetch(&handled, 1, __ATOMIC_RELAXED)); }

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static int failures, calls;
static long per_thread;
static volatile int stop;
static const char *mode;
static int read_action = 1;

static const char *action(void)
{
	struct sigaction a;
	sigaction(SIGTRAP, NULL, &a);
	if (a.sa_handler == SIG_DFL)
		return "default";
	if (a.sa_handler == SIG_IGN)
		return "ignored";
	if (a.sa_handler == plain_trap)
		return "handler";
	if (a.sa_handler == calling_trap)
		return "calling-handler";
	return "unknown";
}

static int trap_blocked(void)
{
	sigset_t s;
	pthread_sigmask(SIG_BLOCK, NULL, &s);
	return sigismember(&s, SIGTRAP);
}

static void fail(const char *what)
{
	pthread_mutex_lock(&mu);
	failures++;
	pthread_mutex_unlock(&mu);
	fprintf(stderr, "trapstate: thread %d: %s (blocked=%d action=%s)\n", gettid(), what, trap_blocked(), action());
}

/* One thread's share: block SIGTRAP (but when ignored), call work(),
 * check that nothing changed, then unblock it and raise it. */
static void *worker(void *arg)
{
	int ignored = strcmp(mode, "ignored") == 0, n = 0, sum = 0;
	const char *want = strcmp(mode, "default") == 0 ? "default" : ignored ? "ignored" : "handler";
	sigset_t trap;
	(void)arg;
	sigemptyset(&trap);
	sigaddset(&trap, SIGTRAP);
	if (!ignored)
		pthread_sigmask(SIG_BLOCK, &trap, NULL);
	for (long i = 0; per_thread ? i < per_thread : !stop; i++, n++)
		sum += work((int)i);
	if (trap_blocked() != !ignored)
		fail("SIGTRAP's mask changed");
	if (read_action && strcmp(action(), want) != 0)
		fail("SIGTRAP's action changed");
	if (strcmp(want, "default") != 0) {
		int before = handled_here;
		pthread_sigmask(SIG_UNBLOCK, &trap, NULL);
		pthread_kill(pthread_self(), SIGTRAP);
		if (handled_here != before + !ignored)
			fail("a raised SIGTRAP was not handled as set");
	}
	pthread_mutex_lock(&mu);
	calls += n;
	pthread_mutex_unlock(&mu);
	return (void *)(long)sum;
}

static void threads(int t)
{
	pthread_t th[64];
	for (int i = 0; i < t; i++)
		pthread_create(&th[i], NULL, worker, NULL);
	if (!per_thread) {
		char c;
		printf("ready\n");
		fflush(stdout);
		while (read(0, &c, 1) > 0)
			;
		stop = 1;
	}
	for (int i = 0; i < t; i++)
		pthread_join(th[i], NULL);
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: trapstate handler|default|ignored T N | in-handler N | loop MODE T\n");
		return 2;
	}
	mode = argv[1];
	if (strcmp(mode, "loop") == 0) {
		if (argc != 4)
			return 2;
		mode = argv[2];
		argv++;
		argc = 3;
	}
	if (strcmp(mode, "in-handler") == 0) {
		int n = atoi(argv[2]);
		signal(SIGTRAP, calling_trap);
		for (int i = 0; i < n; i++)
			raise(SIGTRAP);
		if (handled != n)
			fail("the handler did not run every time");
		if (strcmp(action(), "calling-handler") != 0 || trap_blocked())
			fail("SIGTRAP changed");
		printf("in-handler: raised=%d handled=%d action=%s blocked=%d\n", n, (int)handled, action(), trap_blocked());
		return failures != 0;
	}
	int t = atoi(argv[2]);
	if (t < 1 || t > 64)
		return 2;
	per_thread = argc > 3 ? atol(argv[3]) : 0;
	read_action = per_thread == 0 || strcmp(mode, "ignored") != 0;
	if (strcmp(mode, "handler") == 0)
		signal(SIGTRAP, plain_trap);
	else if (strcmp(mode, "ignored") == 0)
		signal(SIGTRAP, SIG_IGN);
	threads(t);
	printf("%s: threads=%d handled=%d action=%s failures=%d\n", mode, t, (int)handled, read_action ? action() : "-", failures);
	if (per_thread)
		printf("calls=%d\n", calls);
	return failures != 0;
}
