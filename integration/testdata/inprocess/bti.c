/* The tracee of TestBTIGuardedEntries (arm64): a static program with no
 * C library, built with -mbranch-protection=standard, whose GNU property
 * note says BTI: the kernel maps its text with PROT_BTI (Debian's start
 * files have no such note, so no program built with them is guarded).
 * An indirect call must land on a landing pad there (bti c, or paciasp):
 * leaf, twice and deep start with one and are called through a table;
 * inner, called directly alone, does not. It waits for a line on its
 * standard input first, then prints the sum of its calls. */
static long sys3(long n, long a, long b, long c)
{
	register long x8 __asm__("x8") = n, x0 __asm__("x0") = a, x1 __asm__("x1") = b, x2 __asm__("x2") = c;
	__asm__ volatile("svc #0" : "+r"(x0) : "r"(x8), "r"(x1), "r"(x2) : "memory");
	return x0;
}

__attribute__((noinline)) long leaf(long x) { return x * 3 + 1; }
/* Called directly alone: no landing pad, so a jump can replace its
 * first instruction, and its probe records in the tracee. */
static __attribute__((noinline)) long inner(long x) { return x ^ 5; }
__attribute__((noinline)) long twice(long x) { return leaf(x) + leaf(x + 1) + 1; }
__attribute__((noinline)) long deep(long x)
{
	volatile long pad[4] = {x, x, x, x};
	return twice(pad[1]) + inner(pad[2]) + 2;
}

long (*volatile table[])(long) = {leaf, twice, deep};

/* A thread control block as glibc lays it out, for the thread id probe
 * reads from it (tid at the thread pointer less 0x670): with no C
 * library, nothing else would give the thread one, and its probes
 * could not record in the tracee. */
static char tcb[0x2000] __attribute__((aligned(16)));

__attribute__((noreturn)) void _start(void)
{
	char *tp = tcb + 0x1000;
	*(int *)(tp - 0x670) = sys3(178 /* gettid */, 0, 0, 0);
	__asm__ volatile("msr tpidr_el0, %0" : : "r"(tp));
	char c;
	sys3(63 /* read */, 0, (long)&c, 1); /* (a test reads our maps meanwhile) */
	long sum = 0;
	for (long i = 0; i < 300; i++)
		sum += table[i % 3](i);
	char buf[24];
	int n = sizeof buf;
	buf[--n] = '\n';
	do
		buf[--n] = '0' + sum % 10;
	while ((sum /= 10) != 0);
	sys3(64 /* write */, 1, (long)(buf + n), sizeof buf - n);
	sys3(93 /* exit */, 0, 0, 0);
	__builtin_unreachable();
}
