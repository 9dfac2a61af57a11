// Replacements for patchsrv's compute(): one called as it is, one not.
long compute_bad(int x, int y) { return x + y; }

int compute_v2(int x) { return x * 3; }
