/* ret: calls whose returns in-process hooks must get right.
 *
 *   ret threads T N   T threads each call outer(i) N times; outer calls
 *                     inner twice. Prints the sum of every result.
 *   ret longjmp N     N times: dive(6) calls itself down to depth 0,
 *                     which longjmps back to main; then a plain call.
 *   ret fork          fork() inside spawn(3), three calls deep: the child
 *                     returns through those calls as the parent does.
 *   ret leaffork      a fork by a leaf's own system call: on arm64 its
 *                     return address is still in x30 in the child.
 *
 * Each mode prints what it computed; a return sent to the wrong place
 * crashes it or changes the numbers. */
#include <pthread.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

__attribute__((noinline)) long inner(long x) { return x * 3 + 1; }

__attribute__((noinline)) long outer(long x) { return inner(x) + inner(x + 1); }

static long n_calls;

static void *worker(void *arg)
{
	long s = 0;
	for (long i = 0; i < n_calls; i++)
		s += outer(i);
	return (void *)s;
}

static jmp_buf env;

__attribute__((noinline)) long dive(int depth)
{
	if (depth == 0)
		longjmp(env, 1);
	return dive(depth - 1) + 1;
}

__attribute__((noinline)) int spawn(int depth)
{
	if (depth > 0)
		return spawn(depth - 1) + 1;
	fflush(stdout);
	pid_t pid = fork();
	if (pid == 0)
		return 100;
	int status;
	waitpid(pid, &status, 0);
	return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

__attribute__((noinline)) long leaf_fork(void)
{
#if defined(__aarch64__)
	register long x8 __asm__("x8") = 220; /* clone(SIGCHLD, 0, 0, 0, 0) */
	register long x0 __asm__("x0") = 17;
	register long x1 __asm__("x1") = 0, x2 __asm__("x2") = 0, x3 __asm__("x3") = 0, x4 __asm__("x4") = 0;
	__asm__ volatile("svc #0" : "+r"(x0) : "r"(x8), "r"(x1), "r"(x2), "r"(x3), "r"(x4) : "memory");
	return x0;
#else
	long r;
	__asm__ volatile("syscall" : "=a"(r) : "a"(57L) : "rcx", "r11", "memory"); /* fork */
	return r;
#endif
}

int main(int argc, char **argv)
{
	if (argc == 4 && strcmp(argv[1], "threads") == 0) {
		int t = atoi(argv[2]);
		n_calls = atol(argv[3]);
		pthread_t th[64];
		long total = 0;
		for (int i = 0; i < t && i < 64; i++)
			pthread_create(&th[i], NULL, worker, NULL);
		for (int i = 0; i < t && i < 64; i++) {
			void *r;
			pthread_join(th[i], &r);
			total += (long)r;
		}
		printf("total=%ld\n", total);
		return 0;
	}
	if (argc == 3 && strcmp(argv[1], "longjmp") == 0) {
		int n = atoi(argv[2]), jumps = 0;
		long s = 0;
		for (int i = 0; i < n; i++) {
			if (setjmp(env) == 0)
				s += dive(6);
			else
				jumps++;
			s += outer(i);
		}
		printf("jumps=%d s=%ld\n", jumps, s);
		return 0;
	}
	if (argc == 2 && strcmp(argv[1], "fork") == 0) {
		int r = spawn(3);
		printf("%s r=%d\n", r >= 100 ? "child" : "parent", r);
		return r >= 100 ? r - 100 + 7 : 0; /* the child exits 10 */
	}
	if (argc == 2 && strcmp(argv[1], "leaffork") == 0) {
		fflush(stdout);
		long pid = leaf_fork();
		if (pid == 0)
			_exit(3);
		int status;
		waitpid(pid, &status, 0);
		printf("child exited %d\n", WIFEXITED(status) ? WEXITSTATUS(status) : -1);
		return 0;
	}
	fprintf(stderr, "usage: ret threads T N | longjmp N | fork | leaffork\n");
	return 2;
}
