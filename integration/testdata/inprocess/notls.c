/*
 * notls: a thread made with clone(2) and no TLS of its own (no
 * CLONE_SETTLS): it shares its parent's thread control block, so the
 * thread id there is its parent's. Both threads call outer(who, i),
 * which calls work(who, i), N times (default 200000), and check every
 * result; it prints how many were wrong in each, the same traced and
 * untraced.
 */
#define _GNU_SOURCE
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

static volatile long sink;

__attribute__((noinline, noipa)) long work(long who, long i)
{
	sink += who ^ i;
	return who * 1000000 + i;
}

__attribute__((noinline, noipa)) long outer(long who, long i)
{
	return work(who, i) + 1;
}

static volatile int done;
static long n = 200000;
static long bad[2];

static int child(void *arg)
{
	for (long i = 0; i < n; i++)
		if (outer(1, i) != 1000000 + i + 1)
			bad[1]++;
	done = 1;
	/* No libc: its errno and the rest are the parent's. */
	syscall(SYS_exit, 0);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc > 1)
		n = atol(argv[1]);
	size_t size = 1 << 20;
	char *stack = malloc(size);
	if (clone(child, stack + size, CLONE_VM | CLONE_FS | CLONE_FILES | CLONE_SIGHAND | CLONE_THREAD | CLONE_SYSVSEM, NULL) < 0) {
		perror("clone");
		return 1;
	}
	for (long i = 0; i < n; i++)
		if (outer(0, i) != i + 1)
			bad[0]++;
	while (!done)
		;
	printf("bad=%ld,%ld\n", bad[0], bad[1]);
	return 0;
}
