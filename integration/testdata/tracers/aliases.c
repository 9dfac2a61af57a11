/* The tracee of TestCallsNames: library functions the C library exports
 * under two names at one address (strchr is also index, strrchr rindex,
 * memcmp bcmp, fgetc getc), and IFUNCs whose resolvers may pick one
 * implementation for two (memcpy's is memmove's on x86-64): ltrace names
 * each call as the program made it. gettimeofday, whose IFUNC picks the
 * vDSO's code on x86-64: seen at the program's PLT entry. And fork,
 * which the return hook cannot take: its calls go unseen, and the trace
 * says so. */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

int main(void)
{
	char a[16] = "abcdefgh", b[16] = "";
	volatile size_t n = 9; /* (no call folded at build time) */
	memcpy(b, a, n);
	memmove(b + 1, b, n - 1);
	int c = memcmp(a, b, n);
	char *q = strchr(a, 'd');
	char *r = strrchr(a, 'e');
	int ch = fgetc(stdin);
	memset(a + 9, 'z', n - 7); /* (a character: 'z', a signal: SIGUSR1) */
	signal(SIGUSR1, SIG_IGN);
	struct timeval tv;
	gettimeofday(&tv, NULL);
	if (fork() == 0)
		_exit(0);
	wait(NULL);
	printf("%s %d %ld %ld %c\n", b, c, (long)(q - a), (long)(r - a), ch);
	return 0;
}
