// A library the host loads with dlopen after probe has attached.
__attribute__((noinline)) int init(int x) { return 2 * x + 1; }

int version(void) { return 7; }
