/* Tracee of the actions tests: known calls with known values, built
 * -O2 -fomit-frame-pointer so a stack trace needs the CFI. noipa keeps
 * each function out of line, unspecialised and unsplit. */
#include <stdio.h>

#define KEEP __attribute__((noipa))

volatile long sink;

static const long sizes[] = {1, 2, 3, 5, 8, 13, 21, 34, 55, 89, 100, 100, 100};

KEEP void sized(long size) { sink += size; }

/* leaf <- mid <- top <- main, each with a frame of its own (a local
 * buffer), none with a frame pointer. */
KEEP long leaf(long n) { sink += n; return n * 3; }

KEEP long mid(long n)
{
	volatile char buf[40];
	buf[n % 40] = (char)n;
	long r = leaf(n) + buf[n % 40];
	sink += r;
	return r;
}

KEEP long top(long n)
{
	volatile long buf[8];
	buf[n % 8] = n;
	long r = mid(n) * 2 + buf[n % 8];
	sink ^= r;
	return r;
}

KEEP void tick(long i) { sink += i; }
KEEP void off(void) { sink++; }
KEEP void on(void) { sink--; }

int main(void)
{
	for (unsigned i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
		sized(sizes[i]);
	for (long i = 0; i < 5; i++)
		top(i);
	for (long i = 0; i < 10; i++) {
		if (i == 3)
			off();
		if (i == 6)
			on();
		tick(i);
	}
	return 0;
}
