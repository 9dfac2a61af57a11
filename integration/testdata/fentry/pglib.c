// pglib: a library built with -pg (plain or -mfentry) that pghost.c
// dlopens after probe is there. pglib_fib counts its calls.
long pglib_calls;

__attribute__((noinline)) long pglib_fib(long n)
{
	pglib_calls++;
	return n < 2 ? n : pglib_fib(n - 1) + pglib_fib(n - 2);
}

__attribute__((noinline)) long pglib_work(long n) { return pglib_fib(n); }
