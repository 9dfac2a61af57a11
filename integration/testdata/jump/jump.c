/*
 * jump: the tracee of the jump-optimisation tests (jump_test.go). Each
 * function's result depends on the instructions a probe's jmp covers at
 * its entry (prologue pushes and stack set-up, rip-relative loads), so a
 * wrong detour shows in the output.
 *
 * usage: jump N        call every function N times, print the sums
 *        jump fork N   the same in the parent and in a forked child; the
 *                      child also checks that its text is its file's
 *
 * The hand-written functions: loopback's loop jumps back to loopback+2,
 * inside the bytes a jmp at its entry would cover, and indirect has an
 * indirect jump: neither may be optimised. ripload starts with a
 * rip-relative load and may.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include "../textcheck.h"

long table[8] = {3, 1, 4, 1, 5, 9, 2, 6};
long counter;

long loopback(long n);
long indirect(long n);
long ripload(long n);

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
	".size ripload,.-ripload\n");

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
	long f = 0, l = 0, lb = 0, ind = 0;
	for (long i = 1; i <= n; i++) {
		f += frame(i, 7);
		l += lookup(i);
		lb += loopback(i);
		ind += indirect(i);
		ripload(i);
	}
	printf("%s frame=%ld lookup=%ld loopback=%ld indirect=%ld ripload=%ld\n", who, f, l, lb, ind, counter);
	fflush(stdout);
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
	if (argc != 2)
		return 2;
	run("main", atol(argv[1]));
	return 0;
}
