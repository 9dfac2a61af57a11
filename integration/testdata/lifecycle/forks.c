// forks: a probed process whose children run the probed code. A child
// made by fork() returns from spawn() through its copy of the stack, a
// child made by vfork() calls work() on the shared text before it execs
// this program again in "child" mode. Every child checks its own results.
#define _GNU_SOURCE
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

__attribute__((noinline)) int work(int x)
{
	__asm__ volatile("" ::: "memory");
	return x * 2 + 1;
}

static int sum(int n)
{
	int s = 0;
	for (int i = 0; i < n; i++)
		s += work(i);
	return s;
}

// spawn forks; the child returns from it too, to a caller that knows it
// is the child.
__attribute__((noinline)) pid_t spawn(void)
{
	pid_t pid = fork();
	__asm__ volatile("" ::: "memory");
	return pid;
}

static void reap(pid_t pid, const char *what)
{
	int st;
	if (waitpid(pid, &st, 0) != pid) {
		perror("waitpid");
		exit(1);
	}
	if (WIFSIGNALED(st))
		printf("%s child killed by signal %d\n", what, WTERMSIG(st));
	else
		printf("%s child exit %d\n", what, WEXITSTATUS(st));
}

int main(int argc, char **argv)
{
	if (argc > 1 && strcmp(argv[1], "child") == 0) {
		printf("exec child sum %d\n", sum(5));
		return 0;
	}
	int rounds = argc > 1 ? atoi(argv[1]) : 1;
	setvbuf(stdout, NULL, _IONBF, 0);
	int s = sum(3);
	for (int r = 0; r < rounds; r++) {
		pid_t pid = spawn();
		if (pid == 0) {
			printf("fork child sum %d\n", sum(5));
			_exit(sum(2)); // 1 + 3 = 4
		}
		reap(pid, "fork");

		pid = vfork();
		if (pid == 0) {
			// On the parent's text and stack, probes and all.
			if (work(7) != 15)
				_exit(3);
			execl("/proc/self/exe", argv[0], "child", (char *)NULL);
			_exit(127);
		}
		reap(pid, "vfork");

		// posix_spawn is clone(CLONE_VM|CLONE_VFORK) in glibc.
		char *cargv[] = {argv[0], "child", NULL};
		if (posix_spawn(&pid, "/proc/self/exe", NULL, NULL, cargv, environ) != 0) {
			perror("posix_spawn");
			return 1;
		}
		reap(pid, "posix_spawn");
	}
	s += work(10);
	printf("parent sum %d\n", s);
	return 0;
}
