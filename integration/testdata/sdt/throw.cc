// throw: throws and catches N exceptions; libstdc++'s static probes
// libstdcxx:throw and libstdcxx:catch fire once each per exception.
#include <cstdio>
#include <cstdlib>
#include <stdexcept>

__attribute__((noinline)) static void thrower(int i)
{
	if (i >= 0)
		throw std::runtime_error("boom");
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 3, caught = 0;
	for (int i = 0; i < n; i++) {
		try {
			thrower(i);
		} catch (const std::exception &) {
			caught++;
		}
	}
	printf("caught=%d\n", caught);
	return 0;
}
