/*
 * memcopy: the tracee of TestJumpLibcMemcpy (jump_test.go). It copies
 * with libc's memcpy and mempcpy, whose implementations glibc pairs up:
 * each __mempcpy_* sets its result and jumps to +3 of the matching
 * __memcpy_*, inside the bytes a jmp at memcpy's entry would cover.
 *
 * usage: memcopy N   N calls of memcpy and N of mempcpy, every one of
 *                    777 bytes, each copy checked; print a checksum and
 *                    "ok", or "BAD" and exit 1
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LEN 777

/* Called through pointers, so that gcc calls libc instead of copying
 * inline. */
void *(*volatile copy)(void *, const void *, size_t) = memcpy;
void *(*volatile pcopy)(void *, const void *, size_t) = mempcpy;

static char src[LEN + 64], dst[LEN + 64];

/* check: dst[at..at+LEN) holds src[0..LEN). */
static int check(int at)
{
	for (int i = 0; i < LEN; i++)
		if (dst[at + i] != src[i])
			return 0;
	return 1;
}

int main(int argc, char **argv)
{
	if (argc != 2)
		return 2;
	long n = atol(argv[1]), bad = 0;
	unsigned long sum = 0;
	for (long i = 0; i < n; i++) {
		for (int k = 0; k < LEN; k++)
			src[k] = (char)(i * 31 + k);
		int at = i % 64;
		if (copy(dst + at, src, LEN) != dst + at || !check(at))
			bad++;
		if (pcopy(dst + (63 - at), src, LEN) != dst + (63 - at) + LEN || !check(63 - at))
			bad++;
		sum += (unsigned char)dst[63 - at + i % LEN];
	}
	printf("copies=%ld sum=%lu %s\n", 2 * n, sum, bad ? "BAD" : "ok");
	return bad != 0;
}
