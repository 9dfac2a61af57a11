/*
 * seize: an unrelated tracer for the "already traced" tests.
 *
 * usage: seize TID STOPFILE
 *
 * PTRACE_SEIZEs the thread TID (without stopping it), prints "seized" on
 * stdout (flushed) and keeps it traced, passing on any signal it gets,
 * until STOPFILE exists or the thread exits. Exiting detaches it.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/ptrace.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	pid_t tid;

	if (argc != 3) {
		fprintf(stderr, "usage: seize TID STOPFILE\n");
		return 2;
	}
	tid = atoi(argv[1]);
	if (ptrace(PTRACE_SEIZE, tid, 0, 0) != 0) {
		perror("PTRACE_SEIZE");
		return 1;
	}
	printf("seized\n");
	fflush(stdout);

	for (;;) {
		struct timespec ts = {0, 10000000};
		int st;
		pid_t w;

		if (access(argv[2], F_OK) == 0)
			return 0;
		w = waitpid(tid, &st, __WALL | WNOHANG);
		if (w < 0 && errno == ECHILD)
			return 0;
		if (w == tid) {
			if (WIFEXITED(st) || WIFSIGNALED(st))
				return 0;
			if (WIFSTOPPED(st)) {
				/* signal-delivery-stop: pass the signal on */
				int sig = (st >> 16) == 0 ? WSTOPSIG(st) : 0;

				ptrace(PTRACE_CONT, tid, 0, sig);
			}
		}
		nanosleep(&ts, NULL);
	}
}
