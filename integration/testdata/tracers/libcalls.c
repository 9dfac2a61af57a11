/* The tracee of TestCalls: library calls of known arguments and
 * results, one that fails (-1), one whose -1 is no failure (atoi's,
 * with errno left set by the failure), one to an IFUNC (strlen), a
 * callback (qsort's compare, a call of the program's own made from
 * inside a library call). */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int cmp(const void *a, const void *b)
{
	return abs(*(const int *)a) - abs(*(const int *)b);
}

int main(void)
{
	char *p = malloc(272);
	int fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
	ssize_t n = write(fd, "hello", 5);
	close(fd);
	int bad = open("/nonexistent-dir/x", O_RDWR | O_CREAT, 0640);
	const char *volatile minus = "-1"; /* (not folded at build time) */
	volatile int number = atoi(minus);
	int v[] = {3, -1, 2};
	qsort(v, 3, sizeof v[0], cmp);
	const char *volatile word = "hello"; /* (not folded at build time) */
	size_t len = strlen(word);
	printf("%zd %d %d %d %d %zu\n", n, bad, v[0], v[1], v[2], len);
	free(p);
	return 0;
}
