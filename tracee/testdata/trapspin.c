/* The tracee of TestWaitServesEveryThread: four threads, each sending
 * itself SIGTRAP over and over, so each is stopped again as soon as the
 * tracer lets it go. */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

static void *spin(void *arg)
{
	(void)arg;
	for (;;)
		syscall(SYS_tgkill, getpid(), gettid(), SIGTRAP);
	return NULL;
}

int main(void)
{
	pthread_t t[4];
	for (int i = 0; i < 4; i++)
		pthread_create(&t[i], NULL, spin, NULL);
	pthread_join(t[0], NULL);
	return 0;
}
