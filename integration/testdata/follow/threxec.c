// threxec: two threads call work() in a loop while a third calls it 100
// times and then execs PROG M (execd): the kernel kills the looping
// threads, wherever they are in our probes, and the execing thread takes
// the leader's tid.
#include <pthread.h>
#include <stdio.h>
#include <unistd.h>

__attribute__((noinline)) int work(int x)
{
	__asm__ volatile("" ::: "memory");
	return x + 1;
}

static char **args;

static void *spin(void *arg)
{
	for (;;)
		work(1);
	return NULL;
}

static void *execer(void *arg)
{
	for (int i = 0; i < 100; i++)
		work(i);
	execl(args[1], args[1], args[2], (char *)NULL);
	perror("execl");
	return NULL;
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: threxec PROG M\n");
		return 2;
	}
	args = argv;
	pthread_t a, b, c;
	pthread_create(&a, NULL, spin, NULL);
	pthread_create(&b, NULL, spin, NULL);
	pthread_create(&c, NULL, execer, NULL);
	pthread_join(c, NULL);
	return 1;
}
