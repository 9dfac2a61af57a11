/*
 * mcount: tracee for the tracing-site column of probe list. The tests
 * build it with -pg (-mfentry -mnop-mcount, -mrecord-mcount) or with
 * -fpatchable-function-entry, so that every function below starts with
 * an mcount call, an fentry nop or patchable nops.
 *
 * It prints "ready <n>" and then waits to be killed: a -pg program that
 * exits writes gmon.out into its working directory.
 */
#include <stdio.h>
#include <unistd.h>

__attribute__((noinline)) static int helper(int x)
{
	return x * 3;
}

__attribute__((noinline)) int work(int x)
{
	return helper(x) + 1;
}

int main(void)
{
	printf("ready %d\n", work(1));
	fflush(stdout);
	for (;;)
		pause();
}
