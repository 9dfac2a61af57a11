/*
 * spawn: tracee for the test of in-process probes and vfork children.
 * posix_spawn runs /bin/true three times: each child shares our memory
 * and our thread's control block (so its thread id, as our record code
 * reads it) until its execve, which it calls in libc.
 */
#include <spawn.h>
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

__attribute__((noinline, noipa)) int work(int x) { return x * 2 + 1; }

int main(void)
{
	int s = 0;
	for (int i = 0; i < 3; i++) {
		pid_t pid;
		char *argv[] = {"/bin/true", NULL};
		s += work(i);
		if (posix_spawn(&pid, "/bin/true", NULL, NULL, argv, environ) != 0)
			return 1;
		waitpid(pid, NULL, 0);
	}
	printf("s=%d\n", s);
	return 0;
}
