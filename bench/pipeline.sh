#!/usr/bin/env bash
# The pipeline behind in-process probes, side by side with uftrace on the
# same workload in the same run (issue 36's targets).
#   bench/pipeline.sh [CALLS [RUNS]]
# integration/testdata/pipeline/calls.c calls one() CALLS times (default
# 2,000,000), built -O2 -g for probe and -O2 -g -pg for uftrace. Each row
# is the median wall time of RUNS runs (default 3), the calls of one()
# its output holds of those the program made, and the wall time as a
# ratio to uftrace record's.
set -euo pipefail
cd "$(dirname "$0")/.."
calls=${1:-2000000}
runs=${2:-3}
out=bin/bench/pipeline
mkdir -p "$out"
make -s build
gcc -O2 -g -o "$out/calls" integration/testdata/pipeline/calls.c
gcc -O2 -g -pg -o "$out/calls-pg" integration/testdata/pipeline/calls.c
probe=bin/probe
rec=$out/rec.probe

# wall CMD...: the wall time of one run in milliseconds, output to
# $out/last (stdout) and $out/last.err.
wall() {
	local t0 t1
	t0=$(date +%s%N)
	"$@" >"$out/last" 2>"$out/last.err"
	t1=$(date +%s%N)
	echo $(((t1 - t0) / 1000000))
}

median() { printf '%s\n' "$@" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

# row NAME KEPT-COMMAND CMD...: the median wall time of CMD, and the
# count KEPT-COMMAND prints afterwards (from the last run's output).
ref=
row() {
	local name=$1 kept=$2 ms=()
	shift 2
	for _ in $(seq "$runs"); do
		ms+=("$(wall "$@")")
	done
	local m k
	m=$(median "${ms[@]}")
	k=$(eval "$kept")
	[ -z "$ref" ] && ref=$m
	printf '%-46s %8s %10s %9s\n' "$name" "$m" "$k" "$(awk -v m="$m" -v r="$ref" 'BEGIN {printf "%.2f", m / r}')"
}

command -v uftrace >/dev/null || { echo "$0: uftrace is not installed (apt-get install uftrace)" >&2; exit 2; }
printf '# %s calls of one(), medians of %s runs\n' "$calls" "$runs"
printf '%-46s %8s %10s %9s\n' "" "wall ms" "calls kept" "x uftrace"
row "uftrace record" "uftrace replay -d $out/ut.data | grep -c ' one();'" uftrace record -d "$out/ut.data" "$out/calls-pg" "$calls"
row "uftrace replay (to a file)" "grep -c ' one();' $out/last" uftrace replay -d "$out/ut.data"
row "untraced" "echo -" "$out/calls" "$calls"
row "probe record, function_graph" "$probe report $rec | grep -c ' one()'" "$probe" record --tracer function_graph -o "$rec" -- "$out/calls" "$calls"
row "probe report (to a file)" "grep -c ' one()' $out/last" "$probe" report "$rec"
row "probe run, function_graph, text to a file" "grep -c ' one()' $out/fg.txt" "$probe" run --tracer function_graph -o "$out/fg.txt" -- "$out/calls" "$calls"
row "probe run 'p:one a=%di b=%si', text to a file" "grep -c p_one $out/p.txt" "$probe" run 'p:one a=%di b=%si' -o "$out/p.txt" -- "$out/calls" "$calls"
row "probe record 'p:one a=%di b=%si'" "$probe report $rec | grep -c p_one" "$probe" record -o "$rec" 'p:one a=%di b=%si' -- "$out/calls" "$calls"
