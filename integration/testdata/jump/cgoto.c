#include <stdio.h>
#include <stdlib.h>

/* A bytecode loop dispatched by computed goto (gcc's labels as values),
   as Lua's and CPython's interpreter loops are: run's indirect jumps go
   through a table of its own labels. */
__attribute__((noipa)) long leaf(long x) { __asm__ volatile(""); return x + 1; }

__attribute__((noinline)) long run(const unsigned char *pc, long acc) {
	static const void *const ops[] = {&&op_add, &&op_dbl, &&op_call, &&op_end};
#define NEXT goto *ops[*pc++ & 3]
	NEXT;
op_add:
	acc += 3;
	NEXT;
op_dbl:
	acc *= 2;
	NEXT;
op_call:
	acc = leaf(acc);
	NEXT;
op_end:
	return acc;
}

int main(int argc, char **argv) {
	int n = argc > 1 ? atoi(argv[1]) : 1000;
	static const unsigned char code[] = {0, 2, 1, 2, 0, 3};
	long s = 0;
	for (int i = 0; i < n; i++)
		s += run(code, i);
	printf("%ld\n", s);
	return 0;
}
