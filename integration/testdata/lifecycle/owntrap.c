/*
 * owntrap: a program with a SIGTRAP handler of its own, which it uses:
 * a thread runs a breakpoint instruction of its own every millisecond,
 * and the handler counts it, checks that the kernel sent it (not a
 * kill: si_code above 0) and steps past it. Four threads call work(i)
 * and check every result. At SIGUSR1 it prints "handled N lost L": the
 * breakpoints handled so far, and those run but not (yet) handled.
 * Until SIGTERM; then it prints that line and "ok" if every breakpoint
 * that reached the handler came from the kernel and every result was
 * right, else "BAD ..." and exits 1.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <ucontext.h>
#include <unistd.h>

static atomic_long executed, handled, notkernel, wrong;

__attribute__((noinline)) long work(long x)
{
	__asm__ volatile("" ::: "memory");
	return x * 3 + (x >> 2);
}

static void on_trap(int sig, siginfo_t *info, void *ctx)
{
	if (info->si_code <= 0)
		atomic_fetch_add(&notkernel, 1);
	atomic_fetch_add(&handled, 1);
#ifdef __aarch64__
	((ucontext_t *)ctx)->uc_mcontext.pc += 4; /* brk leaves pc at itself */
#else
	(void)ctx; /* int3 leaves it past */
#endif
}

static void *trapper(void *arg)
{
	for (;;) {
		atomic_fetch_add(&executed, 1);
#ifdef __aarch64__
		__asm__ volatile("brk #0x7" ::: "memory");
#else
		__asm__ volatile("int3" ::: "memory");
#endif
		usleep(1000);
	}
	return arg;
}

static void *worker(void *arg)
{
	for (long n = 0;; n++) {
		long s = 0, want = 0;
		for (long i = 0; i < 64; i++) {
			s += work(n + i);
			want += (n + i) * 3 + ((n + i) >> 2);
		}
		if (s != want)
			atomic_fetch_add(&wrong, 1);
		if ((n & 255) == 0)
			usleep(100);
	}
	return arg;
}

int main(void)
{
	sigset_t term;
	sigemptyset(&term);
	sigaddset(&term, SIGTERM);
	sigaddset(&term, SIGUSR1);
	pthread_sigmask(SIG_BLOCK, &term, NULL);
	struct sigaction sa = {.sa_sigaction = on_trap, .sa_flags = SA_SIGINFO | SA_RESTART};
	sigaction(SIGTRAP, &sa, NULL);
	pthread_t t;
	pthread_create(&t, NULL, trapper, NULL);
	for (int i = 0; i < 4; i++)
		pthread_create(&t, NULL, worker, NULL);
	printf("ready\n");
	fflush(stdout);
	int sig;
	do {
		sigwait(&term, &sig);
		/* (The trapper may be between its count and its breakpoint.) */
		long h = atomic_load(&handled);
		printf("handled %ld lost %ld\n", h, atomic_load(&executed) - h);
		fflush(stdout);
	} while (sig == SIGUSR1);
	if (atomic_load(&handled) == 0 || atomic_load(&notkernel) || atomic_load(&wrong)) {
		printf("BAD handled %ld not from the kernel %ld wrong %ld\n", atomic_load(&handled), atomic_load(&notkernel), atomic_load(&wrong));
		return 1;
	}
	printf("ok\n");
	return 0;
}
