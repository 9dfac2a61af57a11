// execer: calls work() N times and getppid() once, then execs PROG M
// (usually execd), which runs its own work(). With "wait" as the last
// argument it first waits for SIGUSR1, so that a tracer can attach.
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

__attribute__((noinline)) int work(int x)
{
	__asm__ volatile("" ::: "memory");
	return x * 3 + 1;
}

int main(int argc, char **argv)
{
	if (argc < 4) {
		fprintf(stderr, "usage: execer N PROG M [wait]\n");
		return 2;
	}
	setvbuf(stdout, NULL, _IONBF, 0);
	if (argc > 4 && strcmp(argv[4], "wait") == 0) {
		sigset_t set;
		sigemptyset(&set);
		sigaddset(&set, SIGUSR1);
		sigprocmask(SIG_BLOCK, &set, NULL);
		printf("ready\n");
		int sig;
		sigwait(&set, &sig);
	}
	int n = atoi(argv[1]), s = 0;
	for (int i = 0; i < n; i++)
		s += work(i);
	printf("execer sum %d ppid-ok %d\n", s, getppid() > 0);
	execl(argv[2], argv[2], argv[3], argc > 4 ? argv[4] : (char *)NULL, (char *)NULL);
	perror("execl");
	return 127;
}
