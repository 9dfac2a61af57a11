// A small request server for the error-injection tests: one request a
// line on stdin, one answer a line on stdout, each error path saying what
// failed and why (strerror(errno)), and the totals at the end.
//
//	open PATH   open and read the file: "open PATH: N bytes"
//	alloc N     malloc N bytes: "alloc N: ok"
//	sum TEXT    its own function's result: "sum TEXT: N"
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int served, failed;

__attribute__((noinline)) int checksum(const char *text, int len)
{
	int sum = 0;
	for (int i = 0; i < len; i++)
		sum += (unsigned char)text[i];
	return sum;
}

static void do_open(const char *path)
{
	int fd = open(path, O_RDONLY);
	if (fd < 0) {
		printf("open %s: error: %s\n", path, strerror(errno));
		failed++;
		return;
	}
	char buf[4096];
	ssize_t n = read(fd, buf, sizeof buf);
	int e = errno;
	close(fd);
	if (n < 0) {
		printf("open %s: read error: %s\n", path, strerror(e));
		failed++;
		return;
	}
	printf("open %s: %zd bytes\n", path, n);
	served++;
}

static void do_alloc(const char *arg)
{
	size_t n = strtoul(arg, NULL, 10);
	char *p = malloc(n);
	if (p == NULL) {
		printf("alloc %zu: out of memory\n", n);
		failed++;
		return;
	}
	p[0] = 1;
	free(p);
	printf("alloc %zu: ok\n", n);
	served++;
}

int main(void)
{
	char line[4096];
	while (fgets(line, sizeof line, stdin) != NULL) {
		line[strcspn(line, "\n")] = 0;
		if (strncmp(line, "open ", 5) == 0) {
			do_open(line + 5);
		} else if (strncmp(line, "alloc ", 6) == 0) {
			do_alloc(line + 6);
		} else if (strncmp(line, "sum ", 4) == 0) {
			printf("sum %s: %d\n", line + 4, checksum(line + 4, (int)strlen(line + 4)));
			served++;
		} else if (strcmp(line, "quit") == 0) {
			break;
		} else {
			printf("%s: unknown request\n", line);
		}
		fflush(stdout);
	}
	printf("served=%d failed=%d\n", served, failed);
	return failed != 0;
}
