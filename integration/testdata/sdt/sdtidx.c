// sdtidx N: a static probe whose notes read array elements, gcc's
// indexed operands (-8@(%rdi,%rdx,8) for a[i+j]): demo:idx(a[i], b[j],
// a[i+j]) for i in 0..N-1, j = 7i mod 32; prints the sum of its calls.
#include <stdio.h>
#include <stdlib.h>
#include <sys/sdt.h>

long arr[64];
int iarr[64];

__attribute__((noinline)) long use(long *a, int *b, long i, long j)
{
	DTRACE_PROBE3(demo, idx, a[i], b[j], a[i + j]);
	return a[i] + b[j];
}

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 10, s = 0;
	for (long k = 0; k < 64; k++) {
		arr[k] = k * 3 + 1;
		iarr[k] = -k;
	}
	for (long i = 0; i < n; i++)
		s += use(arr, iarr, i % 32, (i * 7) % 32);
	printf("sum=%ld\n", s);
	return 0;
}
