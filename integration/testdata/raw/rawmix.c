/* rawmix: calls of every kind a raw recording must decode as the live
 * trace shows them, in N threads: functions recorded in the tracee and
 * a function that stops the thread (trapper: an indirect jump, so no
 * jump fits), tail calls from each kind into the other, a longjmp over
 * calls in flight. Each thread checks its sum.
 *   rawmix [THREADS [ROUNDS]]    (ROUNDS 0: for ever, "ready" first)
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>

__attribute__((noinline)) long leaf(long x)
{
	__asm__ volatile("" ::: "memory");
	return x * 3 + 1;
}

__attribute__((noinline)) long work2(long x)
{
	long s = 0;
	for (int i = 0; i < 3; i++)
		s += leaf(x + i) & 0xff;
	return s;
}

/* trapper(x, trapper_body) is work2(x), tail-called through a register
 * branch, which makes it stop the thread: x86-64, the branch is not its
 * first instruction (a rip-relative lea with REX.W is); arm64, whose b
 * covers any one word, it is (br x1, to trapper_body). */
long trapper(long x, void *body);
void trapper_body(void);
#if defined(__x86_64__)
__asm__(".text\n.globl trapper, trapper_body\n.type trapper,@function\ntrapper:\n"
	"  lea trapper_body(%rip), %rax\n  jmp *%rax\ntrapper_body:\n  jmp work2\n.size trapper,.-trapper\n");
#elif defined(__aarch64__)
__asm__(".text\n.globl trapper, trapper_body\n.type trapper,%function\ntrapper:\n"
	"  br x1\n.size trapper,.-trapper\ntrapper_body:\n  b work2\n");
#endif

/* A jump table (recorded in the tracee all the same). Cases 0 and 6
 * tail-call. */
__attribute__((noinline)) long sw(long x)
{
	switch (x & 7) {
	case 0: return work2(x);
	case 1: return x + 5;
	case 2: return x * 7;
	case 3: return x - 9;
	case 4: return x ^ 3;
	case 5: return x << 2;
	case 6: return work2(x + 1);
	default: return 11;
	}
}

/* Recorded in the tracee, tail-calls trapper, which stops, which
 * tail-calls work2, recorded in the tracee. */
__attribute__((noinline)) long tailtrap(long x)
{
	return trapper(x + 1, trapper_body);
}

__attribute__((noinline)) long tailin(long x)
{
	return tailtrap(x) + sw(x + 1);
}

static __thread jmp_buf jb;

__attribute__((noinline)) long thrower(long x)
{
	if (x % 5 == 0)
		longjmp(jb, 1);
	return leaf(x) + work2(x);
}

__attribute__((noinline)) long deep(long x)
{
	long r = thrower(x);
	__asm__ volatile("" ::: "memory");
	return r + 1;
}

/* expect is what worker computes, untraced. */
static long expect(int rounds)
{
	long s = 0;
	for (long i = 0; i < rounds; i++) {
		long w2 = 0, w2b = 0;
		for (int k = 0; k < 3; k++) {
			w2 += ((i + 1 + k) * 3 + 1) & 0xff;
			w2b += ((i + 2 + k) * 3 + 1) & 0xff;
		}
		long y = i + 1, v;
		s += w2; /* trapper(i + 1) */
		switch (y & 7) {
		case 0: v = w2; break;
		case 1: v = y + 5; break;
		case 2: v = y * 7; break;
		case 3: v = y - 9; break;
		case 4: v = y ^ 3; break;
		case 5: v = y << 2; break;
		case 6: v = w2b; break;
		default: v = 11;
		}
		s += v;
		if (i % 5 != 0) {
			long t = 0;
			for (int k = 0; k < 3; k++)
				t += ((i + k) * 3 + 1) & 0xff;
			s += (i * 3 + 1) + t + 1;
		}
	}
	return s;
}

static int rounds = 40;
static int forever; /* ROUNDS 0: each thread runs 40 rounds over and over */

static void *worker(void *arg)
{
	int n = forever ? 40 : rounds;
	do {
		long s = 0;
		for (volatile long i = 0; i < n; i++) {
			s += tailin(i);
			if (!setjmp(jb))
				s += deep(i);
		}
		if (s != expect(n)) {
			fprintf(stderr, "rawmix: sum %ld, want %ld\n", s, expect(n));
			exit(1);
		}
	} while (forever);
	return arg;
}

int main(int argc, char **argv)
{
	int threads = argc > 1 ? atoi(argv[1]) : 2;
	if (argc > 2)
		rounds = atoi(argv[2]);
	if (rounds == 0) {
		forever = 1;
		printf("ready\n");
		fflush(stdout);
	}
	pthread_t t[64];
	for (int i = 0; i < threads && i < 64; i++)
		pthread_create(&t[i], NULL, worker, NULL);
	for (int i = 0; i < threads && i < 64; i++)
		pthread_join(t[i], NULL);
	printf("rawmix ok %d %d\n", threads, rounds);
	return 0;
}
