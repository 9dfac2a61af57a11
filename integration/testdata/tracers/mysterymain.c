/* TestCallsUnknown's program: it calls its library's mystery(). */
#include <stdio.h>

int mystery(int a, int b);

int main(void)
{
	printf("%d\n", mystery(2, 3));
	return 0;
}
