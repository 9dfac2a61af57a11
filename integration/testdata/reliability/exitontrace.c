// A program that ends (exit_group, status 7) as soon as it sees a tracer:
// a thread polls TracerPid in /proc/self/status while main calls work().
// probe attach meets its end at any point of attaching and installing.
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

__attribute__((noinline)) long work(long i) { return i * 2; }

static void *watch(void *arg)
{
	(void)arg;
	char buf[4096];
	for (;;) {
		FILE *f = fopen("/proc/self/status", "r");
		if (f != NULL) {
			size_t n = fread(buf, 1, sizeof buf - 1, f);
			fclose(f);
			buf[n] = 0;
			char *p = strstr(buf, "TracerPid:");
			if (p != NULL && atoi(p + 10) != 0)
				_exit(7);
		}
		usleep(100);
	}
	return NULL;
}

int main(void)
{
	pthread_t th;
	pthread_create(&th, NULL, watch, NULL);
	printf("ready\n");
	fflush(stdout);
	volatile long sum = 0;
	for (long i = 0;; i++) {
		sum += work(i);
		usleep(50);
	}
}
