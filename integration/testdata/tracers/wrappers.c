// glibc's system call wrappers written in assembly (umask, getuid,
// geteuid), whose DWARF, where the library has it, says nothing of their
// parameters or result: --calls shows them by the table of prototypes.
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

int main(void)
{
	mode_t old = umask(027);
	umask(old);
	uid_t uid = getuid();
	uid_t euid = geteuid();
	printf("%u %u\n", uid, euid);
	return 0;
}
