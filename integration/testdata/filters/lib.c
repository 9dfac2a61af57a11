/* libzfn.so: functions only a library has, for --filter without MOD:. */
__attribute__((noinline)) int zfn_add(int a, int b) { return a + b; }
__attribute__((noinline)) int zfn_twice(int a) { return zfn_add(a, a); }
