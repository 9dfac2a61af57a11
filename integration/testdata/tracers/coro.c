/* coro: three swapcontext coroutines, two on malloc'd stacks and one on
 * an mmap'd one, each calling step() ROUNDS times; step() calls work(),
 * yields to main in the middle and calls work() again when resumed, so
 * that calls live on three stacks of one thread at once.
 *
 *   coro ROUNDS        run them all through
 *   coro ROUNDS wait   say "ready", wait for a line on stdin, run all but
 *                      the last round (each coroutine left inside step),
 *                      say "parked", wait for stdin to close, then finish
 *
 * At the end each coroutine's body() switches to main for good: its call
 * never returns. Prints what the calls computed. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

static ucontext_t main_ctx, co_ctx[3];
static int calls[3];
static int rounds;
static long sums[3];

__attribute__((noinline)) int work(int co, int i) { calls[co]++; return co * 1000 + i; }

__attribute__((noinline)) long step(int co, int i)
{
	long v = work(co, i);
	swapcontext(&co_ctx[co], &main_ctx);
	return v + work(co, i + 1);
}

static void body(int co)
{
	for (int i = 0; i < rounds; i++)
		sums[co] += step(co, i);
	swapcontext(&co_ctx[co], &main_ctx); /* done: never resumed */
}

static void round_robin(void)
{
	for (int co = 0; co < 3; co++)
		swapcontext(&main_ctx, &co_ctx[co]);
}

int main(int argc, char **argv)
{
	rounds = argc > 1 ? atoi(argv[1]) : 10;
	int wait = argc > 2 && strcmp(argv[2], "wait") == 0;
	size_t size = 64 << 10;
	for (int co = 0; co < 3; co++) {
		getcontext(&co_ctx[co]);
		co_ctx[co].uc_stack.ss_sp = co == 2 ? mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0) : malloc(size);
		co_ctx[co].uc_stack.ss_size = size;
		co_ctx[co].uc_link = NULL;
		makecontext(&co_ctx[co], (void (*)(void))body, 1, co);
	}
	char line[16];
	if (wait) {
		printf("ready\n");
		fflush(stdout);
		if (!fgets(line, sizeof line, stdin))
			return 2;
	}
	for (int i = 0; i < rounds; i++)
		round_robin();
	if (wait) {
		printf("parked\n");
		fflush(stdout);
		while (fgets(line, sizeof line, stdin))
			;
	}
	round_robin();
	printf("sums=%ld,%ld,%ld calls=%d,%d,%d\n", sums[0], sums[1], sums[2], calls[0], calls[1], calls[2]);
	return 0;
}
