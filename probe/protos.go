package probe

import (
	"fmt"
	"strings"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/probedbg/probe/symbols"
)

// Prototypes of common C library functions, for --args (and --calls)
// where the library has no DWARF, as ltrace's prototype files give them
// (/etc/ltrace.conf). One a line: RESULT NAME(TYPE, ...); "..." ends a
// variadic list, whose extra arguments are not shown. Types: the C
// integer types by name, char (a character), bool, string (a char *
// shown as its text), ptr (any other pointer), oflags (open's flags,
// shown as O_... names), fd, pid, size, ssize, off, mode (octal), void.
const prototypeTable = `
ptr malloc(size)
ptr calloc(size, size)
ptr realloc(ptr, size)
void free(ptr)
ptr aligned_alloc(size, size)
int posix_memalign(ptr, size, size)
size strlen(string)
size strnlen(string, size)
int strcmp(string, string)
int strncmp(string, string, size)
int strcasecmp(string, string)
ptr strcpy(ptr, string)
ptr strncpy(ptr, string, size)
ptr strcat(ptr, string)
string strdup(string)
string strndup(string, size)
ptr strchr(string, char)
ptr strrchr(string, char)
ptr strstr(string, string)
ptr memcpy(ptr, ptr, size)
ptr memmove(ptr, ptr, size)
ptr memset(ptr, int, size)
int memcmp(ptr, ptr, size)
ptr memchr(ptr, int, size)
int puts(string)
int putchar(char)
int printf(string, ...)
int fprintf(ptr, string, ...)
int sprintf(ptr, string, ...)
int snprintf(ptr, size, string, ...)
int fputs(string, ptr)
ptr fgets(ptr, int, ptr)
ptr fopen(string, string)
ptr fdopen(fd, string)
int fclose(ptr)
int fflush(ptr)
size fread(ptr, size, size, ptr)
size fwrite(ptr, size, size, ptr)
fd open(string, oflags, mode)
fd open64(string, oflags, mode)
fd openat(fd, string, oflags, mode)
fd creat(string, mode)
int close(fd)
ssize read(fd, ptr, size)
ssize write(fd, ptr, size)
ssize pread(fd, ptr, size, off)
ssize pwrite(fd, ptr, size, off)
off lseek(fd, off, int)
int dup(fd)
int dup2(fd, fd)
int pipe(ptr)
int unlink(string)
int rename(string, string)
int mkdir(string, mode)
int rmdir(string)
int access(string, int)
int chdir(string)
string getcwd(ptr, size)
string getenv(string)
int setenv(string, string, int)
int unsetenv(string)
int atoi(string)
long atol(string)
long strtol(string, ptr, int)
ulong strtoul(string, ptr, int)
void exit(int)
void _exit(int)
uint sleep(uint)
int usleep(uint)
int nanosleep(ptr, ptr)
long time(ptr)
int gettimeofday(ptr, ptr)
int clock_gettime(int, ptr)
pid getpid()
pid getppid()
pid gettid()
pid fork()
int execve(string, ptr, ptr)
int execvp(string, ptr)
pid waitpid(pid, ptr, int)
int kill(pid, int)
int raise(int)
int socket(int, int, int)
int connect(fd, ptr, uint)
int bind(fd, ptr, uint)
int listen(fd, int)
int accept(fd, ptr, ptr)
ssize send(fd, ptr, size, int)
ssize recv(fd, ptr, size, int)
int poll(ptr, ulong, int)
ptr mmap(ptr, size, int, int, fd, off)
int munmap(ptr, size)
int mprotect(ptr, size, int)
int pthread_create(ptr, ptr, ptr, ptr)
int pthread_join(ulong, ptr)
int pthread_mutex_lock(ptr)
int pthread_mutex_unlock(ptr)
void qsort(ptr, size, size, ptr)
int rand()
void srand(uint)
int system(string)
int isatty(fd)
`

// prototypes is the table, parsed once.
var prototypes = sync.OnceValue(func() map[string]symbols.Signature {
	table := map[string]symbols.Signature{}
	for _, line := range strings.Split(prototypeTable, "\n") {
		if line = strings.TrimSpace(line); line == "" {
			continue
		}
		name, sig, err := parsePrototype(line)
		if err != nil {
			panic(fmt.Sprintf("prototype table: %q: %v", line, err)) // a bad table is ours, found by the tests
		}
		table[name] = sig
	}
	return table
})

func parsePrototype(line string) (string, symbols.Signature, error) {
	var sig symbols.Signature
	head, args, ok := strings.Cut(strings.TrimSuffix(line, ")"), "(")
	res, name, ok2 := strings.Cut(head, " ")
	if !ok || !ok2 || !strings.HasSuffix(line, ")") {
		return "", sig, fmt.Errorf("want RESULT NAME(TYPE, ...)")
	}
	var err error
	if sig.Result, err = prototypeType(res); err != nil {
		return "", sig, err
	}
	for _, a := range strings.Split(args, ",") {
		switch a = strings.TrimSpace(a); a {
		case "":
		case "...":
			sig.Variadic = true
		default:
			v, err := prototypeType(a)
			if err != nil {
				return "", sig, err
			}
			sig.Params = append(sig.Params, v)
		}
	}
	return name, sig, nil
}

// prototypeType is a table type as the calling convention sees it.
func prototypeType(t string) (symbols.ABIValue, error) {
	i := func(size int, signed bool) symbols.ABIValue {
		return symbols.ABIValue{Class: symbols.ClassInt, Size: size, Signed: signed}
	}
	switch t {
	case "void":
		return symbols.ABIValue{Class: symbols.ClassVoid}, nil
	case "int", "fd", "pid":
		return i(4, true), nil
	case "uint":
		return i(4, false), nil
	case "long", "ssize", "off":
		return i(8, true), nil
	case "ulong", "size":
		return i(8, false), nil
	case "char":
		v := i(1, true)
		v.Char = true
		return v, nil
	case "bool":
		v := i(1, false)
		v.Bool = true
		return v, nil
	case "string":
		return symbols.ABIValue{Class: symbols.ClassPointer, Size: 8, String: true}, nil
	case "ptr":
		return symbols.ABIValue{Class: symbols.ClassPointer, Size: 8}, nil
	case "oflags", "mode":
		v := i(4, false)
		v.Format = t // shown by decoders
		return v, nil
	}
	return symbols.ABIValue{}, fmt.Errorf("unknown type %q", t)
}

// decoders turn a value of a table type into its text.
var decoders = map[string]func(Value) Value{
	"oflags": func(v Value) Value { return DwarfValue(openFlags(v.Uint())) },
	"mode":   func(v Value) Value { return DwarfValue(fmt.Sprintf("%#o", v.Uint())) },
}

// openFlags spells open's flags as strace does: the access mode, then
// the other flags by name, what is left in hex.
func openFlags(f uint64) string {
	parts := []string{[...]string{"O_RDONLY", "O_WRONLY", "O_RDWR", "O_ACCMODE"}[f&unix.O_ACCMODE]}
	f &^= unix.O_ACCMODE
	for _, b := range []struct {
		bit  uint64
		name string
	}{
		{unix.O_CREAT, "O_CREAT"}, {unix.O_EXCL, "O_EXCL"}, {unix.O_NOCTTY, "O_NOCTTY"}, {unix.O_TRUNC, "O_TRUNC"},
		{unix.O_APPEND, "O_APPEND"}, {unix.O_NONBLOCK, "O_NONBLOCK"}, {unix.O_DSYNC, "O_DSYNC"},
		{unix.O_DIRECTORY, "O_DIRECTORY"}, {unix.O_NOFOLLOW, "O_NOFOLLOW"}, {unix.O_CLOEXEC, "O_CLOEXEC"},
		{unix.O_DIRECT, "O_DIRECT"}, {unix.O_LARGEFILE, "O_LARGEFILE"}, {unix.O_NOATIME, "O_NOATIME"},
		{unix.O_PATH, "O_PATH"}, {unix.O_TMPFILE &^ unix.O_DIRECTORY, "O_TMPFILE"},
	} {
		if f&b.bit == b.bit && b.bit != 0 {
			parts = append(parts, b.name)
			f &^= b.bit
		}
	}
	if f != 0 {
		parts = append(parts, fmt.Sprintf("%#x", f))
	}
	return strings.Join(parts, "|")
}
