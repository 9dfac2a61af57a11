// host LIB N M: on a line on stdin (or EOF), dlopens LIB, calls its
// init() N times and dlcloses it; maps a page where init was and fills it;
// dlopens LIB again (the page keeps it from landing at the same place),
// calls init() M times; on another line (or EOF), checks that nothing
// wrote to the page, and unloads LIB.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define FILL 0x5a

static void wait_line(void) {
	char line[64];
	if (fgets(line, sizeof line, stdin) == NULL) {
		clearerr(stdin);
	}
}

static int round_of(const char *lib, int calls, int round, uintptr_t *fn_addr) {
	void *h = dlopen(lib, RTLD_NOW);
	if (h == NULL) {
		fprintf(stderr, "dlopen: %s\n", dlerror());
		exit(1);
	}
	int (*init)(int) = (int (*)(int))dlsym(h, "init");
	if (init == NULL) {
		fprintf(stderr, "dlsym: %s\n", dlerror());
		exit(1);
	}
	int sum = 0;
	for (int i = 0; i < calls; i++) {
		int r = init(i);
		printf("round %d: init(%d) = %d\n", round, i, r);
		sum += r;
	}
	*fn_addr = (uintptr_t)init;
	if (round == 1) {
		dlclose(h);
	}
	return sum;
}

int main(int argc, char **argv) {
	if (argc != 4) {
		fprintf(stderr, "usage: host LIB N M\n");
		return 2;
	}
	int n = atoi(argv[2]), m = atoi(argv[3]);
	printf("ready\n");
	fflush(stdout);
	wait_line();

	uintptr_t first, second;
	round_of(argv[1], n, 1, &first);
	// The library is gone: take the page its init() was on.
	long pagesz = sysconf(_SC_PAGESIZE);
	uintptr_t page_addr = first & ~(uintptr_t)(pagesz - 1);
	unsigned char *page = mmap((void *)page_addr, pagesz, PROT_READ | PROT_WRITE,
	                           MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
	if (page == MAP_FAILED || (uintptr_t)page != page_addr) {
		printf("the library's page is still mapped after dlclose\n");
		return 1;
	}
	memset(page, FILL, pagesz);

	round_of(argv[1], m, 2, &second);
	printf("second load at another place: %s\n", second != first ? "yes" : "no");
	printf("round 2 done\n");
	fflush(stdout);
	wait_line();

	for (long i = 0; i < pagesz; i++) {
		if (page[i] != FILL) {
			printf("page written at +0x%lx: 0x%02x\n", i, page[i]);
			return 1;
		}
	}
	printf("page intact\n");
	return 0;
}
