// forkloop: prints "ready", waits for SIGUSR1 (a tracer attaches
// meanwhile), then forks. Parent and child call work() until the file
// STOP exists, each checking every result, and print "<who> running"
// after their first 1000 calls. The child exits 0 if every result was
// right; the parent reaps it and reports. With "orphan OUT", the parent
// exits at once after the fork and the child goes on alone, writing to
// the file OUT.
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

__attribute__((noinline)) long work(long x)
{
	__asm__ volatile("" ::: "memory");
	return x * 7 + 3;
}

static int loop(const char *who, const char *stop)
{
	long bad = 0;
	for (long i = 0;; i++) {
		if (work(i) != i * 7 + 3)
			bad++;
		if (i == 1000)
			printf("%s running\n", who);
		if (i % 256 == 0 && access(stop, F_OK) == 0)
			break;
	}
	printf("%s bad %ld\n", who, bad);
	return bad != 0;
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: forkloop STOP [orphan OUT]\n");
		return 2;
	}
	int orphan = argc > 3 && strcmp(argv[2], "orphan") == 0;
	setvbuf(stdout, NULL, _IONBF, 0);
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGUSR1);
	sigprocmask(SIG_BLOCK, &set, NULL);
	printf("ready\n");
	int sig;
	sigwait(&set, &sig);
	pid_t pid = fork();
	if (pid == 0) {
		if (orphan) {
			int fd = open(argv[3], O_WRONLY | O_CREAT | O_TRUNC, 0644);
			dup2(fd, 1);
			dup2(fd, 2);
		}
		_exit(loop("child", argv[1]));
	}
	printf("child pid %d\n", pid);
	if (orphan)
		return 0;
	int bad = loop("parent", argv[1]);
	int st;
	waitpid(pid, &st, 0);
	printf("child exit %d\n", WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
	return bad;
}
