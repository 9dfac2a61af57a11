/* The benchmark tracee: THREADS threads each call leaf() N times.
 *   work N [THREADS [floor]]
 * With "floor", leaf() executes an int3 (brk #0) of its own instead: under
 * bench/floor, each call then costs exactly one trap, one wait4 and one
 * PTRACE_CONT, the floor of any ptrace probe. With BENCH_LOOP_NS in the
 * environment it prints on stderr how long its threads took, start to
 * join, in nanoseconds: the tracee's own time, for probes that never
 * stop it (whose tracer may still be writing when the threads are done),
 * and the CPU time its threads spent in their loops, summed: what the
 * threads themselves paid, whoever else ran on the CPUs meanwhile. With
 * BENCH_CPU=N in the environment its threads run on CPU N only.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static long n;
static int floor_mode;
static long cpu_ns;

__attribute__((noinline, noipa)) long leaf(long a, long b) { return a * 2 + b; }

__attribute__((noinline, noipa)) long leaf_trap(long a, long b)
{
#ifdef __aarch64__
	__asm__ volatile("brk #0");
#else
	__asm__ volatile("int3");
#endif
	return a * 2 + b;
}

static long thread_cpu_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
	return t.tv_sec * 1000000000L + t.tv_nsec;
}

static void *worker(void *arg)
{
	long s = 0, t0 = thread_cpu_ns();
	for (long i = 0; i < n; i++)
		s += floor_mode ? leaf_trap(i, (long)arg) : leaf(i, (long)arg);
	__atomic_add_fetch(&cpu_ns, thread_cpu_ns() - t0, __ATOMIC_RELAXED);
	return (void *)s;
}

int main(int argc, char **argv)
{
	n = atol(argv[1]);
	int threads = argc > 2 ? atoi(argv[2]) : 1;
	floor_mode = argc > 3 && strcmp(argv[3], "floor") == 0;
	pthread_t th[64];
	long total = 0;
	struct timespec t0, t1;
	if (threads < 1 || threads > 64)
		threads = 1;
	if (getenv("BENCH_CPU")) {
		cpu_set_t cpus;
		CPU_ZERO(&cpus);
		CPU_SET(atoi(getenv("BENCH_CPU")), &cpus);
		sched_setaffinity(0, sizeof cpus, &cpus);
	}
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (long i = 0; i < threads; i++)
		pthread_create(&th[i], NULL, worker, (void *)i);
	for (int i = 0; i < threads; i++) {
		void *r;
		pthread_join(th[i], &r);
		total += (long)r;
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	if (getenv("BENCH_LOOP_NS"))
		fprintf(stderr, "loop_ns=%ld cpu_ns=%ld\n", (t1.tv_sec - t0.tv_sec) * 1000000000L + t1.tv_nsec - t0.tv_nsec, cpu_ns);
	printf("%ld\n", total);
	return 0;
}
