// fentry: built with -pg -mfentry as a PIE, every function starts with
// `call *__fentry__@GOTPCREL(%rip)`: a call through memory, which a
// jump-optimised entry must copy into its detour.
//
//   fentry N [D]       N rounds of work(D), D 20 if not given; prints the
//                      sum and how many times fib ran
//   fentry threads T [prof]
//                      T threads checking every result until SIGTERM:
//                      prints "ready", then "ok" if all were right; with
//                      prof, a profiling timer (SIGPROF every 1 ms of CPU,
//                      to a handler that counts) interrupts them anywhere
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <unistd.h>

static __thread long calls;

// With -DFRAME_BYTES=N, fib and work keep N bytes of locals: over 512,
// gcc's arm64 prologue lowers sp first (`sub sp, sp, #N; stp x29, x30,
// [sp]`, or `mov x12, #N; sub sp, sp, x12` where N fits no immediate),
// not with the record's `stp x29, x30, [sp, #-N]!`.
#ifdef FRAME_BYTES
#define FRAME(n) \
	volatile char frame[FRAME_BYTES]; \
	frame[(n) & 63] = (char)(n)
#else
#define FRAME(n) (void)0
#endif

__attribute__((noinline)) long fib(long n)
{
	FRAME(n);
	calls++;
	return n < 2 ? n : fib(n - 1) + fib(n - 2);
}

__attribute__((noinline)) long work(long n)
{
	FRAME(n);
	return fib(n);
}

static long expect(long n)
{
	long a = 0, b = 1;
	for (long i = 0; i < n; i++) {
		long c = a + b;
		a = b;
		b = c;
	}
	return a;
}

static volatile sig_atomic_t stop;
static volatile int bad;

static void on_term(int sig) { (void)sig; stop = 1; }

static volatile long profs;

static void on_prof(int sig) { (void)sig; profs++; }

static void *checker(void *arg)
{
	for (long i = (long)arg; !stop; i++) {
		long n = 5 + i % 12;
		if (work(n) != expect(n))
			bad = 1;
		if (i % 64 == 0)
			usleep(50);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	if (argc >= 3 && strcmp(argv[1], "threads") == 0) {
		int n = atoi(argv[2]);
		pthread_t t[16];
		signal(SIGTERM, on_term);
		if (argc == 4 && strcmp(argv[3], "prof") == 0) {
			struct itimerval every = {{0, 1000}, {0, 1000}};
			signal(SIGPROF, on_prof);
			setitimer(ITIMER_PROF, &every, NULL);
		}
		for (int i = 0; i < n && i < 16; i++)
			pthread_create(&t[i], NULL, checker, (void *)(long)i);
		printf("ready\n");
		fflush(stdout);
		for (int i = 0; i < n && i < 16; i++)
			pthread_join(t[i], NULL);
		printf(bad ? "bad\n" : "ok\n");
		return bad;
	}
	long rounds = argc > 1 ? atol(argv[1]) : 1, depth = argc > 2 ? atol(argv[2]) : 20, sum = 0;
	for (long i = 0; i < rounds; i++)
		sum += work(depth);
	printf("sum=%ld calls=%ld\n", sum, calls);
	return 0;
}
