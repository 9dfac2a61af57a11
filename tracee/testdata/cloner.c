/* The tracee of TestInjectAtCloneEvent: the main thread creates a thread
 * and checks that pthread_create said so (clone's result); both print. */
#include <pthread.h>
#include <stdio.h>

static void *hello(void *arg)
{
	(void)arg;
	puts("thread");
	return NULL;
}

int main(void)
{
	pthread_t t;
	int err = pthread_create(&t, NULL, hello, NULL);
	if (err != 0) {
		printf("pthread_create: %d\n", err);
		return 1;
	}
	pthread_join(t, NULL);
	puts("main");
	return 0;
}
