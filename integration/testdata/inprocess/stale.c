/*
 * stale: use(p, i) called with p a page mapped just before, holding
 * 1000 + i, then again with the page unmapped just before: a probe that
 * reads +0(%di) copies from memory the tracer's table of readable memory
 * may still list (it is written every few milliseconds). use() reads
 * nothing itself.
 *
 *   stale N [US] N rounds, each page held mapped US microseconds before
 *                it goes (the table has time to list it); prints their
 *                count
 *   stale loop   rounds until stdin closes (prints "ready" first)
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static volatile long sink;
static volatile int stop;

__attribute__((noinline, noipa)) long use(long *p, long i)
{
	sink += i + (p != NULL);
	return i;
}

static void *reader(void *arg)
{
	char c;
	(void)arg;
	while (read(0, &c, 1) > 0)
		;
	stop = 1;
	return NULL;
}

int main(int argc, char **argv)
{
	if (argc < 2)
		return 2;
	int loop = strcmp(argv[1], "loop") == 0;
	long n = loop ? 0 : atol(argv[1]), page = sysconf(_SC_PAGESIZE), i;
	long hold = argc > 2 ? atol(argv[2]) : 0;
	if (loop) {
		pthread_t th;
		pthread_create(&th, NULL, reader, NULL);
		printf("ready\n");
		fflush(stdout);
	}
	for (i = 0; loop ? !stop : i < n; i++) {
		long *p = mmap(NULL, page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (p == MAP_FAILED)
			return 1;
		*p = 1000 + i;
		use(p, i);
		if (hold)
			usleep(hold);
		munmap(p, page);
		use(p, i);
		if (loop)
			usleep(100);
	}
	printf(loop ? "rounds done\n" : "rounds=%ld\n", i);
	return 0;
}
