/*
 * tailtrap: calls hooked in the tracee whose tail calls land in a
 * function that stops the thread (spin: a loop back into its first five
 * bytes, which no jmp can cover), then another tail call. outer(i) calls
 * mid(i), which tail-calls spin(i + 1); outer then tail-calls last(r).
 * And a chain of tail calls through one slot: first(i) tail-calls
 * spin_on(i + 1), which stops too and tail-calls then(n).
 * It prints the sum of outer(i) and first(i) for i < N, the same traced
 * and untraced. `tailtrap threads T` runs T threads that call them
 * until SIGTERM, each checking every result (outer(i) + first(i) is
 * 3i + 14), for attaches and detaches while calls are in flight.
 */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifdef __x86_64__
long spin(long n);
__asm__(".globl spin\n"
	".type spin, @function\n"
	"spin:\n"
	"	mov %rdi, %rax\n"
	"1:	sub $1, %rax\n"
	"	jg 1b\n"
	"	lea 3(%rdi), %rax\n"
	"	ret\n"
	".size spin, .-spin\n");

long spin_on(long n);
__asm__(".globl spin_on\n"
	".type spin_on, @function\n"
	"spin_on:\n"
	"	mov %rdi, %rax\n"
	"1:	sub $1, %rax\n"
	"	jg 1b\n"
	"	jmp then\n"
	".size spin_on, .-spin_on\n");
#define SPIN(n) spin(n)
#define SPIN_ON(n) spin_on(n)
#else
/*
 * arm64's b covers any one word: spin and spin_on start with a register
 * branch instead (br x1, to their bodies), which no b can cover. x30 is
 * left alone: the bodies return, or tail-call then, as spin does.
 */
long spin(long n, void *body);
long spin_on(long n, void *body);
void spin_body(void), spin_on_body(void);
__asm__(".globl spin, spin_on, spin_body, spin_on_body\n"
	".type spin, %function\n"
	"spin:\n"
	"	br x1\n"
	".size spin, .-spin\n"
	".type spin_on, %function\n"
	"spin_on:\n"
	"	br x1\n"
	".size spin_on, .-spin_on\n"
	"spin_body:\n"
	"	mov x2, x0\n"
	"1:	subs x2, x2, #1\n"
	"	b.gt 1b\n"
	"	add x0, x0, #3\n"
	"	ret\n"
	"spin_on_body:\n"
	"	mov x2, x0\n"
	"1:	subs x2, x2, #1\n"
	"	b.gt 1b\n"
	"	b then\n");
#define SPIN(n) spin(n, spin_body)
#define SPIN_ON(n) spin_on(n, spin_on_body)
#endif

static volatile long sink;

__attribute__((noinline)) long then(long n)
{
	sink += n;
	return n + 5;
}

__attribute__((noinline)) long first(long n) { return SPIN_ON(n + 1); }

__attribute__((noinline)) long mid(long n) { return SPIN(n + 1); }

__attribute__((noinline)) long last(long n)
{
	sink += n;
	return n * 2;
}

__attribute__((noinline)) long outer(long n)
{
	long r = mid(n);
	sink += r;
	return last(r);
}

static volatile sig_atomic_t stop;
static void on_term(int sig) { stop = 1; }

static void *checker(void *arg)
{
	for (long i = 0; !stop; i = (i + 1) & 1023) {
		if (outer(i) + first(i) != 3 * i + 14) {
			fprintf(stderr, "wrong result at i=%ld\n", i);
			abort();
		}
		if (i == 0)
			usleep(100);
	}
	return NULL;
}

static int threads(int n)
{
	pthread_t t[64];
	signal(SIGTERM, on_term);
	for (int i = 0; i < n && i < 64; i++)
		pthread_create(&t[i], NULL, checker, NULL);
	printf("ready\n");
	fflush(stdout);
	for (int i = 0; i < n && i < 64; i++)
		pthread_join(t[i], NULL);
	printf("ok\n");
	return 0;
}

int main(int argc, char **argv)
{
	if (argc > 2 && strcmp(argv[1], "threads") == 0)
		return threads(atoi(argv[2]));
	long n = argc > 1 ? atol(argv[1]) : 100, s = 0;
	for (long i = 0; i < n; i++)
		s += outer(i) + first(i);
	printf("s=%ld\n", s);
	return 0;
}
