// Calls of the C library that fail with NULL and errno, for --calls.
#include <stdio.h>
#include <stdlib.h>
int main(void) {
	FILE *f = fopen("/nonexistent/x", "r");
	void *p = malloc((size_t)1 << 62);
	printf("%p %p\n", (void *)f, p);
	return 0;
}
