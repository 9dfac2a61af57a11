/* A thread that exits from inside traced calls:
 *   thread() -> outer() -> inner() -> pthread_exit()
 * glibc's forced unwind walks up from pthread_exit through the hooked
 * frames. main joins it and prints what it returned.
 */
#include <pthread.h>
#include <stdio.h>

__attribute__((noinline, noipa)) void inner(long x) { pthread_exit((void *)(x * 3)); }

__attribute__((noinline, noipa)) long outer(long x) { inner(x + 1); return 0; }

static void *thread(void *arg) { return (void *)outer((long)arg); }

int main(void)
{
	pthread_t th;
	void *r;
	pthread_create(&th, NULL, thread, (void *)6);
	pthread_join(th, &r);
	printf("exited with %ld\n", (long)r);
	return 0;
}
