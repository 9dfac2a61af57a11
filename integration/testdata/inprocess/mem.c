/* mem: use(s, msg) called with what a probe's memory reads must get
 * right: a struct's fields and a string, a NULL struct, a string longer
 * than an in-process copy takes, a struct in an unmapped page, a string
 * that ends exactly at the end of a page before an unmapped one, and one
 * that runs into it without its NUL; pointers in the struct to follow
 * (to another struct, to a string; then into the hole, and NULL), an
 * array in it, then one that runs into the hole; globals. Prints what
 * use() computed. */
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

struct S {
	long a;
	int b;
	char name[16];
	struct S *next; /* +32 */
	const char *label; /* +40 */
	int arr[4]; /* +48 */
};

long global = 77;
const char *gname = "gee";

/* It reads only msg's first byte: the probes read the rest. */
__attribute__((noinline)) long use(struct S *s, const char *msg)
{
	return (long)msg[0] + (s != NULL);
}

int main(void)
{
	long page = sysconf(_SC_PAGESIZE);
	char *p = mmap(NULL, 2 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED || munmap(p + page, page) != 0)
		return 1;
	struct S s2 = {41, 3, "two", NULL, NULL, {0}};
	struct S s = {40, 2, "hello", &s2, "lbl", {1, -2, 3, -4}};
	char big[600];
	memset(big, 'x', sizeof big - 1);
	big[sizeof big - 1] = 0;
	char *edge = p + page - 5; /* "edge" and its NUL: the page's last bytes */
	memcpy(edge, "edge", 5);
	long r = use(&s, "a message") + use(NULL, "second") + use(&s, big);
	r += use((struct S *)(p + page), edge); /* the struct unmapped */
	memcpy(p + page - 4, "open", 4);      /* no NUL before the hole */
	s.next = (struct S *)(p + page); /* the pointers lead into the hole, */
	s.label = NULL;                  /* and nowhere */
	r += use(&s, p + page - 4);
	struct S *q = (struct S *)(p + page - 56); /* its arr's last two in the hole */
	q->a = 9;
	q->next = &s2;
	q->label = "q";
	q->arr[0] = 5;
	q->arr[1] = 6;
	r += use(q, "six");
	printf("r=%ld\n", r);
	return 0;
}
