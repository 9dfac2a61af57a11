#!/usr/bin/env bash
# Per-hit cost of probe against the ptrace floor, measured in the same run.
#   bench/run.sh [HITS [RUNS]]
# Builds bench/work.c (the tracee) and bench/floor.c (the floor tracer:
# trap + wait4 + PTRACE_CONT, nothing else), times each variant RUNS times
# and prints medians in microseconds per hit and as ratios to the floor.
# Peers (ltrace, gdb dprintf, uftrace, perf with kernel uprobes) are
# timed too when installed.
set -euo pipefail
cd "$(dirname "$0")/.."
hits=${1:-20000}
runs=${2:-5}
out=bin/bench
mkdir -p "$out"
make -s build
gcc -O2 -o "$out/floor" bench/floor.c
gcc -O0 -g -pthread -o "$out/work" bench/work.c
if command -v uftrace >/dev/null; then
	gcc -O0 -g -pg -pthread -o "$out/work-pg" bench/work.c
fi
probe=bin/probe
work=$out/work

# elapsed CMD...: wall time of one run in nanoseconds.
elapsed() {
	local t0 t1
	t0=$(date +%s%N)
	"$@" >/dev/null 2>&1 || { echo "bench: failed: $*" >&2; exit 1; }
	t1=$(date +%s%N)
	echo $((t1 - t0))
}

# median NAME CMD...: median wall time of RUNS runs.
median() {
	local xs=()
	for ((i = 0; i < runs; i++)); do xs+=("$(elapsed "$@")"); done
	printf '%s\n' "${xs[@]}" | sort -n | sed -n "$(((runs + 1) / 2))p"
}

base=$(median "$work" "$hits" 1)
base4=$(median "$work" $((hits / 4)) 4)
floor_same=$(median taskset -c 0 "$out/floor" "$work" "$hits" 1 floor)
floor_any=$(median "$out/floor" "$work" "$hits" 1 floor)
floor=$((floor_same < floor_any ? floor_same : floor_any))
floor_ns=$(((floor - base) / hits))

printf '# bench: %s, %s, %s CPUs, %d hits per run, median of %d runs\n' \
	"$(date +%F)" "$(uname -srm)" "$(nproc)" "$hits" "$runs"
printf '%-44s %9s %9s\n' variant "us/hit" "x floor"
row() { # row NAME NS_TOTAL BASE_NS
	local per=$((($2 - $3) / hits))
	awk -v n="$1" -v p="$per" -v f="$floor_ns" 'BEGIN { printf "%-44s %9.1f %9.2f\n", n, p / 1000, p / f }'
}
row "floor, tracer on the tracee's CPU" "$floor_same" "$base"
row "floor, tracer on any CPU" "$floor_any" "$base"
entry=$(median "$probe" run -o /dev/null 'p:leaf a=%di b=%si' -- "$work" "$hits" 1)
row "  C floor + GETREGS, same CPU" "$(median taskset -c 0 "$out/floor" -g "$work" "$hits" 1 floor)" "$base"
row "  C floor + GETREGS + SETREGS, same CPU" "$(median taskset -c 0 "$out/floor" -r "$work" "$hits" 1 floor)" "$base"
row "probe p:leaf a=%di b=%si" "$entry" "$base"
row "  --no-optimize (int3, boosted copy)" "$(median "$probe" run --no-optimize -o /dev/null 'p:leaf a=%di b=%si' -- "$work" "$hits" 1)" "$base"
row "  --no-boost (push %rbp emulated)" "$(median "$probe" run --no-boost -o /dev/null 'p:leaf a=%di b=%si' -- "$work" "$hits" 1)" "$base"
row "  --no-placement" "$(median "$probe" run --no-placement -o /dev/null 'p:leaf a=%di b=%si' -- "$work" "$hits" 1)" "$base"
row "probe r:leaf \$retval (per call)" "$(median "$probe" run -o /dev/null 'r:leaf $retval' -- "$work" "$hits" 1)" "$base"
row "probe --tracer function_graph (per call)" "$(median "$probe" run -o /dev/null --tracer function_graph --filter leaf -- "$work" "$hits" 1)" "$base"
row "floor, 4 threads (per hit)" "$(median "$out/floor" "$work" $((hits / 4)) 4 floor)" "$base4"
four=$(median "$probe" run -o /dev/null 'p:leaf a=%di b=%si' -- "$work" $((hits / 4)) 4)
row "probe p:leaf, 4 threads (per hit)" "$four" "$base4"
awk -v a="$(((four - base4) / hits))" -v b="$(((entry - base) / hits))" \
	'BEGIN { printf "%-44s %19.2f\n", "  4 threads per hit / 1 thread per hit", a / b }'
if command -v ltrace >/dev/null; then
	row "ltrace -x leaf" "$(median ltrace -o /dev/null -x leaf "$work" "$hits" 1)" "$base"
fi
if command -v gdb >/dev/null; then
	row "gdb dprintf leaf" "$(median gdb -q -batch -ex 'dprintf leaf,"%ld\n",a' -ex run --args "$work" "$hits" 1)" "$base"
fi
if command -v uftrace >/dev/null; then
	row "uftrace (recompiled -pg, not attached)" "$(median uftrace record -d "$out/uftrace.data" "$out/work-pg" "$hits" 1)" "$base"
fi
# Kernel uprobes, recorded by perf: the in-kernel reference (root only).
if command -v perf >/dev/null && perf probe -q -x "$work" leaf 2>/dev/null; then
	trap 'perf probe -q -d "probe_work:*" 2>/dev/null' EXIT
	perf probe -q -x "$work" 'leaf%return' 2>/dev/null || true
	row "perf record, kernel uprobe on leaf" "$(median perf record -q -e probe_work:leaf -o "$out/perf.data" -- "$work" "$hits" 1)" "$base"
	row "perf record, kernel uretprobe on leaf" "$(median perf record -q -e probe_work:leaf__return -o "$out/perf.data" -- "$work" "$hits" 1)" "$base"
fi
