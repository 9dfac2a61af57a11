// A server whose compute() the live-patching tests replace while it runs:
// one request a line on stdin ("compute N"), one answer a line on
// stdout. compute(N) with N < 0 sleeps -N ms inside compute first, so
// that a test can hold a thread in it; a second thread idles, so that
// every stack the patch checks is not only main's.
#include <pthread.h>
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

static void *idle(void *arg)
{
	(void)arg;
	for (;;)
		pause();
	return NULL;
}

int main(void)
{
	pthread_t th;
	pthread_create(&th, NULL, idle, NULL);
	char line[256];
	while (fgets(line, sizeof line, stdin) != NULL) {
		if (strncmp(line, "compute ", 8) == 0) {
			int x = atoi(line + 8);
			printf("compute(%d) = %d\n", x, compute(x));
		} else if (strncmp(line, "quit", 4) == 0) {
			break;
		}
		fflush(stdout);
	}
	return 0;
}
