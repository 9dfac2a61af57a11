/* The tracee of the exactness tests: runs every instruction form of
 * forms.S and prints a checksum of what each one left in the registers,
 * the flags and memory, so that a displaced instruction run wrongly under
 * probe changes the output.
 *   exact N [THREADS [signals]]
 * Each of THREADS threads (0, the default: main alone) calls every form N
 * times with the same inputs: the first ones edge values, then
 * pseudo-random ones. With "signals", another thread sends each of them
 * SIGUSR1 every 50 us while they run; the handler (on an alternate stack:
 * some forms move rsp off the stack) only counts them, and the output
 * does not depend on how many came. Prints per form "NAME sum=HEX", then the counts the test needs
 * ("hits NAME K" for labels whose executions depend on the inputs, and
 * "fault ..."), identical for any number of threads but the totals.
 *
 * Values that are stack addresses are folded relative to the stack
 * pointer, so the output does not depend on where the stack is.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <ucontext.h>

struct regs {
	uint64_t rax, rbx, rcx, rdx, rsi, rdi, rbp, r8, r9, r10, r11, r12, r13, r14, r15;
	uint64_t flags, sp_in, sp_out;
};

void run_form(void (*fn)(void), struct regs *r);
extern char at_fault[];

#define F(name) void name(void);
#define FORMS(X)                                                                                      \
	X(x_pushpop_rbp) X(x_pushpop_rbx) X(x_pushpop_r12) X(x_pushpop_r13) X(x_pushpop_r14)          \
	X(x_pushpop_r15) X(x_pushpop_rdi) X(x_pushpop_r8) X(x_push_rsp) X(x_push_imm)                 \
	X(x_mov_rsp_rbp) X(x_mov_regs) X(x_leave)                                                     \
	X(x_sub_rsp_imm8) X(x_sub_rsp_imm32) X(x_add_rsp_imm8) X(x_add_rsp_imm32)                     \
	X(x_add_rsp_neg8) X(x_sub_rsp_neg8) X(x_sub_rsp_neg32) X(x_add_rsp_neg32) X(x_rsp_frame)      \
	X(x_nops) X(x_xchg) X(x_jmp)                                                                  \
	X(x_jo8) X(x_jo32) X(x_jno8) X(x_jno32) X(x_jb8) X(x_jb32) X(x_jae8) X(x_jae32)               \
	X(x_je8) X(x_je32) X(x_jne8) X(x_jne32) X(x_jbe8) X(x_jbe32) X(x_ja8) X(x_ja32)               \
	X(x_js8) X(x_js32) X(x_jns8) X(x_jns32) X(x_jp8) X(x_jp32) X(x_jnp8) X(x_jnp32)               \
	X(x_jl8) X(x_jl32) X(x_jge8) X(x_jge32) X(x_jle8) X(x_jle32) X(x_jg8) X(x_jg32)               \
	X(x_jcc_back) X(x_loop) X(x_loope) X(x_loopne) X(x_jrcxz)                                     \
	X(x_call_rel) X(x_rets) X(x_call_reg) X(x_call_mem) X(x_jmp_reg)                              \
	X(x_riprel) X(x_riprel_store) X(x_fault) X(x_pushf) X(x_string)                               \
	X(x_o2_sub) X(x_o2_riprel) X(x_o2_test) X(x_o2_endbr) X(x_o2_xor) X(x_o2_movrdx)              \
	X(x_o2_movzx_mem) X(x_o2_tail) X(x_o2_lea_rsp)
FORMS(F)
#undef F

#define E(name) {#name, name},
static const struct form {
	const char *name;
	void (*fn)(void);
} forms[] = {FORMS(E)};
#undef E
#define NFORMS (sizeof forms / sizeof forms[0])

/* What one thread found. */
struct result {
	uint64_t sum[NFORMS];
	long loope, loopne;             /* executions of atn_loope, atn_loopne */
	long faulted, fault_at, fault_returned;
	long fault_bad;                 /* faults reported elsewhere than at_fault */
	uint64_t fault_bad_rip;
};

static long n;
static pthread_mutex_t store_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_barrier_t barrier;

static int signals;
static volatile int finished;          /* workers done */
static __thread volatile long usr1;    /* SIGUSR1s taken */

static __thread sigjmp_buf fault_jmp;
static __thread uint64_t fault_rip, fault_addr, fault_rdx;

static void on_segv(int sig, siginfo_t *si, void *uc_)
{
	ucontext_t *uc = uc_;
	(void)sig;
	fault_rip = uc->uc_mcontext.gregs[REG_RIP];
	fault_rdx = uc->uc_mcontext.gregs[REG_RDX];
	fault_addr = (uint64_t)si->si_addr;
	siglongjmp(fault_jmp, 1);
}

static void on_usr1(int sig)
{
	(void)sig;
	usr1++;
}

/* Signals go to the alternate stack: a form may hold any value in rsp. */
static void altstack(void)
{
	stack_t ss = {.ss_sp = malloc(1 << 16), .ss_size = 1 << 16};
	if (ss.ss_sp == NULL || sigaltstack(&ss, NULL) != 0) {
		perror("exact: sigaltstack");
		exit(1);
	}
}

static void *signaller(void *arg)
{
	pthread_t *targets = arg;
	int n = 0;
	while (targets[n])
		n++;
	pthread_barrier_wait(&barrier);
	struct timespec ts = {0, 50000};
	while (!finished) {
		for (int i = 0; i < n; i++)
			pthread_kill(targets[i], SIGUSR1);
		nanosleep(&ts, NULL);
	}
	return NULL;
}

static uint64_t next(uint64_t *s)
{
	uint64_t x = *s;
	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	return *s = x;
}

/* Inputs for rdi in the first iterations: where add/sub rsp carry,
 * overflow, reach zero or change sign. */
static const uint64_t edges[] = {
	0, 0x18, 0x17, 0x1238, 0x7fffffffffffffff, 0x8000000000000000, 0x8000000000000017,
	0xffffffffffffffff, 0xffffffffffffff80, 0x80, 0xfffffffffffff000, 0x7fffffff80000000,
	0xfffffffffffffff0, 0x7fffffffffffffb8, 0x1000, 0x48,
};
#define NEDGES (sizeof edges / sizeof edges[0])

static uint64_t fold(uint64_t h, uint64_t v, uint64_t sp)
{
	if (v - (sp - (1 << 20)) < (2 << 20))
		v = (v - sp) ^ 0x5353000000000000;
	return (h ^ v) * 0x100000001b3 + 0x9e3779b97f4a7c15;
}

/* scrub zeroes the stack below the caller, where the forms will run, so
 * that a probe reading a word a form has not written yet reads the same
 * in every run and every thread (not what a lock or a signal left). */
__attribute__((noinline)) static void scrub(void)
{
	volatile char buf[4096];
	for (size_t i = 0; i < sizeof buf; i++)
		buf[i] = 0;
}

static void run_one(struct result *res, size_t k, long i)
{
	const struct form *f = &forms[k];
	uint64_t seed = 0x9e3779b97f4a7c15 ^ (k * 0x10001 + (uint64_t)i * 0x1000193);
	struct regs r;
	uint64_t *w = &r.rax;
	for (int j = 0; j < 15; j++)
		w[j] = next(&seed);
	if (i < (long)NEDGES)
		r.rdi = edges[i];
	/* CF PF AF ZF SF OF: in the first 16 iterations every combination
	 * of CF ZF SF OF (so every jcc goes both ways), then at random. */
	if (i < 16)
		r.flags = (i & 1) | (i & 2) << 5 | (i & 4) << 5 | (i & 8) << 8 | ((i ^ i >> 1) & 1) << 2 | (i & 4) << 2 | 0x2;
	else
		r.flags = (next(&seed) & 0x8d5) | 0x2;
	r.sp_in = r.sp_out = 0;
	uint64_t h = res->sum[k];
	if (f->fn == x_fault) {
		if (sigsetjmp(fault_jmp, 0)) {
			res->faulted++;
			if (fault_rip == (uint64_t)at_fault) {
				res->fault_at++;
			} else {
				res->fault_bad++;
				res->fault_bad_rip = fault_rip;
			}
			h = fold(h, fault_addr, 0);
			h = fold(h, fault_rdx, 0);
			res->sum[k] = h;
			return;
		}
	}
	int lock = f->fn == x_riprel_store;
	if (lock)
		pthread_mutex_lock(&store_lock);
	scrub();
	run_form(f->fn, &r);
	if (lock)
		pthread_mutex_unlock(&store_lock);
	if (f->fn == x_fault)
		res->fault_returned++;
	if (f->fn == x_loope)
		res->loope += r.r8;
	if (f->fn == x_loopne)
		res->loopne += r.r8;
	for (int j = 0; j < 15; j++)
		h = fold(h, w[j], r.sp_in);
	h = fold(h, r.flags & 0xfff, 0);
	h = fold(h, r.sp_out - r.sp_in, 0);
	res->sum[k] = h;
}

static void *worker(void *arg)
{
	struct result *res = arg;
	if (signals)
		altstack();
	pthread_barrier_wait(&barrier);
	for (long i = 0; i < n; i++)
		for (size_t k = 0; k < NFORMS; k++)
			run_one(res, k, i);
	__atomic_add_fetch(&finished, 1, __ATOMIC_SEQ_CST);
	return NULL;
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: exact N [THREADS [signals]]\n");
		return 2;
	}
	n = atol(argv[1]);
	int threads = argc > 2 ? atoi(argv[2]) : 0;
	if (threads < 0 || threads > 16)
		threads = 0;
	signals = argc > 3 && strcmp(argv[3], "signals") == 0;

	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_sigaction = on_segv;
	sa.sa_flags = SA_SIGINFO | SA_NODEFER;
	sigaction(SIGSEGV, &sa, NULL);
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_usr1;
	sa.sa_flags = SA_ONSTACK | SA_RESTART;
	sigaction(SIGUSR1, &sa, NULL);

	static struct result res[16];
	static pthread_t th[17]; /* the workers, then 0 for the signaller */
	pthread_t sig;
	int workers = threads == 0 ? 1 : threads;
	pthread_barrier_init(&barrier, NULL, workers + signals);
	if (threads == 0) {
		th[0] = pthread_self();
		if (signals)
			pthread_create(&sig, NULL, signaller, th);
		worker(&res[0]);
	} else {
		for (int t = 0; t < threads; t++)
			pthread_create(&th[t], NULL, worker, &res[t]);
		if (signals)
			pthread_create(&sig, NULL, signaller, th);
	}
	/* The workers stay joinable until the signaller is done with them. */
	while (finished < workers) {
		struct timespec ts = {0, 1000000};
		nanosleep(&ts, NULL);
	}
	if (signals)
		pthread_join(sig, NULL);
	for (int t = 0; t < threads; t++)
		pthread_join(th[t], NULL);
	threads = workers;

	struct result tot;
	memset(&tot, 0, sizeof tot);
	for (int t = 0; t < threads; t++) {
		for (size_t k = 0; k < NFORMS; k++)
			tot.sum[k] += res[t].sum[k];
		tot.loope += res[t].loope;
		tot.loopne += res[t].loopne;
		tot.faulted += res[t].faulted;
		tot.fault_at += res[t].fault_at;
		tot.fault_returned += res[t].fault_returned;
		tot.fault_bad += res[t].fault_bad;
		if (res[t].fault_bad)
			tot.fault_bad_rip = res[t].fault_bad_rip;
	}
	for (size_t k = 0; k < NFORMS; k++)
		printf("%s sum=%016llx\n", forms[k].name, (unsigned long long)tot.sum[k]);
	printf("hits loope %ld\n", tot.loope);
	printf("hits loopne %ld\n", tot.loopne);
	printf("fault faulted=%ld at_fault=%ld returned=%ld\n", tot.faulted, tot.fault_at, tot.fault_returned);
	if (tot.fault_bad)
		printf("fault NOT at at_fault: %ld times, e.g. rip=%#llx (at_fault=%p)\n", tot.fault_bad,
		       (unsigned long long)tot.fault_bad_rip, (void *)at_fault);
	return 0;
}
