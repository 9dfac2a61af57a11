// syscalls: opens files through glibc (which calls openat) and through
// the raw open system call (arm64 has none: the raw openat), then makes
// a raw ioctl of fd -1. With "loop", it prints "ready" and opens its
// file every 20 ms until the stop file appears.
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	if (argc == 4 && strcmp(argv[1], "loop") == 0) {
		printf("ready\n");
		fflush(stdout);
		while (access(argv[3], F_OK) != 0) {
			int fd = open(argv[2], O_RDONLY | O_CLOEXEC);
			close(fd);
			usleep(20000);
		}
		return 0;
	}
	int fd = open(argv[1], O_RDONLY);
	int missing = open(argv[2], O_RDONLY);
#ifdef SYS_open
	long raw = syscall(SYS_open, argv[1], O_RDONLY | O_CLOEXEC);
#else
	long raw = syscall(SYS_openat, AT_FDCWD, argv[1], O_RDONLY | O_CLOEXEC);
#endif
	syscall(SYS_ioctl, -1, 0x5401, 0); /* -S: typed by its table of system calls */
	printf("fds %d %d %ld\n", fd, missing, raw);
	return 0;
}
