// pghost LIB R: prints "ready"; on a line on stdin (or EOF) dlopens LIB
// (pglib.c), calls its pglib_work(15) R times and checks each result;
// prints the sum, how many times pglib_fib ran, and "loaded"; on another
// line exits, the library still loaded until then.
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

static void wait_line(void)
{
	char line[64];
	if (fgets(line, sizeof line, stdin) == NULL)
		clearerr(stdin);
}

int main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: pghost LIB R\n");
		return 2;
	}
	printf("ready\n");
	fflush(stdout);
	wait_line();
	void *h = dlopen(argv[1], RTLD_NOW);
	if (h == NULL) {
		fprintf(stderr, "dlopen: %s\n", dlerror());
		return 1;
	}
	long (*work)(long) = (long (*)(long))dlsym(h, "pglib_work");
	long *calls = dlsym(h, "pglib_calls");
	if (work == NULL || calls == NULL) {
		fprintf(stderr, "dlsym: %s\n", dlerror());
		return 1;
	}
	long sum = 0, bad = 0;
	for (int i = 0; i < atoi(argv[2]); i++) {
		long r = work(15);
		bad += r != 610;
		sum += r;
	}
	printf("sum=%ld calls=%ld %s\nloaded\n", sum, *calls, bad ? "bad" : "ok");
	fflush(stdout);
	wait_line();
	return bad != 0;
}
