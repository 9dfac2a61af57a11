/* filled: read and fgets fill buffers; --calls shows what they hold at
 * the return, as ltrace does. filled FILE (its two lines). */
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>
int main(int argc, char **argv) {
	char buf[64], line[32];
	int fd = open(argv[1], O_RDONLY);
	long n = read(fd, buf, sizeof buf);
	close(fd);
	FILE *f = fopen(argv[1], "r");
	char *s = fgets(line, sizeof line, f);
	char *eof = fgets(line, sizeof line, f);
	fgets(line, sizeof line, f);
	fclose(f);
	printf("%ld %d %d\n", n, s != 0, eof != 0);
	return 0;
}
