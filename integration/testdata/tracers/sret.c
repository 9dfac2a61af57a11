/* The tracee of TestFuncArgsResults: a function for each way the calling
 * conventions pass a result, and parameters of each class beside it. A
 * struct returned in memory has its address passed hidden: in %rdi on
 * x86-64, which moves the parameters along by one; in x8 on arm64, which
 * moves none. One returned in registers moves nothing. Structs of 16
 * bytes go in two registers, of 24 in memory (x86-64) or by reference
 * (arm64); floats and doubles in vector registers among the integers.
 * It prints what they computed: traced, it must print the same. */
#include <stdio.h>

struct big { long a[4]; };      /* 32 bytes: returned in memory */
struct two { long a, b; };      /* 16 bytes: in two registers */
struct three { long x, y, z; }; /* 24 bytes */

__attribute__((noinline)) struct big mk(int v, long w) { struct big b = {{v, w, v + w, 1}}; return b; }
__attribute__((noinline)) struct two mktwo(int v, long w) { struct two t = {v, w}; return t; }

/* The struct copied to a local whose address escapes: else gcc -O2 says
 * no more than <optimized out> of it. */
__attribute__((noinline)) long by16(struct two t, int after)
{
	struct two u = t;
	__asm__ volatile("" : : "r"(&u) : "memory");
	return u.a + u.b + after;
}
__attribute__((noinline)) long by24(struct three t, int after) { return t.x + t.y + t.z + after; }
__attribute__((noinline)) double mixed(int a, double d, long b, float f, int c) { return a + d + b + f + c; }
__attribute__((noinline)) struct big mkfrom(struct two t, double d, int k)
{
	struct two u = t;
	__asm__ volatile("" : : "r"(&u) : "memory");
	struct big b = {{u.a, u.b, (long)d, k}};
	return b;
}

int main(void)
{
	long s = 0;
	for (int i = 0; i < 2; i++) {
		struct big b = mk(i, 100 + i);
		s += b.a[2] + b.a[3];
	}
	struct two t = mktwo(7, 8);
	s += t.a + t.b;
	s += by16((struct two){3, 4}, 5);
	s += by24((struct three){1, 2, 3}, 6);
	s += (long)mixed(1, 2.5, 3, 0.5f, 4);
	struct big b = mkfrom((struct two){9, 10}, 11.0, 12);
	s += b.a[0] + b.a[1] + b.a[2] + b.a[3];
	printf("%ld\n", s);
	return 0;
}
