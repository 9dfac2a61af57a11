// execd: the program execer becomes. Its work() lies elsewhere than
// execer's (the padding before it), and it checks that its text is
// exactly as in its file: a tracer that wrote old bytes into the new
// image would change the checksum. With "wait", it waits for SIGUSR1
// after its work, before the check, so that a tracer can detach first.
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define PAD __asm__ volatile(".fill 4096, 1, 0x90")

__attribute__((noinline)) void padding(void) { PAD; }

__attribute__((noinline)) int work(int x)
{
	__asm__ volatile("" ::: "memory");
	return x * 5 + 2 + (x >> 2);
}

extern char __executable_start[], etext[];

// textSum hashes our text as mapped against the same bytes in our file.
static int textSame(void)
{
	FILE *f = fopen("/proc/self/exe", "rb");
	if (!f)
		return 0;
	size_t n = etext - __executable_start;
	unsigned char *buf = malloc(n);
	size_t got = fread(buf, 1, n, f); // the ELF maps from offset 0
	fclose(f);
	int same = got == n && memcmp(buf, __executable_start, n) == 0;
	free(buf);
	return same;
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IONBF, 0);
	int m = argc > 1 ? atoi(argv[1]) : 1, s = 0;
	for (int i = 0; i < m; i++)
		s += work(i);
	printf("execd sum %d ppid-ok %d\n", s, getppid() > 0);
	if (argc > 2 && strcmp(argv[2], "wait") == 0) {
		sigset_t set;
		sigemptyset(&set);
		sigaddset(&set, SIGUSR1);
		sigprocmask(SIG_BLOCK, &set, NULL);
		printf("done\n");
		int sig;
		sigwait(&set, &sig);
	}
	printf("execd text intact %d\n", textSame());
	return 7;
}
