/* cold: gcc -O2 splits f into f and f.cold, a part reached by a jump
 * with f's frame in place, whose [rsp] is f's local, not a return
 * address. Prints a sum the locals make; any probe that writes [rsp] at
 * f.cold's entry changes it. f.cold runs for 8 of the 50 calls. */
#include <stdio.h>
#include <stdlib.h>
__attribute__((cold, noinline)) void report(const char *what, long x) { fprintf(stderr, "%s %ld\n", what, x); }
/* The locals live at the bottom of the frame, [rsp] among them, and the
 * cold part, reached by a jump, reads them back. */
__attribute__((noinline)) long f(long x) {
	volatile long v[4] = {x, x * 2, x * 3, x * 5};
	if (__builtin_expect(x % 7 == 0, 0)) {
		report("cold", x);
		return v[0] + v[1] + v[2] + v[3];
	}
	return v[0] - v[3];
}
int main(void) { long s = 0; for (long i = 0; i < 50; i++) s += f(i); printf("s=%ld\n", s); return 0; }
