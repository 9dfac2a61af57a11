// jobstop: four threads (main and three workers) call work(k) for k = 0,
// 1, 2, ... and check each result; main prints "tick N" every 20 ms.
// Once STOPFILE exists it prints "calls=C good=G" (G == C when every
// result was right) and exits 0. A process stopped by SIGSTOP prints
// nothing and calls nothing until SIGCONT.
//
// usage: jobstop STOPFILE
#include <pthread.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

volatile long scale = 3;

__attribute__((noinline, noipa)) long work(long k)
{
	return k * scale + 1;
}

static volatile int done;
static long calls[4], good[4];

// run calls work 1000 times from *k on: a stretch between looks at the
// clock or at done.
static void run(int id, long *k)
{
	for (int i = 0; i < 1000; i++, (*k)++) {
		calls[id]++;
		if (work(*k) == 3 * *k + 1)
			good[id]++;
	}
}

static void *worker(void *arg)
{
	int id = (int)(long)arg;
	long k = 0;

	while (!done) {
		run(id, &k);
		usleep(1000); // leave the CPU to others now and then
	}
	return NULL;
}

static long millis(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int main(int argc, char **argv)
{
	pthread_t th[3];
	long k = 0, total = 0, right = 0;

	if (argc != 2) {
		fprintf(stderr, "usage: jobstop STOPFILE\n");
		return 2;
	}
	for (long i = 1; i <= 3; i++)
		pthread_create(&th[i - 1], NULL, worker, (void *)i);
	for (int tick = 0; access(argv[1], F_OK) != 0; tick++) {
		for (long end = millis() + 20; millis() < end;) {
			run(0, &k);
			usleep(1000);
		}
		printf("tick %d\n", tick);
		fflush(stdout);
	}
	done = 1;
	for (int i = 0; i < 3; i++)
		pthread_join(th[i], NULL);
	for (int i = 0; i < 4; i++) {
		total += calls[i];
		right += good[i];
	}
	printf("calls=%ld good=%ld\n", total, right);
	return 0;
}
