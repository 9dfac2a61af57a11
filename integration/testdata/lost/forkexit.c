/*
 * forkexit: N children, each forked inside spawn(k), which calls work()
 * and then _exit()s there: in each child the calls of spawn and main
 * never return. The parent waits for each. Prints what each did.
 */
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

__attribute__((noinline)) long work(long x) { return x * 7 + 3; }

__attribute__((noinline)) int spawn(int k)
{
	fflush(stdout);
	pid_t pid = fork();
	if (pid == 0) {
		printf("child %d: %ld\n", k, work(k));
		fflush(stdout);
		_exit(0);
	}
	return pid;
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 3;
	for (int k = 0; k < n; k++) {
		int st;
		waitpid(spawn(k), &st, 0);
	}
	printf("parent: %d children\n", n);
	return 0;
}
