#!/usr/bin/env bash
# The pipeline behind in-process probes, side by side with uftrace on the
# same workloads in the same run (issue 36's targets).
#   bench/pipeline.sh [CALLS [RUNS]]
# Three workloads, each built -O2 -g for probe and -O2 -g -pg for uftrace:
#   calls  integration/testdata/pipeline/calls.c: one() called CALLS times
#          (default 2,000,000)
#   mixed  bench/mixed.c: ~112,000 calls (fib, a qsort comparator, a hash);
#          uftrace also traces its 46,000 calls into libc through the PLT
#   lua    Lua 5.4.4 running bench/lua/bench.lua (~284,000 C calls)
# then bench/mixed.c built with each kind of compiler-placed site
# (issue 38): probe's function_graph on each against the build without
# sites (x plain), and uftrace record on those it takes; last, one
# drain's raw capture throughput (go test -bench RawCapture ./probe).
# Each row is the median wall time of RUNS runs (default 3); the calls its
# output holds (of function_graph: its lines that open or are a call; "-"
# where not counted); the events the rings lost and the time the threads
# waited for room, from probe's end notes; and the wall time as a ratio
# to uftrace record's and to uftrace replay's on the same workload (the
# targets: record and report at most 1.0x of uftrace's record and
# replay, live text at most 1.0x of the two together).
set -euo pipefail
cd "$(dirname "$0")/.."
calls=${1:-2000000}
runs=${2:-3}
out=bin/bench/pipeline
mkdir -p "$out"
make -s build
command -v uftrace >/dev/null || { echo "$0: uftrace is not installed (apt-get install uftrace)" >&2; exit 2; }
gcc -O2 -g -o "$out/calls" integration/testdata/pipeline/calls.c
gcc -O2 -g -pg -o "$out/calls-pg" integration/testdata/pipeline/calls.c
gcc -O2 -g -o "$out/mixed" bench/mixed.c
gcc -O2 -g -pg -o "$out/mixed-pg" bench/mixed.c
bench/build-lua.sh bin/bench/lua
lua=bin/bench/lua
probe=bin/probe
rec=$out/rec.probe

. bench/lib.sh # wall, median

# graphcalls FILE: the calls a function_graph text holds (probe's or
# uftrace replay's): the lines that open a call or are a whole one.
graphcalls() { grep -cE '\(\);|\) \{$' "$1" || true; }

# notes FILE...: "LOST WAITED": the events lost in the rings and the
# milliseconds threads waited for room, from probe's end notes in FILEs.
notes() {
	cat "$@" 2>/dev/null | awk '
		/events lost in the tracee/ { for (i = 1; i < NF; i++) if ($i ~ /^[0-9]+$/) { lost += $i; break } }
		/waited by the threads for room/ { w = $2; sub(/ms$/, "", w); if (w ~ /s$/) { sub(/s$/, "", w); w *= 1000 } waited += w }
		END { printf "%d %d", lost, waited }'
}

# row NAME KEPT NOTES CMD...: the median wall time of CMD; the calls the
# command KEPT prints (run after the last run); the lost and waited notes
# of the files NOTES names ("-": none; the last run's stderr is always
# read).
ref= ref2=
row() {
	local name=$1 kept=$2 nf=$3 ms=()
	shift 3
	for _ in $(seq "$runs"); do
		ms+=("$(wall "$@")")
	done
	local m k n
	m=$(median "${ms[@]}")
	k=$(eval "$kept")
	[ "$nf" = - ] && nf=
	n=$(notes "$out/last.err" $nf)
	if [ -z "$ref" ]; then
		ref=$m
	elif [ -z "$ref2" ]; then
		ref2=$m
	fi
	printf '%-44s %8s %10s %8s %7s %8s %8s\n' "$name" "$m" "$k" ${n% *} ${n#* } \
		"$(awk -v m="$m" -v r="$ref" 'BEGIN { if (r > 0) printf "%.2f", m / r; else printf "-" }')" "$(awk -v m="$m" -v r="$ref2" 'BEGIN { if (r > 0) printf "%.2f", m / r; else printf "-" }')"
}

header() {
	ref= ref2=
	printf '\n# %s\n' "$1"
	printf '%-44s %8s %10s %8s %7s %8s %8s\n' "" "wall ms" "calls kept" "lost" "waited" "${2:-x u.rec}" "${3:-x u.rep}"
}

printf '# %s, %s, %s CPUs, %s, medians of %s runs\n' "$(date +%F)" "$(uname -srm)" "$(nproc)" "$(uftrace --version | head -1)" "$runs"

# graph NAME PROGRAM-PG PROGRAM ARGS...: the function_graph rows of one
# workload.
graph() {
	local name=$1 pg=$2 plain=$3
	shift 3
	header "$name"
	row "uftrace record" "echo -" - uftrace record -d "$out/ut.data" "$pg" "$@"
	row "uftrace replay (to a file)" "graphcalls $out/last" - uftrace replay -d "$out/ut.data"
	row "untraced" "echo -" - "$plain" "$@"
	row "probe record, function_graph" "$probe report $rec >$out/rep.txt; graphcalls $out/rep.txt" "$out/rep.txt" "$probe" record --tracer function_graph -o "$rec" -- "$plain" "$@"
	row "probe report (to a file)" "graphcalls $out/last" "$out/last" "$probe" report "$rec"
	row "probe report --format json" "grep -c func_entry $out/last" - "$probe" report --format json "$rec"
	row "probe report --format perfetto" "echo -" - "$probe" report --format perfetto -o "$out/trace.pftrace" "$rec"
	row "probe run, function_graph, text to a file" "graphcalls $out/fg.txt" "$out/fg.txt" "$probe" run --tracer function_graph -o "$out/fg.txt" -- "$plain" "$@"
	row "probe run, function_graph, json to a file" "grep -c func_entry $out/fg.json" - "$probe" run --tracer function_graph --format json -o "$out/fg.json" -- "$plain" "$@"
}

graph "calls: $calls calls of one()" "$out/calls-pg" "$out/calls" "$calls"
row "probe run 'p:one a=%di b=%si', text to a file" "grep -c p_one $out/p.txt" "$out/p.txt" "$probe" run 'p:one a=%di b=%si' -o "$out/p.txt" -- "$out/calls" "$calls"
row "probe record 'p:one a=%di b=%si'" "$probe report $rec >$out/rep.txt; grep -c p_one $out/rep.txt" "$out/rep.txt" "$probe" record -o "$rec" 'p:one a=%di b=%si' -- "$out/calls" "$calls"
row "probe record 'r:one \$retval'" "$probe report $rec >$out/rep.txt; grep -c r_one $out/rep.txt" "$out/rep.txt" "$probe" record -o "$rec" 'r:one $retval' -- "$out/calls" "$calls"
"$probe" record --tracer function_graph -o "$rec" -- "$out/calls" "$calls" >/dev/null 2>&1
printf '%-44s %8s MB (a recording of %s MB)\n' "probe report's peak RSS" \
	"$(( $( (command time -f %M "$probe" report -o /dev/null "$rec" >/dev/null) 2>&1 | tail -1) / 1024 ))" "$(( $(stat -c %s "$rec") >> 20 ))"
row "probe run --drop, function_graph, text" "graphcalls $out/fg.txt" "$out/fg.txt" "$probe" run --drop --tracer function_graph -o "$out/fg.txt" -- "$out/calls" "$calls"
graph "mixed: bench/mixed.c" "$out/mixed-pg" "$out/mixed"
graph "lua: bench/lua/bench.lua" "$lua/pg/src/lua" "$lua/plain/src/lua" bench/lua/bench.lua

# The sites: the first row is the reference of the second column
# (x plain), uftrace's rows compare with it too.
header "sites: bench/mixed.c, function_graph text to a file" "x plain" "-"
for kind in "plain:" "pg:-pg" "fentry:-pg -mfentry" "fentry-nopie:-pg -mfentry -fno-pic -no-pie" \
	"fentry-nop:-pg -mfentry -mnop-mcount -fno-pic -no-pie" "patchable:-fpatchable-function-entry=5"; do
	name=${kind%%:*}
	# shellcheck disable=SC2086 # (the flags are words)
	gcc -O2 -g ${kind#*:} -o "$out/mixed-$name" bench/mixed.c
	row "probe run, $name" "graphcalls $out/fg.txt" "$out/fg.txt" "$probe" run --tracer function_graph -o "$out/fg.txt" -- "$out/mixed-$name"
	ref2=-1 # (no second reference)
done
for name in pg fentry; do
	row "uftrace record, $name" "echo -" - uftrace record -d "$out/ut.data" "$out/mixed-$name"
done

# One drain's capture throughput, the rings merged and each record
# encoded raw (probe.BenchmarkRawCapture; issue 36's target: 10 million
# records a second).
go test -run XXX -bench RawCapture -benchtime 200x ./probe | awk '/records\/s/ { printf "\n# %-42s %12.0f records/s\n", "raw capture, one drain (go test -bench)", $(NF-1) }'
