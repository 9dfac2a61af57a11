// printf-like calls whose arguments after the format --calls shows as the
// format says: every conversion kind, a '*' width, more integers and
// more doubles than the argument registers hold.
#include <stdio.h>

int main(void)
{
	char buf[64];
	printf("%s=%d %5.2f %c %lu %x %hhd%%\n", "k", -3, 2.5, 'z', 7UL, 255, 300);
	snprintf(buf, sizeof buf, "%*d|%.3s|%g", 4, 42, "abcdef", -0.125);
	fprintf(stderr, "%s %p\n", buf, (void *)0x1234);
	printf("%d %d %d %d %d %d %d %d\n", 1, 2, 3, 4, 5, 6, 7, 8);
	printf("%g %g %g %g %g %g %g %g %g %g\n", 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.5, 10.5);
	printf("%o %lo %#o\n", 0755, 01777UL, 8);
	return 0;
}
