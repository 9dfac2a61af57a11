// startwith.c starts argv[1..] as a launcher other than a Go program
// might: SIGHUP ignored, SIGUSR1 and SIGALRM blocked, the soft limit of
// descriptors lowered, umask 027, an extra descriptor left open across
// exec (fd 7, /dev/null, O_APPEND|O_NONBLOCK) and WITH=startwith in the
// environment.
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

int main(int argc, char **argv) {
	if (argc < 2) {
		fprintf(stderr, "usage: startwith CMD [ARGS...]\n");
		return 2;
	}
	signal(SIGHUP, SIG_IGN);
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGUSR1);
	sigaddset(&set, SIGALRM);
	sigprocmask(SIG_BLOCK, &set, NULL);
	struct rlimit l;
	getrlimit(RLIMIT_NOFILE, &l);
	l.rlim_cur = l.rlim_max > 512 ? 512 : l.rlim_max;
	setrlimit(RLIMIT_NOFILE, &l);
	umask(027);
	int fd = open("/dev/null", O_WRONLY | O_APPEND | O_NONBLOCK);
	if (fd < 0 || dup2(fd, 7) < 0) {
		perror("startwith: fd 7");
		return 2;
	}
	if (fd != 7)
		close(fd);
	setenv("WITH", "startwith", 1);
	execvp(argv[1], argv + 1);
	perror(argv[1]);
	return 127;
}
