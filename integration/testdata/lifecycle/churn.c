// churn: N short threads, at most 32 alive at once, each calls work() once.
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

__attribute__((noinline)) int work(int x)
{
	__asm__ volatile("" ::: "memory");
	return x + 1;
}

static void *run(void *arg)
{
	return (void *)(long)work((int)(long)arg);
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 1000;
	long sum = 0;
	pthread_t ts[32];
	for (int done = 0; done < n;) {
		int batch = n - done < 32 ? n - done : 32;
		for (int i = 0; i < batch; i++)
			if (pthread_create(&ts[i], NULL, run, (void *)(long)(done + i)) != 0)
				return 1;
		for (int i = 0; i < batch; i++) {
			void *r;
			pthread_join(ts[i], &r);
			sum += (long)r;
		}
		done += batch;
	}
	printf("threads %d sum %ld\n", n, sum);
	return 0;
}
