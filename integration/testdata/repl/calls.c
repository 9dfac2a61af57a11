// calls: a command a line on stdin. "call N" calls work(i) N times, i
// counting on from the calls before, and prints "pid P: N calls, T in
// all"; "extra N" calls extra() N times (built with -DEXTRA; without it,
// extra is not a symbol of the program). "fork" forks a child that takes
// the commands sent as "child COMMAND" through a pipe and answers on the
// same stdout with its own pid; "ready" is printed once at the start and
// "forked PID" after a fork ("forksid": the child in a session of its
// own, so that a SIGSTOP'd child left by its parent is not sent SIGHUP
// and SIGCONT as an orphaned process group); "exit" exits 0 at once (a
// child left running). At the end of its input the child exits 0; the parent ends
// its child, waits for it, prints "child exit S" and exits 0.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static long calls;

__attribute__((noinline)) long work(long i)
{
	__asm__ volatile("" ::: "memory");
	return i * 3 + 1;
}

#ifdef EXTRA
__attribute__((noinline)) long extra(long i)
{
	__asm__ volatile("" ::: "memory");
	return i + 5;
}
#endif

static int run(FILE *in, FILE **child, pid_t *childPid)
{
	char line[256];
	while (fgets(line, sizeof line, in)) {
		long n;
		if (sscanf(line, "call %ld", &n) == 1) {
			for (long i = 0; i < n; i++, calls++)
				if (work(calls) != calls * 3 + 1)
					return 1;
			printf("pid %d: %ld calls, %ld in all\n", getpid(), n, calls);
#ifdef EXTRA
		} else if (sscanf(line, "extra %ld", &n) == 1) {
			for (long i = 0; i < n; i++)
				if (extra(i) != i + 5)
					return 1;
			printf("pid %d: %ld extra\n", getpid(), n);
#endif
		} else if (strcmp(line, "exit\n") == 0) {
			_exit(0);
		} else if (child && strncmp(line, "child ", 6) == 0 && *child) {
			fputs(line + 6, *child);
			fflush(*child);
		} else if (child && (strcmp(line, "fork\n") == 0 || strcmp(line, "forksid\n") == 0) && !*child) {
			int fds[2];
			if (pipe(fds) != 0)
				return 1;
			pid_t pid = fork();
			if (pid == 0) {
				if (line[4] == 's' && setsid() < 0)
					_exit(1);
				close(fds[1]);
				FILE *cin = fdopen(fds[0], "r");
				_exit(run(cin, NULL, NULL));
			}
			close(fds[0]);
			*child = fdopen(fds[1], "w");
			*childPid = pid;
			printf("forked %d\n", pid);
		}
	}
	return 0;
}

int main(void)
{
	setvbuf(stdout, NULL, _IONBF, 0);
	printf("ready\n");
	FILE *child = NULL;
	pid_t childPid = 0;
	if (run(stdin, &child, &childPid) != 0)
		return 1;
	if (child) {
		fclose(child);
		int st;
		waitpid(childPid, &st, 0);
		printf("child exit %d\n", WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
	}
	return 0;
}
