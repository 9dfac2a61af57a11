/* A tracee nearly always inside calls: inner sleeps 50 ms, outer calls it
 * twice; main calls outer until SIGTERM (TestOutputPerfettoUnfinished). */
#include <unistd.h>

__attribute__((noinline)) void inner(void) { usleep(50000); }

__attribute__((noinline)) void outer(void)
{
	inner();
	inner();
}

int main(void)
{
	for (;;)
		outer();
}
