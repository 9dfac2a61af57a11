// A server whose compute() the live-patching tests replace while it runs:
// one request a line on stdin ("compute N", ...), one answer a line
// on stdout. compute(N) with N < 0 sleeps -N ms inside compute first, so
// that a test can hold a thread in it; a second thread idles, so that
// every stack the patch checks is not only main's ("alone": none).
//
// Built with -DOWN_MALLOC, it has its own allocator, as a program linked
// with jemalloc or tcmalloc has: every malloc of the process (dlopen's
// too) takes its lock, which is not recursive. "malloc N" sleeps N ms in
// malloc, holding it.
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <stdlib.h>
#include <unistd.h>

__attribute__((noinline)) int compute(int x)
{
	if (x < 0) {
		usleep((useconds_t)-x * 1000);
		return 0;
	}
	return x * 2;
}

// scale is small: gcc -O2 inlines it into main ("scale N"), and keeps
// its own copy for other callers (it is not static), as the call through
// a pointer ("scalep N").
int scale(int x) { return x > 1000 ? x / 3 : x + 1; }
int (*volatile scale_ptr)(int) = scale;

#ifdef OWN_MALLOC
static pthread_mutex_t heap_lock = PTHREAD_MUTEX_INITIALIZER;
static _Alignas(16) char heap[64 << 20];
static size_t heap_used;
static int sleep_in_malloc; // ms, once

void *malloc(size_t n)
{
	pthread_mutex_lock(&heap_lock);
	if (sleep_in_malloc > 0) {
		usleep((useconds_t)sleep_in_malloc * 1000);
		sleep_in_malloc = 0;
	}
	size_t *p = NULL;
	size_t need = (n + 16 + 15) & ~(size_t)15; // a 16-byte header: the size, and alignment
	if (heap_used + need <= sizeof heap) {
		p = (size_t *)(heap + heap_used);
		*p = n;
		heap_used += need;
	}
	pthread_mutex_unlock(&heap_lock);
	return p ? p + 2 : NULL;
}

void free(void *p) { (void)p; }

// The heap is never used twice: what malloc gives is still zero. (And
// malloc then memset is what gcc turns into a call of calloc.)
void *calloc(size_t n, size_t size)
{
	if (size != 0 && n > SIZE_MAX / size)
		return NULL;
	return malloc(n * size);
}

void *realloc(void *old, size_t n)
{
	void *p = malloc(n);
	if (p && old) {
		size_t had = ((size_t *)old)[-2];
		memcpy(p, old, had < n ? had : n);
	}
	return p;
}
#endif

static void *idle(void *arg)
{
	(void)arg;
	for (;;)
		pause();
	return NULL;
}

int main(int argc, char **argv)
{
	pthread_t th;
	if (argc < 2 || strcmp(argv[1], "alone") != 0)
		pthread_create(&th, NULL, idle, NULL);
	char line[256];
	while (fgets(line, sizeof line, stdin) != NULL) {
		if (strncmp(line, "compute ", 8) == 0) {
			int x = atoi(line + 8);
			printf("compute(%d) = %d\n", x, compute(x));
		} else if (strncmp(line, "scale ", 6) == 0) {
			int x = atoi(line + 6);
			printf("scale(%d) = %d\n", x, scale(x));
		} else if (strncmp(line, "scalep ", 7) == 0) {
			int x = atoi(line + 7);
			printf("scalep(%d) = %d\n", x, scale_ptr(x));
#ifdef OWN_MALLOC
		} else if (strncmp(line, "malloc ", 7) == 0) {
			sleep_in_malloc = atoi(line + 7);
			void *volatile p = malloc(16);
			printf("malloc(16) = %s\n", p ? "ok" : "NULL");
#endif
		} else if (strncmp(line, "quit", 4) == 0) {
			break;
		}
		fflush(stdout);
	}
	return 0;
}
