/* prog: calls libzfn's zfn_twice (and through it zfn_add) N times, and
 * libc's memcpy, memset and strlen (IFUNCs) N times each. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int zfn_twice(int a);

char a[4096], b[4096];

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 10;
	long s = 0;
	for (int i = 0; i < n; i++) {
		s += zfn_twice(i);
		memcpy(a, b, 100 + i);
		memset(b, 'a' + i % 26, 50 + i);
		s += strlen(b);
	}
	printf("s=%ld\n", s);
	return 0;
}
