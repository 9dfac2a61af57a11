/* arrays: pipe and socketpair fill two descriptors, execv takes an
 * array of strings; --calls shows them as [3, 4] and ["echo", "one",
 * ...] (-A: how many strings). */
#include <sys/socket.h>
#include <unistd.h>
int main(void) {
	int p[2], sv[2];
	if (pipe(p) != 0 || socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0)
		return 1;
	char *argv[] = {"echo", "one", "two", "three", "four", "five", NULL};
	execv("/bin/echo", argv);
	return 127;
}
