/* The benchmark tracee: THREADS threads each call leaf() N times.
 *   work N [THREADS [floor]]
 * With "floor", leaf() executes an int3 of its own instead: under
 * bench/floor, each call then costs exactly one trap, one wait4 and one
 * PTRACE_CONT, the floor of any ptrace probe.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static long n;
static int floor_mode;

__attribute__((noinline, noipa)) long leaf(long a, long b) { return a * 2 + b; }

__attribute__((noinline, noipa)) long leaf_trap(long a, long b)
{
	__asm__ volatile("int3");
	return a * 2 + b;
}

static void *worker(void *arg)
{
	long s = 0;
	for (long i = 0; i < n; i++)
		s += floor_mode ? leaf_trap(i, (long)arg) : leaf(i, (long)arg);
	return (void *)s;
}

int main(int argc, char **argv)
{
	n = atol(argv[1]);
	int threads = argc > 2 ? atoi(argv[2]) : 1;
	floor_mode = argc > 3 && strcmp(argv[3], "floor") == 0;
	pthread_t th[64];
	long total = 0;
	if (threads < 1 || threads > 64)
		threads = 1;
	for (long i = 0; i < threads; i++)
		pthread_create(&th[i], NULL, worker, (void *)i);
	for (int i = 0; i < threads; i++) {
		void *r;
		pthread_join(th[i], &r);
		total += (long)r;
	}
	printf("%ld\n", total);
	return 0;
}
