/* The floor of a ptrace probe: trace CMD (bench/work ... floor, whose
 * leaf executes int3 itself) and answer each trap with PTRACE_CONT and
 * nothing else. Threads are followed with PTRACE_O_TRACECLONE.
 *   floor [-g|-r] CMD [ARGS...]  prints the number of traps on stderr
 * With -g each trap also costs a PTRACE_GETREGS: the least a probe that
 * reads its arguments can pay (a jump-optimised probe, which need not move
 * rip). With -r a PTRACE_SETREGS as well: the least a boosted probe,
 * which moves rip to its out-of-line copy, can pay.
 * On arm64 brk leaves pc at itself: every trap also costs a GETREGSET
 * and a SETREGSET that move pc past it, the least any arm64 probe pays.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <unistd.h>
#ifdef __aarch64__
#include <elf.h>
#include <sys/uio.h>
typedef struct user_regs_struct regs_t;
static void getregs_(pid_t tid, regs_t *r)
{
	struct iovec io = {r, sizeof *r};
	ptrace(PTRACE_GETREGSET, tid, NT_PRSTATUS, &io);
}
static void setregs_(pid_t tid, regs_t *r)
{
	struct iovec io = {r, sizeof *r};
	ptrace(PTRACE_SETREGSET, tid, NT_PRSTATUS, &io);
}
#else
typedef struct user_regs_struct regs_t;
static void getregs_(pid_t tid, regs_t *r) { ptrace(PTRACE_GETREGS, tid, 0, r); }
static void setregs_(pid_t tid, regs_t *r) { ptrace(PTRACE_SETREGS, tid, 0, r); }
#endif

int main(int argc, char **argv)
{
	int getregs = argc > 1 && (strcmp(argv[1], "-g") == 0 || strcmp(argv[1], "-r") == 0);
	int setregs = getregs && strcmp(argv[1], "-r") == 0;
	char **cmd = argv + 1 + getregs;
	pid_t pid = fork();
	if (pid == 0) {
		ptrace(PTRACE_TRACEME, 0, 0, 0);
		execvp(cmd[0], cmd);
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
		if (sig == SIGTRAP && (status >> 16) == 0) {
			traps++, sig = 0;
			regs_t r;
#ifdef __aarch64__
			getregs_(tid, &r);
			r.pc += 4;
			setregs_(tid, &r);
#endif
			if (getregs)
				getregs_(tid, &r);
			if (setregs)
				setregs_(tid, &r);
		}
		else if (sig == SIGTRAP || sig == SIGSTOP)
			sig = 0; /* clone events, new threads' first stop */
		ptrace(PTRACE_CONT, tid, 0, sig);
	}
	fprintf(stderr, "traps=%ld\n", traps);
	return code;
}
