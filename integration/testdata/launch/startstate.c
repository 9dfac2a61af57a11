// startstate.c prints what a program inherits from whoever started it,
// one item a line, so that two starts can be compared byte for byte:
// its signal dispositions, mask and pending signals (/proc/self/status),
// every resource limit, its environment (sorted), its open descriptors
// (what each names, with its status flags; pipe and socket numbers left
// out), its umask, working directory, nice value, personality and
// parent-death signal.
#define _GNU_SOURCE
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/personality.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

extern char **environ;

static const char *const limits[RLIM_NLIMITS] = {
	[RLIMIT_CPU] = "CPU", [RLIMIT_FSIZE] = "FSIZE", [RLIMIT_DATA] = "DATA",
	[RLIMIT_STACK] = "STACK", [RLIMIT_CORE] = "CORE", [RLIMIT_RSS] = "RSS",
	[RLIMIT_NPROC] = "NPROC", [RLIMIT_NOFILE] = "NOFILE",
	[RLIMIT_MEMLOCK] = "MEMLOCK", [RLIMIT_AS] = "AS", [RLIMIT_LOCKS] = "LOCKS",
	[RLIMIT_SIGPENDING] = "SIGPENDING", [RLIMIT_MSGQUEUE] = "MSGQUEUE",
	[RLIMIT_NICE] = "NICE", [RLIMIT_RTPRIO] = "RTPRIO", [RLIMIT_RTTIME] = "RTTIME",
};

static void status(void) {
	static const char *const fields[] = {"SigPnd:", "ShdPnd:", "SigBlk:", "SigIgn:", "SigCgt:",
		"Umask:", "NoNewPrivs:", "Seccomp:", "CapInh:", "CapPrm:", "CapEff:", "CapBnd:", "CapAmb:"};
	FILE *f = fopen("/proc/self/status", "r");
	char line[512];
	while (f && fgets(line, sizeof line, f))
		for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++)
			if (strncmp(line, fields[i], strlen(fields[i])) == 0)
				fputs(line, stdout);
	if (f)
		fclose(f);
}

static void rlimits(void) {
	for (int r = 0; r < RLIM_NLIMITS; r++) {
		struct rlimit l;
		if (getrlimit(r, &l) != 0) {
			printf("rlimit %d: error\n", r);
			continue;
		}
		printf("rlimit %s %llu %llu\n", limits[r] ? limits[r] : "?",
		       (unsigned long long)l.rlim_cur, (unsigned long long)l.rlim_max);
	}
}

static int bystring(const void *a, const void *b) {
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static void environment(void) {
	size_t n = 0;
	while (environ[n])
		n++;
	char **sorted = malloc((n + 1) * sizeof *sorted);
	memcpy(sorted, environ, (n + 1) * sizeof *sorted);
	qsort(sorted, n, sizeof *sorted, bystring);
	for (size_t i = 0; i < n; i++)
		printf("env %s\n", sorted[i]);
	free(sorted);
}

static int bynumber(const void *a, const void *b) {
	return *(const int *)a - *(const int *)b;
}

// descriptors prints each open descriptor but the listing's own, in
// order; "pipe:[123]" is printed "pipe:[]": each run has its own pipes.
static void descriptors(void) {
	DIR *d = opendir("/proc/self/fd");
	int fds[1024], n = 0;
	struct dirent *e;
	while (d && (e = readdir(d)) && n < 1024)
		if (e->d_name[0] != '.' && atoi(e->d_name) != dirfd(d))
			fds[n++] = atoi(e->d_name);
	qsort(fds, n, sizeof fds[0], bynumber);
	for (int i = 0; i < n; i++) {
		char path[64], target[4096];
		snprintf(path, sizeof path, "/proc/self/fd/%d", fds[i]);
		ssize_t len = readlink(path, target, sizeof target - 1);
		target[len < 0 ? 0 : len] = 0;
		char *bracket = strchr(target, '[');
		if (bracket && target[0] != '/')
			strcpy(bracket, "[]");
		int fl = fcntl(fds[i], F_GETFL), fdfl = fcntl(fds[i], F_GETFD);
		printf("fd %d %s flags %#o%s\n", fds[i], target, fl, fdfl & FD_CLOEXEC ? " cloexec" : "");
	}
	if (d)
		closedir(d);
}

__attribute__((noinline)) void report(void) {
	status();
	rlimits();
	environment();
	descriptors();
	mode_t m = umask(0);
	char cwd[4096];
	printf("umask %03o\ncwd %s\nnice %d\npersonality %#x\n", m, getcwd(cwd, sizeof cwd) ? cwd : "?",
	       getpriority(PRIO_PROCESS, 0), personality(0xffffffff));
	int sig = -1;
	prctl(PR_GET_PDEATHSIG, &sig);
	printf("pdeathsig %d\n", sig);
}

int main(void) {
	report();
	return 0;
}
