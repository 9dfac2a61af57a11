#!/usr/bin/env bash
# Per-hit cost of probe against the ptrace floor, measured in the same run.
#   bench/run.sh [HITS [RUNS]]
# PROBE=BINARY times that build of probe instead of this tree's (bin/probe,
# built here), and PEERS=0 leaves out the peers and the attached process:
# bench/compare.sh uses both.
# Builds bench/work.c (the tracee) and bench/floor.c (the floor tracer:
# trap + wait4 + PTRACE_CONT, nothing else), times each variant RUNS times
# and prints medians in microseconds per hit and as ratios to the floor.
# A hit's cost is the difference between a run of HITS hits and one of a
# single hit, divided by HITS: what a run costs once (starting the
# program, loading symbols, installing and removing probes) is shown
# apart, in the "once" column, not spread over the hits.
# Peers (ltrace, gdb dprintf, uftrace, perf with kernel uprobes) are
# timed too when installed.
set -euo pipefail
cd "$(dirname "$0")/.."
hits=${1:-20000}
runs=${2:-5}
out=bin/bench
mkdir -p "$out"
[ -n "${PROBE:-}" ] || make -s build
gcc -O2 -o "$out/floor" bench/floor.c
gcc -O0 -g -pthread -o "$out/work" bench/work.c
if command -v uftrace >/dev/null; then
	gcc -O0 -g -pg -pthread -o "$out/work-pg" bench/work.c
fi
probe=${PROBE:-bin/probe}
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

# cost NAME THREADS CMD...: a row. CMD's @N@ is the calls per thread.
cost() {
	local name=$1 threads=$2
	shift 2
	local many=() one=() x
	for x in "$@"; do
		many+=("${x//@N@/$((hits / threads))}")
		one+=("${x//@N@/1}")
	done
	local tn t1
	tn=$(median "${many[@]}")
	t1=$(median "${one[@]}")
	awk -v n="$name" -v tn="$tn" -v t1="$t1" -v h="$((hits - threads))" -v f="${floor_ns:-0}" -v b="$base1" '
		BEGIN {
			p = (tn - t1) / h
			if (f == 0) f = p
			printf "%-44s %9.1f %9.2f %9.0f\n", n, p / 1000, p / f, (t1 - b) / 1e6
		}'
}
# loop_ns FIELD CMD...: the median over RUNS runs of what work prints as
# FIELD: loop_ns, the tracee's own time (for probes that never stop
# it), or cpu_ns, the CPU time its threads spent in their loops.
loop_ns() {
	local field=$1 xs=() i
	shift
	for ((i = 0; i < runs; i++)); do
		xs+=("$(BENCH_LOOP_NS=1 "$@" 2>&1 >/dev/null | tr ' ' '\n' | sed -n "s/^$field=//p" | tail -1)")
	done
	printf '%s\n' "${xs[@]}" | sort -n | sed -n "$(((runs + 1) / 2))p"
}

# inproc NAME THREADS HITS CMD...: a row of what a hit costs the thread
# that makes it: the tracee's loop time traced minus untraced, over the
# hits of one thread (HITS split over THREADS, which run at once).
inproc() {
	local name=$1 threads=$2 n=$3
	shift 3
	local args=() x
	for x in "$@"; do args+=("${x//@N@/$((n / threads))}"); done
	local traced plain
	traced=$(loop_ns loop_ns "${args[@]}")
	plain=$(loop_ns loop_ns "$work" $((n / threads)) "$threads")
	awk -v n="$name" -v a="$traced" -v b="$plain" -v h="$((n / threads))" -v f="$floor_ns" '
		BEGIN { p = (a - b) / h; printf "%-44s %9.3f %9.4f %9s\n", n, p / 1000, p / f, "-" }'
}

# inproc_cpu NAME THREADS HITS CMD...: a row of what a hit adds to the
# CPU time of the threads (HITS split over THREADS), whoever else ran on
# the CPUs meanwhile: the CPU time of HITS hits minus that of HITS/10,
# traced minus untraced, over 9/10 of HITS. What a thread pays once (its
# ring found and claimed, its tally table's first pages) falls out.
inproc_cpu() {
	local name=$1 threads=$2 n=$3
	shift 3
	local many=() few=() x per=$((n / threads))
	for x in "$@"; do
		many+=("${x//@N@/$per}")
		few+=("${x//@N@/$((per / 10))}")
	done
	local a b c d
	a=$(loop_ns cpu_ns "${many[@]}")
	b=$(loop_ns cpu_ns "${few[@]}")
	c=$(loop_ns cpu_ns "$work" "$per" "$threads")
	d=$(loop_ns cpu_ns "$work" $((per / 10)) "$threads")
	awk -v n="$name" -v a="$a" -v b="$b" -v c="$c" -v d="$d" -v h="$((per * threads - per / 10 * threads))" -v f="$floor_ns" '
		BEGIN { p = ((a - b) - (c - d)) / h; printf "%-44s %9.3f %9.4f %9s\n", n, p / 1000, p / f, "-" }'
}

# per_hit ROW: the us/hit column of a row, in ns.
per_hit() { awk '{ print $(NF - 2) * 1000 }' <<<"$1"; }

base1=$(median "$work" 1 1)
printf '# bench: %s, %s, %s CPUs, %d hits per run, median of %d runs\n' \
	"$(date +%F)" "$(uname -srm)" "$(nproc)" "$hits" "$runs"
printf '%-44s %9s %9s %9s\n' variant "us/hit" "x floor" "once ms"
same=$(cost "floor, tracer on the tracee's CPU" 1 taskset -c 0 "$out/floor" "$work" @N@ 1 floor)
floor_ns=$(per_hit "$same")
echo "$same"
cost "floor, tracer on any CPU" 1 "$out/floor" "$work" @N@ 1 floor
cost "  C floor + GETREGS, same CPU" 1 taskset -c 0 "$out/floor" -g "$work" @N@ 1 floor
cost "  C floor + GETREGS + SETREGS, same CPU" 1 taskset -c 0 "$out/floor" -r "$work" @N@ 1 floor
ihits=$((hits * 10))
inproc "probe p:leaf a=%di b=%si, in-process (10x)" 1 "$ihits" "$probe" run -o /dev/null 'p:leaf a=%di b=%si' -- "$work" @N@ 1
inproc "  => count:a (a record a hit, no line, 10x)" 1 "$ihits" "$probe" run -o /dev/null 'p:leaf a=%di b=%si => count:a' -- "$work" @N@ 1
# count and hist of registers are counted in the tracee: no record.
inproc "  => count (counted in the tracee, 10x)" 1 "$ihits" "$probe" run -o /dev/null 'p:leaf a=%di b=%si => count' -- "$work" @N@ 1
inproc "  => hist:b (counted in the tracee, 10x)" 1 "$ihits" "$probe" run -o /dev/null 'p:leaf a=%di b=%si => hist:b' -- "$work" @N@ 1
# Threads: what the threads' own CPU time grows by a hit, so that the
# drain and the other threads sharing the CPUs with them (2 on the VMs
# this runs on) are not counted as theirs. What a shared cache line
# written on the hot path would cost shows there. The rings hold every
# record (64 MiB each).
ratio() { # NAME ROW1 ROW2: ROW2's us/hit over ROW1's
	awk -v n="$1" -v a="$(per_hit "$3")" -v b="$(per_hit "$2")" 'BEGIN { printf "%-44s %19.2f\n", n, a / b }'
}
for act in count:a count; do
	one=$(inproc_cpu "  => $act, 1 thread, CPU time (50x)" 1 $((hits * 50)) "$probe" run --ring-size 65536 -o /dev/null "p:leaf a=%di b=%si => $act" -- "$work" @N@ 1)
	four=$(inproc_cpu "  => $act, 4 threads, CPU time (50x)" 4 $((hits * 50)) "$probe" run --ring-size 65536 -o /dev/null "p:leaf a=%di b=%si => $act" -- "$work" @N@ 4)
	printf '%s\n%s\n' "$one" "$four"
	ratio "  4 threads / 1 thread (per hit, CPU time)" "$one" "$four"
done
entry=$(cost "probe p:leaf a=%di b=%si --no-inprocess" 1 "$probe" run --no-inprocess -o /dev/null 'p:leaf a=%di b=%si' -- "$work" @N@ 1)
echo "$entry"
cost "  --no-mailbox (registers by PTRACE_GETREGS)" 1 "$probe" run --no-inprocess --no-mailbox -o /dev/null 'p:leaf a=%di b=%si' -- "$work" @N@ 1
cost "  --no-optimize (int3, boosted copy)" 1 "$probe" run --no-optimize -o /dev/null 'p:leaf a=%di b=%si' -- "$work" @N@ 1
cost "  --no-boost (push %rbp emulated)" 1 "$probe" run --no-boost -o /dev/null 'p:leaf a=%di b=%si' -- "$work" @N@ 1
cost "  --no-placement" 1 "$probe" run --no-inprocess --no-placement -o /dev/null 'p:leaf a=%di b=%si' -- "$work" @N@ 1
# Returns hooked in the tracee: rings large enough for every record.
inproc "probe r:leaf \$retval, in-process (10x)" 1 "$ihits" "$probe" run --ring-size 65536 -o /dev/null 'r:leaf $retval' -- "$work" @N@ 1
inproc "probe function_graph, in-process (10x, per call)" 1 "$ihits" "$probe" run --ring-size 65536 -o /dev/null --tracer function_graph --filter leaf -- "$work" @N@ 1
cost "probe r:leaf \$retval --no-inprocess (per call)" 1 "$probe" run --no-inprocess -o /dev/null 'r:leaf $retval' -- "$work" @N@ 1
cost "probe function_graph --no-inprocess (per call)" 1 "$probe" run --no-inprocess -o /dev/null --tracer function_graph --filter leaf -- "$work" @N@ 1
cost "  --no-mailbox" 1 "$probe" run --no-inprocess --no-mailbox -o /dev/null --tracer function_graph --filter leaf -- "$work" @N@ 1
cost "floor, 4 threads (per hit)" 4 "$out/floor" "$work" @N@ 4 floor
four=$(cost "probe p:leaf stopping, 4 threads (per hit)" 4 "$probe" run --no-inprocess -o /dev/null 'p:leaf a=%di b=%si' -- "$work" @N@ 4)
echo "$four"
ratio "  4 threads per hit / 1 thread per hit" "$entry" "$four"
[ "${PEERS:-1}" = 0 ] && exit 0
# An attached 8-thread process with a hot probe: calls a second from 0.5 s
# to 2.5 s after its start, probe attached at 0.1 s (median of RUNS).
gcc -O0 -pthread -o "$out/rate" bench/rate.c
# rate NAME [PROBE FLAGS...]: a row of calls a second and their ratio to
# the untraced run's (the first row).
rate() {
	local name=$1 xs=() i pid
	shift
	for ((i = 0; i < runs; i++)); do
		"$out/rate" 8 >"$out/rate.out" &
		pid=$!
		if [ "$name" != untraced ]; then
			sleep 0.1
			"$probe" attach -o /dev/null "$@" "$pid" 'p:leaf a=%di b=%si => count' >/dev/null 2>&1 || true
		fi
		wait "$pid"
		xs+=("$(cat "$out/rate.out")")
	done
	local n
	n=$(printf '%s\n' "${xs[@]}" | sort -n | sed -n "$(((runs + 1) / 2))p")
	[ -z "${plain_rate:-}" ] && plain_rate=$n
	awk -v name="$name" -v n="$n" -v p="$plain_rate" \
		'BEGIN { printf "%-44s %12.0f calls/s %8.4f of untraced\n", name, n, n / p }'
}
echo "# an attached process, 8 threads calling leaf(), p:leaf a=%di b=%si => count"
rate untraced
rate "in-process"
rate "stopping (--no-inprocess)" --no-inprocess
if command -v ltrace >/dev/null; then
	cost "ltrace -x leaf" 1 ltrace -o /dev/null -x leaf "$work" @N@ 1
fi
if command -v gdb >/dev/null; then
	cost "gdb dprintf leaf" 1 gdb -q -batch -ex 'dprintf leaf,"%ld\n",a' -ex run --args "$work" @N@ 1
fi
if command -v uftrace >/dev/null; then
	cost "uftrace (recompiled -pg, not attached)" 1 uftrace record -d "$out/uftrace.data" "$out/work-pg" @N@ 1
fi
# Kernel uprobes, counted by perf stat: the in-kernel reference (root
# only). No context switch at all: ten times the hits, to rise above the
# noise of perf's start-up.
if command -v perf >/dev/null && perf probe -q -x "$work" leaf 2>/dev/null; then
	trap 'perf probe -q -d "probe_work:*" 2>/dev/null' EXIT
	perf probe -q -x "$work" 'leaf%return' 2>/dev/null || true
	(
		hits=$((hits * 10))
		cost "kernel uprobe on leaf (perf stat, 10x hits)" 1 perf stat -e probe_work:leaf -o /dev/null -- "$work" @N@ 1
		cost "kernel uretprobe on leaf (perf stat, 10x)" 1 perf stat -e probe_work:leaf__return -o /dev/null -- "$work" @N@ 1
	)
fi
