/* coroswap: issue 35's coroutines. Three swapcontext coroutines, each
 * adding step(id, i) = i*(id+1) for i < 1000 and yielding to main through
 * yield_to_main after each (a tail call into swapcontext at -O2: the
 * saved context's pc is whatever return address is at sp then). Their
 * stacks are 64 KiB each, one after the other, so that slots of calls at
 * the same depth of two coroutines are 64 KiB apart:
 *
 *   coroswap heap   malloc'd (the heap, below the main stack)
 *   coroswap low    mmap'd at a low address (also below)
 *   coroswap high   mmap'd above the main stack
 *
 * Built with -DHIDDEN it finds swapcontext by dlsym, as a library would
 * call it: the program does not import it, so return probes hook its
 * calls in the tracee; with -DHIDDEN -DNOTAIL yield_to_main calls it
 * and returns (no tail call: its own return is hooked in the tracee too).
 *
 * Prints the three sums: 499500 999000 1498500. */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <ucontext.h>
#ifdef HIDDEN
#include <dlfcn.h>
static int (*swapctx)(ucontext_t *, const ucontext_t *);
#define swapcontext swapctx
#endif
#ifdef NOTAIL
#define AFTER_SWAP __asm__ volatile("")
#else
#define AFTER_SWAP
#endif

#define STACK (64 << 10)

static ucontext_t mainc, co[3];
static long vals[3];

__attribute__((noinline)) long step(int id, long i) { return i * (id + 1); }
__attribute__((noinline)) void yield_to_main(int id)
{
	swapcontext(&co[id], &mainc);
	AFTER_SWAP;
}
__attribute__((noinline)) void body(int id)
{
	for (long i = 0; i < 1000; i++) {
		vals[id] += step(id, i);
		yield_to_main(id);
	}
}
static void entry(int id)
{
	body(id);
	for (;;)
		yield_to_main(id);
}

/* mapAt maps n bytes at the first free place from hint on, stepping by
 * 1 MiB, or NULL. */
static char *mapAt(uintptr_t hint, size_t n)
{
	for (int k = 0; k < 256; k++, hint += 1 << 20) {
		void *p = mmap((void *)hint, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
		if (p != MAP_FAILED)
			return p;
	}
	return NULL;
}

/* stackEnd is the end of the main thread's stack mapping. */
static uintptr_t stackEnd(void)
{
	FILE *f = fopen("/proc/self/maps", "r");
	char line[512];
	uintptr_t lo, hi, end = 0;
	while (f && fgets(line, sizeof line, f))
		if (strstr(line, "[stack]") && sscanf(line, "%lx-%lx", &lo, &hi) == 2)
			end = hi;
	if (f)
		fclose(f);
	return end;
}

int main(int argc, char **argv)
{
#ifdef HIDDEN
	swapctx = dlsym(RTLD_DEFAULT, "swapcontext");
#endif
	const char *where = argc > 1 ? argv[1] : "heap";
	char *stacks = NULL;
	if (strcmp(where, "low") == 0)
		stacks = mapAt(0x10000000, 3 * STACK);
	else if (strcmp(where, "high") == 0)
		stacks = mapAt(stackEnd() + (1 << 20), 3 * STACK);
	char here;
	if (strcmp(where, "heap") != 0 && (stacks == NULL || (stacks > &here) != (strcmp(where, "high") == 0))) {
		fprintf(stderr, "coroswap: no %s stacks (%p, main stack at %p)\n", where, (void *)stacks, (void *)&here);
		return 2;
	}
	for (int i = 0; i < 3; i++) {
		getcontext(&co[i]);
		co[i].uc_stack.ss_sp = stacks ? stacks + i * STACK : malloc(STACK);
		co[i].uc_stack.ss_size = STACK;
		co[i].uc_link = &mainc;
		makecontext(&co[i], (void (*)(void))entry, 1, i);
	}
	for (int r = 0; r < 1000; r++)
		for (int i = 0; i < 3; i++)
			swapcontext(&mainc, &co[i]);
	printf("%ld %ld %ld\n", vals[0], vals[1], vals[2]);
	return 0;
}
