/* libsdtlib.so: a library with a static probe, dlopened by sdt lib N. */
#include <sys/sdt.h>

long libstep(long i)
{
	DTRACE_PROBE1(demolib, hit, i);
	return i * 2;
}
