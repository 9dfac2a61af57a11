/* Fetch-arg tracee: a struct with a string, an int, a char array and
 * bitfields; eight arguments (two on the stack); globals; a negative
 * return value.
 *   fetch N
 */
#include <stdio.h>
#include <stdlib.h>

struct req {
	const char *method;
	int len;
	char tag[4];
	unsigned flags : 3;
	unsigned kind : 5;
};

long gcount = 0x1122334455667788;
char gname[] = "global";

__attribute__((noinline, noipa)) int handle(struct req *r, int n)
{
	return r->len + n;
}

__attribute__((noinline, noipa)) long many(long a1, long a2, long a3, long a4,
					   long a5, long a6, long a7, long a8)
{
	return a1 + a2 + a3 + a4 + a5 + a6 + a7 + a8;
}

__attribute__((noinline, noipa)) int neg(int x)
{
	return -x;
}

int main(int argc, char **argv)
{
	static const char *methods[] = {"GET", "POST", "PUT"};
	int n = atoi(argv[1]);
	long total = 0;

	for (int i = 0; i < n; i++) {
		struct req r = {methods[i % 3], 10 * i, "ab", i & 7, (i * 3) & 31};
		total += handle(&r, i);
		total += many(1, 2, 3, 4, 5, 6, 70 + i, 80 + i);
		total += neg(i); /* the line probed by FILE:LINE tests */
	}
	printf("total=%ld\n", total);
	return 0;
}
