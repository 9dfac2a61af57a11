/*
 * reloc: calls reloc_arm64.S's functions, each N times, and prints their
 * sums (the same traced and untraced).
 */
#include <stdio.h>
#include <stdlib.h>

long f_adrp(long), f_adr(long), f_ldr(long), f_ldrw(long), f_ldrsw(long);
long f_b(long), call_bl(long), f_cbz(long), f_tbnz(long), call_blt(long);

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 1000;
	long (*fns[])(long) = {f_adrp, f_adr, f_ldr, f_ldrw, f_ldrsw, f_b, call_bl, f_cbz, f_tbnz, call_blt};
	const char *names[] = {"adrp", "adr", "ldr", "ldrw", "ldrsw", "b", "bl", "cbz", "tbnz", "blt"};
	for (unsigned k = 0; k < sizeof fns / sizeof fns[0]; k++) {
		long sum = 0;
		for (long i = 0; i < n; i++)
			sum += fns[k](i % 10);
		printf("%s=%ld\n", names[k], sum);
	}
	return 0;
}
