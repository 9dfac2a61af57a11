/* sdt: static probes (<sys/sdt.h>) for the sdt: tests.
 *
 *   sdt N       calls step(i) for i < N: a probe demo:tick(i, -i) in it,
 *               and demo:gated(i) behind its semaphore (the program runs
 *               it, and counts it, only while a tracer has it enabled);
 *               then demo:done(sum) and prints "sum=S gated=G"
 *   sdt loop    prints "ready", then calls step(i) every 100 us until
 *               stdin closes; each line it reads makes it print
 *               "sem=V gated=G" (its semaphore now); then as above
 *   sdt fork N  forks; parent and child each call step(i) for i < N and
 *               print "child gated=G" / "parent gated=G" (in that order)
 *   sdt twice N calls pair(i, 100 + i) and one(i) for i < N: a probe
 *               demo:twice in each, its argument 100 + i, then i, kept
 *               in another register at each site
 *   sdt lib N   dlopens libsdtlib.so (beside it) and calls its
 *               libstep(i) N times: a probe demolib:hit(i) there, with
 *               no semaphore
 */
#define _SDT_HAS_SEMAPHORES 1
#include <sys/sdt.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* Each probe of a file built with _SDT_HAS_SEMAPHORES has one; only
 * gated's is tested by the program. */
#define SEMAPHORE(name) __extension__ unsigned short name __attribute__((unused)) __attribute__((section(".probes")))
SEMAPHORE(demo_tick_semaphore);
SEMAPHORE(demo_gated_semaphore);
SEMAPHORE(demo_done_semaphore);
SEMAPHORE(demo_twice_semaphore);

static long gated, sum;

__attribute__((noinline)) void step(long i)
{
	int neg = -(int)i;
	DTRACE_PROBE2(demo, tick, i, neg);
	if (demo_gated_semaphore) {
		gated++;
		DTRACE_PROBE1(demo, gated, i);
	}
	sum += i;
}

__attribute__((noinline)) long pair(long a, long b)
{
	DTRACE_PROBE1(demo, twice, b);
	return a + b;
}

__attribute__((noinline)) long one(long a)
{
	DTRACE_PROBE1(demo, twice, a);
	return a;
}

int main(int argc, char **argv)
{
	if (argc == 3 && strcmp(argv[1], "fork") == 0) {
		long n = atol(argv[2]);
		pid_t pid = fork();
		for (long i = 0; i < n; i++)
			step(i);
		if (pid == 0) {
			printf("child gated=%ld\n", gated);
			return 0;
		}
		waitpid(pid, NULL, 0);
		printf("parent gated=%ld\n", gated);
		return 0;
	}
	if (argc == 3 && strcmp(argv[1], "twice") == 0) {
		long n = atol(argv[2]), s = 0;
		for (long i = 0; i < n; i++)
			s += pair(i, 100 + i) + one(i);
		printf("twice=%ld\n", s);
		return 0;
	}
	if (argc == 3 && strcmp(argv[1], "lib") == 0) {
		char path[PATH_MAX];
		snprintf(path, sizeof path, "%s/libsdtlib.so", dirname(strdup(argv[0])));
		void *h = dlopen(path, RTLD_NOW);
		if (!h) {
			fprintf(stderr, "%s\n", dlerror());
			return 1;
		}
		long (*libstep)(long) = (long (*)(long))dlsym(h, "libstep");
		long n = atol(argv[2]), s = 0;
		for (long i = 0; i < n; i++)
			s += libstep(i);
		printf("libsum=%ld\n", s);
		return 0;
	}
	if (argc == 2 && strcmp(argv[1], "loop") == 0) {
		fcntl(0, F_SETFL, O_NONBLOCK);
		printf("ready\n");
		fflush(stdout);
		for (long i = 0;; i++) {
			char buf[64];
			ssize_t n = read(0, buf, sizeof buf);
			if (n == 0)
				break;
			if (n > 0) {
				printf("sem=%u gated=%ld\n", demo_gated_semaphore, gated);
				fflush(stdout);
			}
			step(i);
			usleep(100);
		}
	} else {
		long n = argc > 1 ? atol(argv[1]) : 3;
		for (long i = 0; i < n; i++)
			step(i);
	}
	DTRACE_PROBE1(demo, done, sum);
	printf("sum=%ld gated=%ld\n", sum, gated);
	return 0;
}
