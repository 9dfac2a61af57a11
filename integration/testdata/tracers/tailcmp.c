// tailcmp: a qsort comparator that ends in a tail call of strcmp: built
// -O2, it counts, then `jmp strcmp@plt`, so strcmp's return address is
// in qsort (libc), not in the program. ltrace shows each call (it hooks
// the program's PLT); prints the first and last word and how many
// comparisons there were.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static long ncmp;

static int cmp(const void *a, const void *b)
{
	ncmp++;
	return strcmp(*(char *const *)a, *(char *const *)b);
}

int main(void)
{
	const char *w[] = {"pear", "apple", "fig", "kiwi", "plum"};
	qsort(w, 5, sizeof w[0], cmp);
	printf("%s %s %ld\n", w[0], w[4], ncmp);
	return 0;
}
