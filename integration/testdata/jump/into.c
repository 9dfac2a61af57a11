/*
 * into: the tracee of TestJumpInto (jump_test.go). other enters target
 * past its first instruction, inside the bytes a jmp written at target's
 * entry would cover: by a jmp to target+1, or, built with -DJCC, by a jns
 * to target+4. A probe at target must keep its int3, whatever tracer runs;
 * plain, an ordinary function, is still jump-optimised.
 *
 * usage: into N   call target, other and plain N times each, check every
 *                 result; print the sums and "ok", or "BAD" and exit 1
 */
#include <stdio.h>
#include <stdlib.h>

long target(long n);
long other(long n);

/* target(n) = 3n+1; other(n) is the same, computed by target's code. */
__asm__(".text\n"
	".globl target\n.type target,@function\ntarget:\n"
	"	push %rbx\n"
	"	mov %rdi,%rbx\n"			/* target+1 */
	"	lea 1(%rbx,%rbx,2),%rax\n"		/* target+4 */
	"	pop %rbx\n"
	"	ret\n"
	".size target,.-target\n"
	".globl other\n.type other,@function\nother:\n"
	"	push %rbx\n"
#ifndef JCC
	"	jmp target+1\n"
#else
	"	mov %rdi,%rbx\n"
	"	test %rdi,%rdi\n"
	"	jns target+4\n"
	"	pop %rbx\n"
	"	mov $-1,%rax\n"
	"	ret\n"
#endif
	".size other,.-other\n");

/* plain: an ordinary function, whose first instructions a jmp may
 * cover. */
__attribute__((noinline)) long plain(long a)
{
	volatile long v = a;
	return v * 15 + 42;
}

int main(int argc, char **argv)
{
	if (argc != 2)
		return 2;
	long n = atol(argv[1]), t = 0, o = 0, f = 0, bad = 0;
	for (long i = 1; i <= n; i++) {
		long ti = target(i), oi = other(i), fi = plain(i);
		bad += ti != 3 * i + 1 || oi != 3 * i + 1 || fi != 15 * i + 42;
		t += ti;
		o += oi;
		f += fi;
	}
	printf("target=%ld other=%ld plain=%ld %s\n", t, o, f, bad ? "BAD" : "ok");
	return bad != 0;
}
