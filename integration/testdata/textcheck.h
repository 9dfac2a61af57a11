/*
 * textcheck.h: text_intact() for the integration tests' C tracees. It
 * tells whether the text of every loaded object (the program, libc,
 * ld.so) is byte for byte its file's: no breakpoint or jmp left behind.
 * Needs _GNU_SOURCE before the first include.
 */
#include <fcntl.h>
#include <link.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int compare_phdr(struct dl_phdr_info *info, size_t size, void *data)
{
	int *differ = data;
	const char *path = info->dlpi_name[0] ? info->dlpi_name : "/proc/self/exe";
	int fd = open(path, O_RDONLY);

	if (fd < 0)
		return 0; /* the vDSO: no file */
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_X))
			continue;
		char *file = malloc(ph->p_filesz);
		if (!file || pread(fd, file, ph->p_filesz, ph->p_offset) != (ssize_t)ph->p_filesz ||
		    memcmp(file, (const void *)(info->dlpi_addr + ph->p_vaddr), ph->p_filesz) != 0)
			(*differ)++;
		free(file);
	}
	close(fd);
	return 0;
}

static int text_intact(void)
{
	int differ = 0;

	dl_iterate_phdr(compare_phdr, &differ);
	return differ == 0;
}
