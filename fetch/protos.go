package fetch

import (
	"fmt"
	"slices"
	"strings"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/probedbg/probe/symbols"
)

// Prototypes of common C library functions, for --args (and --calls)
// where the library has no DWARF, as ltrace's prototype files give them
// (/etc/ltrace.conf). One a line: RESULT NAME(TYPE PARAM, ...), the
// parameters named as the manual pages name them (a filter of an o:
// probe picks calls by them); "..." ends a variadic list, whose extra
// arguments are not shown (fcntl's and ioctl's third, which the command
// decides; sscanf's pointers). Types: the C
// integer types by name, char (a character), bool, string (a char *
// shown as its text), ptr (any other pointer), outbuf and outstr (a
// buffer the call fills, shown at its return: as many bytes as the
// result, or a string), outfds (the two descriptors pipe fills, shown at
// its return as [3, 4]), strarray (a NULL-terminated array of strings,
// exec's argv: ["ls", "-l"], at most FuncTraceOptions.ArrayLen of
// them), oflags (open's flags,
// shown as O_... names), fd, pid, size, ssize, off, mode (octal), hex (a
// word in hex: ioctl's request), signal
// (its name, SIGALRM), void,
// format (a printf format: the "..." arguments after it are shown as it
// says).
// A result type ending in "!" says that the function's failure result
// sets errno: -1 for an integer (open), NULL or all ones for a pointer
// (malloc, mmap's MAP_FAILED). Other results are never failures: strcmp's
// -1 is an order, getchar's EOF the end of its input, and a function the
// table does not have (typed from DWARF) has no contract we know.
const prototypeTable = `
ptr! malloc(size size)
ptr! calloc(size nmemb, size size)
ptr! realloc(ptr ptr, size size)
void free(ptr ptr)
ptr! aligned_alloc(size alignment, size size)
int posix_memalign(ptr memptr, size alignment, size size)
size strlen(string s)
size strnlen(string s, size maxlen)
int strcmp(string s1, string s2)
int strncmp(string s1, string s2, size n)
int strcasecmp(string s1, string s2)
ptr strcpy(ptr dst, string src)
ptr strncpy(ptr dst, string src, size n)
ptr strcat(ptr dst, string src)
string! strdup(string s)
string! strndup(string s, size n)
ptr strchr(string s, char c)
ptr strrchr(string s, char c)
ptr strstr(string haystack, string needle)
ptr memcpy(ptr dest, ptr src, size n)
ptr memmove(ptr dest, ptr src, size n)
ptr memset(ptr s, char c, size n)
int memcmp(ptr s1, ptr s2, size n)
ptr memchr(ptr s, char c, size n)
int! puts(string s)
int! putchar(char c)
int! printf(format format, ...)
int! fprintf(ptr stream, format format, ...)
int! sprintf(ptr str, format format, ...)
int! snprintf(ptr str, size size, format format, ...)
int! __printf_chk(int flag, format format, ...)
int! __fprintf_chk(ptr stream, int flag, format format, ...)
int! __sprintf_chk(ptr str, int flag, size slen, format format, ...)
int! __snprintf_chk(ptr str, size maxlen, int flag, size slen, format format, ...)
int! fputs(string s, ptr stream)
ptr fgets(outstr s, int size, ptr stream)
ptr! fopen(string pathname, string mode)
ptr! fdopen(fd fd, string mode)
int! fclose(ptr stream)
int! fflush(ptr stream)
size fread(ptr ptr, size size, size nmemb, ptr stream)
size fwrite(ptr ptr, size size, size nmemb, ptr stream)
fd! open(string pathname, oflags flags, mode mode)
fd! openat(fd dirfd, string pathname, oflags flags, mode mode)
fd! open64(string pathname, oflags flags, mode mode)
fd! openat(fd dirfd, string pathname, oflags flags, mode mode)
fd! creat(string pathname, mode mode)
int! close(fd fd)
ssize! read(fd fd, outbuf buf, size count)
ssize! write(fd fd, ptr buf, size count)
ssize! pread(fd fd, outbuf buf, size count, off offset)
ssize! pwrite(fd fd, ptr buf, size count, off offset)
off! lseek(fd fd, off offset, int whence)
int! dup(fd oldfd)
int! dup2(fd oldfd, fd newfd)
int! pipe(outfds pipefd)
int! unlink(string pathname)
int! rename(string oldpath, string newpath)
int! mkdir(string pathname, mode mode)
int! rmdir(string pathname)
int! access(string pathname, int mode)
int! chdir(string path)
string! getcwd(ptr buf, size size)
string getenv(string name)
int! setenv(string name, string value, int overwrite)
int! unsetenv(string name)
int atoi(string nptr)
long atol(string nptr)
long strtol(string nptr, ptr endptr, int base)
ulong strtoul(string nptr, ptr endptr, int base)
void exit(int status)
void _exit(int status)
uint sleep(uint seconds)
int! usleep(uint usec)
int! nanosleep(ptr req, ptr rem)
long! time(ptr tloc)
int! gettimeofday(ptr tv, ptr tz)
int! clock_gettime(int clockid, ptr tp)
pid getpid()
pid getppid()
pid gettid()
uint getuid()
uint geteuid()
uint getgid()
uint getegid()
mode umask(mode mask)
pid! fork()
int! execve(string pathname, strarray argv, strarray envp)
int! execvp(string file, strarray argv)
int! execv(string path, strarray argv)
int! execvpe(string file, strarray argv, strarray envp)
int posix_spawn(ptr pid, string path, ptr file_actions, ptr attrp, strarray argv, strarray envp)
int posix_spawnp(ptr pid, string file, ptr file_actions, ptr attrp, strarray argv, strarray envp)
pid! waitpid(pid pid, ptr wstatus, int options)
int! kill(pid pid, signal sig)
int raise(signal sig)
int! socket(int domain, int type, int protocol)
int! connect(fd sockfd, ptr addr, uint addrlen)
int! bind(fd sockfd, ptr addr, uint addrlen)
int! listen(fd sockfd, int backlog)
int! accept(fd sockfd, ptr addr, ptr addrlen)
ssize! send(fd sockfd, ptr buf, size len, int flags)
ssize! recv(fd sockfd, outbuf buf, size len, int flags)
int! poll(ptr fds, ulong nfds, int timeout)
ptr! mmap(ptr addr, size length, int prot, int flags, fd fd, off offset)
int! munmap(ptr addr, size length)
int! mprotect(ptr addr, size len, int prot)
int pthread_create(ptr thread, ptr attr, ptr start_routine, ptr arg)
int pthread_join(ulong thread, ptr retval)
int pthread_mutex_lock(ptr mutex)
int pthread_mutex_unlock(ptr mutex)
void qsort(ptr base, size nmemb, size size, ptr compar)
int rand()
void srand(uint seed)
int! system(string command)
int isatty(fd fd)
int! fcntl(fd fd, int cmd, ...)
int! ioctl(fd fd, ulong request, ...)
int! stat(string pathname, ptr statbuf)
int! lstat(string pathname, ptr statbuf)
int! fstat(fd fd, ptr statbuf)
int! fstatat(fd dirfd, string pathname, ptr statbuf, int flags)
int! pipe2(outfds pipefd, oflags flags)
int! socketpair(int domain, int type, int protocol, outfds sv)
ssize! readv(fd fd, ptr iov, int iovcnt)
ssize! writev(fd fd, ptr iov, int iovcnt)
int! ftruncate(fd fd, off length)
int! fsync(fd fd)
int! chmod(string pathname, mode mode)
int! fchmod(fd fd, mode mode)
ptr! opendir(string name)
ptr readdir(ptr dirp)
int closedir(ptr dirp)
ptr dlopen(string filename, int flags)
ptr dlsym(ptr handle, string symbol)
int dlclose(ptr handle)
ssize! sendto(fd sockfd, ptr buf, size len, int flags, ptr dest_addr, uint addrlen)
ssize! recvfrom(fd sockfd, outbuf buf, size len, int flags, ptr src_addr, ptr addrlen)
ssize! sendmsg(fd sockfd, ptr msg, int flags)
ssize! recvmsg(fd sockfd, ptr msg, int flags)
int! shutdown(fd sockfd, int how)
int! setsockopt(fd sockfd, int level, int optname, ptr optval, uint optlen)
int! getsockopt(fd sockfd, int level, int optname, ptr optval, ptr optlen)
int! select(int nfds, ptr readfds, ptr writefds, ptr exceptfds, ptr timeout)
fd! epoll_create1(int flags)
int! epoll_ctl(fd epfd, int op, fd fd, ptr event)
int! epoll_wait(fd epfd, ptr events, int maxevents, int timeout)
int pthread_mutex_trylock(ptr mutex)
int pthread_cond_wait(ptr cond, ptr mutex)
int pthread_cond_signal(ptr cond)
int pthread_cond_broadcast(ptr cond)
int! sigaction(signal signum, ptr act, ptr oldact)
ptr signal(signal signum, ptr handler)
string strerror(int errnum)
int! fputc(int c, ptr stream)
int fgetc(ptr stream)
int getchar()
int sscanf(string str, string format, ...)
int abs(int j)
int __libc_start_main(ptr main, int argc, ptr argv, ptr init, ptr fini, ptr rtld_fini, ptr stack_end)
int __cxa_atexit(ptr func, ptr arg, ptr dso_handle)
void __cxa_finalize(ptr d)
void __stack_chk_fail()
void abort()
ptr __errno_location()
ptr __ctype_b_loc()
size __ctype_get_mb_cur_max()
size __fpending(ptr stream)
int __freading(ptr stream)
fd! fileno(ptr stream)
int fputc_unlocked(int c, ptr stream)
int fputs_unlocked(string s, ptr stream)
int! fseeko(ptr stream, off offset, int whence)
ptr! reallocarray(ptr ptr, size nmemb, size size)
string setlocale(int category, string locale)
string nl_langinfo(int item)
string bindtextdomain(string domainname, string dirname)
string textdomain(string domainname)
string dcgettext(string domainname, string msgid, int category)
void error(int status, int errnum, format format, ...)
int iswprint(uint wc)
size mbrtowc(ptr pwc, ptr s, size n, ptr ps)
int mbsinit(ptr ps)
ptr __ctype_tolower_loc()
int __isoc99_sscanf(string str, string format, ...)
ptr! fopen64(string pathname, string mode)
int! fseek(ptr stream, long offset, int whence)
long! ftell(ptr stream)
void rewind(ptr stream)
int setvbuf(ptr stream, ptr buf, int mode, size size)
int! putc(int c, ptr stream)
ptr! popen(string command, string type)
int! pclose(ptr stream)
ptr getpwuid(uint uid)
int! getrusage(int who, ptr usage)
int! stat64(string pathname, ptr statbuf)
int! lstat64(string pathname, ptr statbuf)
ptr readdir64(ptr dirp)
ssize! readlink(string pathname, ptr buf, size bufsiz)
int! symlink(string target, string linkpath)
int! utimes(string filename, ptr times)
string dirname(string path)
int ferror(ptr stream)
void perror(string s)
`

// syscallTable is the system calls -S shows that the C library has no
// function of the same name and arguments for (the kernel's order: its
// ioctl and fcntl take one word more, not "..."), in the table's types.
const syscallTable = `
int newfstatat(fd dirfd, string pathname, ptr statbuf, int flags)
int statx(fd dirfd, string pathname, int flags, uint mask, ptr statxbuf)
long getdents64(fd fd, ptr dirp, size count)
int ioctl(fd fd, hex request, hex arg)
int fcntl(fd fd, int cmd, ulong arg)
long futex(ptr uaddr, int futex_op, int val, ptr timeout, ptr uaddr2, int val3)
void exit_group(int status)
void exit(int status)
ptr brk(ptr addr)
int arch_prctl(int code, ulong addr)
pid set_tid_address(ptr tidptr)
long set_robust_list(ptr head, size len)
int rseq(ptr rseq, uint rseq_len, int flags, uint sig)
int prlimit64(pid pid, int resource, ptr new_limit, ptr old_limit)
ssize getrandom(outbuf buf, size buflen, uint flags)
long clone3(ptr cl_args, size size)
long clone(ulong flags, ptr stack, ptr parent_tid, ptr child_tid, ulong tls)
int rt_sigaction(signal signum, ptr act, ptr oldact, size sigsetsize)
int rt_sigprocmask(int how, ptr set, ptr oldset, size sigsetsize)
long rt_sigreturn()
ssize pread64(fd fd, outbuf buf, size count, off offset)
ssize pwrite64(fd fd, ptr buf, size count, off offset)
int clock_nanosleep(int clockid, int flags, ptr request, ptr remain)
pid wait4(pid pid, ptr wstatus, int options, ptr rusage)
int epoll_wait(fd epfd, ptr events, int maxevents, int timeout)
int epoll_pwait(fd epfd, ptr events, int maxevents, int timeout, ptr sigmask, size sigsetsize)
int ppoll(ptr fds, uint nfds, ptr tmo_p, ptr sigmask, size sigsetsize)
int sched_getaffinity(pid pid, size cpusetsize, ptr mask)
pid gettid()
int tgkill(pid tgid, pid tid, signal sig)
`

// SyscallPrototype is the signature -S shows system call name with: the
// system calls' own table, else the C library's function of that name
// where it takes what the kernel does (not a variadic one).
func SyscallPrototype(name string) (symbols.Signature, bool) {
	if sig, ok := syscallPrototypes()[name]; ok {
		sig.Params = slices.Clone(sig.Params)
		return sig, true
	}
	sig, ok := Prototype(name)
	return sig, ok && !sig.Variadic
}

// syscallPrototypes is syscallTable, parsed once.
var syscallPrototypes = sync.OnceValue(func() map[string]symbols.Signature { return parseTable(syscallTable, nil) })

// errnoFailures are the functions of the table whose failure result sets
// errno (filled with the table).
var errnoFailures = map[string]bool{}

// prototypes is the table, parsed once.
var prototypes = sync.OnceValue(func() map[string]symbols.Signature { return parseTable(prototypeTable, errnoFailures) })

// parseTable parses a table of prototypes; errno, if not nil, gets the
// functions whose failure sets errno (their "!").
func parseTable(text string, errno map[string]bool) map[string]symbols.Signature {
	table := map[string]symbols.Signature{}
	for _, line := range strings.Split(text, "\n") {
		if line = strings.TrimSpace(line); line == "" {
			continue
		}
		name, sig, err := parsePrototype(line)
		if err != nil {
			panic(fmt.Sprintf("prototype table: %q: %v", line, err)) // a bad table is ours, found by the tests
		}
		table[name] = sig
		if errno != nil && strings.Contains(line[:strings.IndexByte(line, '(')], "! ") {
			errno[name] = true
		}
	}
	return table
}

func parsePrototype(line string) (string, symbols.Signature, error) {
	var sig symbols.Signature
	head, args, ok := strings.Cut(strings.TrimSuffix(line, ")"), "(")
	res, name, ok2 := strings.Cut(head, " ")
	if !ok || !ok2 || !strings.HasSuffix(line, ")") {
		return "", sig, fmt.Errorf("want RESULT NAME(TYPE PARAM, ...)")
	}
	var err error
	if sig.Result, err = prototypeType(strings.TrimSuffix(res, "!")); err != nil {
		return "", sig, err
	}
	for _, a := range strings.Split(args, ",") {
		switch a = strings.TrimSpace(a); a {
		case "":
		case "...":
			sig.Variadic = true
		default:
			typ, param, _ := strings.Cut(a, " ")
			v, err := prototypeType(typ)
			if err != nil {
				return "", sig, err
			}
			v.Name = param
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
	case "format":
		// A printf format: a string, and what it says of the "..."
		// arguments after it (probe/varargs.go).
		return symbols.ABIValue{Class: symbols.ClassPointer, Size: 8, String: true, Format: "format"}, nil
	case "ptr":
		return symbols.ABIValue{Class: symbols.ClassPointer, Size: 8}, nil
	case "outbuf", "outstr", "outfds", "strarray":
		// A buffer the call fills: shown at the return, as ltrace
		// shows read's, with as many bytes as the result says (outbuf),
		// as a string (outstr) or as two descriptors (outfds); a
		// pointer at the entry. An array of strings (strarray): read
		// at the entry.
		return symbols.ABIValue{Class: symbols.ClassPointer, Size: 8, Format: t}, nil
	case "oflags", "mode":
		v := i(4, false)
		v.Format = t // shown by decoders
		return v, nil
	case "signal":
		v := i(4, true)
		v.Format = t
		return v, nil
	case "hex":
		v := i(8, false)
		v.Format = t
		return v, nil
	}
	return symbols.ABIValue{}, fmt.Errorf("unknown type %q", t)
}

// HasPrototype reports whether the table has name.
func HasPrototype(name string) bool {
	_, ok := prototypes()[name]
	return ok
}

// Prototype is name's signature in the table of prototypes; an IFUNC's
// implementation has its function's (__strlen_avx2: strlen).
func Prototype(name string) (symbols.Signature, bool) {
	proto, ok := prototypes()[prototypeKey(name)]
	// A copy: the caller names its parameters.
	proto.Params = slices.Clone(proto.Params)
	return proto, ok
}

// prototypeKey is the name name's prototype is under in the table.
func prototypeKey(name string) string {
	if _, ok := prototypes()[name]; !ok && strings.HasPrefix(name, "__") {
		base, _, _ := strings.Cut(strings.TrimLeft(name, "_"), "_")
		return base
	}
	return name
}

// FailsWithErrno reports whether the table says name's failure result
// sets errno.
func FailsWithErrno(name string) bool {
	key := prototypeKey(name) // (after the table is read)
	return errnoFailures[key]
}

// Decode is v, of table type format, as its decoder shows it (open's
// flags by name, a mode in octal, a signal by name); v where format has
// no decoder.
func Decode(format string, v Value) Value {
	if decode := decoders[format]; decode != nil {
		return decode(v)
	}
	return v
}

// decoders turn a value of a table type into its text.
var decoders = map[string]func(Value) Value{
	"oflags": func(v Value) Value { return DwarfValue(openFlags(v.Uint())) },
	"mode":   func(v Value) Value { return DwarfValue(fmt.Sprintf("%#o", v.Uint())) },
	"hex":    func(v Value) Value { return DwarfValue(fmt.Sprintf("%#x", v.Uint())) },
	"signal": func(v Value) Value {
		if name := unix.SignalName(unix.Signal(v.Int())); name != "" {
			return DwarfValue(name)
		}
		return v // (0, a real-time signal: the number)
	},
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
