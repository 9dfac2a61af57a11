/*
 * jump: the tracee of the jump-optimisation tests (jump_test.go). Each
 * function's result depends on the instructions a probe's jmp covers at
 * its entry (prologue pushes and stack set-up, rip-relative loads), so a
 * wrong detour shows in the output.
 *
 * usage: jump N        call every function N times, print the sums
 *        jump fork N   the same in the parent and in a forked child; the
 *                      child also checks that its text is its file's
 *        jump wait N   runs N calls of each, again and again until
 *                      SIGUSR1, then checks that its text is its file's
 *                      (for a tracer attached and gone meanwhile)
 *
 * The hand-written functions: loopback's loop jumps back to loopback+2,
 * inside the bytes a jmp at its entry would cover, and indirect has an
 * indirect jump: neither may be optimised. ripload starts with a
 * rip-relative load and may. loopfar's loop jumps back to loopfar+1,
 * a rip-relative add, too, with a rel32: it may, the jnz re-aimed into the detour.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <signal.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include "../textcheck.h"

long table[8] = {3, 1, 4, 1, 5, 9, 2, 6};
long counter;
long farsum; /* loopfar(n) adds n, n-1, ..., 1 to it */

long loopback(long n);
long indirect(long n);
long ripload(long n);
long loopfar(long n);

__asm__(".text\n"
	".globl loopback\n.type loopback,@function\nloopback:\n"
	"	xor %eax,%eax\n"
	"1:	add %rdi,%rax\n"
	"	dec %rdi\n"
	"	jnz 1b\n"
	"	ret\n"
	".size loopback,.-loopback\n"
	".globl indirect\n.type indirect,@function\nindirect:\n"
	"	lea 2f(%rip),%rax\n"
	"	mov %rdi,%rdx\n"
	"	jmp *%rax\n"
	"2:	lea (%rdx,%rdx,2),%rax\n"
	"	ret\n"
	".size indirect,.-indirect\n"
	".globl ripload\n.type ripload,@function\nripload:\n"
	"	mov counter(%rip),%rax\n"
	"	add %rdi,%rax\n"
	"	mov %rax,counter(%rip)\n"
	"	ret\n"
	".size ripload,.-ripload\n"
	".globl loopfar\n.type loopfar,@function\nloopfar:\n"
	"	push %rbx\n"
	"1:	add %rdi,farsum(%rip)\n"
	"	lea -1(%rdi),%rbx\n"
	"	mov %rbx,%rdi\n"
	"	test %rdi,%rdi\n"
	"	.byte 0x0f,0x85\n" /* jnz 1b, with a rel32 */
	"	.long 1b-.-4\n"
	"	mov farsum(%rip),%rax\n"
	"	pop %rbx\n"
	"	ret\n"
	".size loopfar,.-loopfar\n");

/* frame: a stack frame with locals whose sum depends on every covered
 * prologue instruction. */
__attribute__((noinline)) long frame(long a, long b)
{
	volatile long v[6];
	for (int i = 0; i < 6; i++)
		v[i] = a * i + b;
	long s = 0;
	for (int i = 0; i < 6; i++)
		s += v[i];
	return s;
}

/* lookup: a load from a global table (rip-relative in a PIE). */
__attribute__((noinline)) long lookup(long i)
{
	return table[i & 7] * 10 + i;
}

static void run(const char *who, long n)
{
	long f = 0, l = 0, lb = 0, ind = 0, lf = 0;
	for (long i = 1; i <= n; i++) {
		f += frame(i, 7);
		l += lookup(i);
		lb += loopback(i);
		ind += indirect(i);
		ripload(i);
		farsum = 0;
		lf += loopfar(i);
	}
	if (who)
		printf("%s frame=%ld lookup=%ld loopback=%ld indirect=%ld ripload=%ld loopfar=%ld\n", who, f, l, lb, ind, counter, lf);
	fflush(stdout);
}

static volatile sig_atomic_t usr1;

static void on_usr1(int sig)
{
	(void)sig;
	usr1 = 1;
}

int main(int argc, char **argv)
{
	if (argc == 3 && strcmp(argv[1], "fork") == 0) {
		long n = atol(argv[2]);
		pid_t pid = fork();
		if (pid == 0) {
			int intact = text_intact();
			run("child", n);
			printf("child text %s\n", intact ? "ok" : "BAD");
			return 0;
		}
		int st;
		waitpid(pid, &st, 0);
		run("parent", n);
		return WIFEXITED(st) ? WEXITSTATUS(st) : 1;
	}
	if (argc == 3 && strcmp(argv[1], "wait") == 0) {
		signal(SIGUSR1, on_usr1);
		printf("ready\n");
		fflush(stdout);
		long rounds = 0;
		while (!usr1) {
			run(NULL, atol(argv[2]));
			rounds++;
		}
		printf("text %s after %s\n", text_intact() ? "ok" : "BAD", rounds > 0 ? "some rounds" : "none");
		return 0;
	}
	if (argc != 2)
		return 2;
	run("main", atol(argv[1]));
	return 0;
}
