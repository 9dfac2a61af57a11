/* The tracee of TestInjectCallKeepsSleep: it prints the addresses of
 * add1 and of a breakpoint for injected calls to return to, sleeps 1 s in
 * one nanosleep, during which add1 is called in it, and prints how long it
 * slept. */
#include <stdio.h>
#include <time.h>

__attribute__((noinline)) long add1(long x) { return x + 1; }

/* A breakpoint, the first instruction at its label. */
__asm__(".text\n.globl call_trap\ncall_trap:\n"
#ifdef __aarch64__
	"brk #0\n"
#else
	"int3\n"
#endif
);
extern char call_trap[];

int main(void)
{
	struct timespec a, b, d = {1, 0};
	printf("ready %lx %lx\n", (unsigned long)add1, (unsigned long)call_trap);
	fflush(stdout);
	clock_gettime(CLOCK_MONOTONIC, &a);
	int r = nanosleep(&d, NULL);
	clock_gettime(CLOCK_MONOTONIC, &b);
	long ms = (b.tv_sec - a.tv_sec) * 1000 + (b.tv_nsec - a.tv_nsec) / 1000000;
	printf("nanosleep=%d ms=%ld\n", r, ms);
	return 0;
}
