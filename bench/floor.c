/* The floor of a ptrace probe: trace CMD (bench/work ... floor, whose
 * leaf executes int3 itself) and answer each trap with PTRACE_CONT and
 * nothing else. Threads are followed with PTRACE_O_TRACECLONE.
 *   floor CMD [ARGS...]     prints the number of traps on stderr
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <sys/ptrace.h>
#include <sys/wait.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	pid_t pid = fork();
	if (pid == 0) {
		ptrace(PTRACE_TRACEME, 0, 0, 0);
		execvp(argv[1], argv + 1);
		_exit(127);
	}
	int status;
	waitpid(pid, &status, 0); /* the exec stop */
	ptrace(PTRACE_SETOPTIONS, pid, 0, PTRACE_O_TRACECLONE | PTRACE_O_EXITKILL);
	ptrace(PTRACE_CONT, pid, 0, 0);
	long traps = 0;
	int code = 0;
	for (;;) {
		pid_t tid = waitpid(-1, &status, __WALL);
		if (tid < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		if (WIFEXITED(status) || WIFSIGNALED(status)) {
			if (tid == pid)
				code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
			continue;
		}
		int sig = WSTOPSIG(status);
		if (sig == SIGTRAP && (status >> 16) == 0)
			traps++, sig = 0;
		else if (sig == SIGTRAP || sig == SIGSTOP)
			sig = 0; /* clone events, new threads' first stop */
		ptrace(PTRACE_CONT, tid, 0, sig);
	}
	fprintf(stderr, "traps=%ld\n", traps);
	return code;
}
