#!/usr/bin/env bash
# function_graph on a real interpreter: Lua 5.4 from Debian's source
# package, bench/lua/bench.lua (~390,000 C calls), untraced and traced.
#   bench/lua.sh [RUNS]
# Builds Lua twice (plain -O2 -g for probe; -pg for uftrace), runs the
# workload RUNS times each way and prints medians: the CPU time the
# script itself measures (os.clock: the tracee's own cost) and the wall
# time of the whole run (with probe's or uftrace's start and end), and
# each as a ratio to the untraced run of the same build.
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-5}
out=bin/bench/lua
mkdir -p "$out"
make -s build
bench/build-lua.sh "$out"
script=bench/lua/bench.lua
want=$("$out/plain/src/lua" "$script" 2>/dev/null)

# run NAME CMD...: "lua_ms wall_ms" medians over RUNS runs; the output
# must be the untraced one.
run() {
	local xs=() ws=() i t0 t1 got
	for ((i = 0; i < runs; i++)); do
		t0=$(date +%s%N)
		got=$("$@" 2>"$out/err" | tail -1)
		t1=$(date +%s%N)
		if [ "$got" != "$want" ]; then
			echo "bench: $*: printed $got, want $want" >&2
			exit 1
		fi
		xs+=("$(sed -n 's/^lua_ms=//p' "$out/err" | tail -1)")
		ws+=("$(((t1 - t0) / 1000000))")
	done
	echo "$(printf '%s\n' "${xs[@]}" | sort -n | sed -n "$(((runs + 1) / 2))p") $(printf '%s\n' "${ws[@]}" | sort -n | sed -n "$(((runs + 1) / 2))p")"
}

# row NAME BASE RESULT: a line of the table.
row() {
	awk -v n="$1" -v b="$2" -v r="$3" 'BEGIN {
		split(b, x, " "); split(r, y, " ")
		printf "%-46s %9.1f %7.1fx %9d %7.1fx\n", n, y[1], y[1] / x[1], y[2], y[2] / x[2] }'
}

printf '# lua: %s, %s, %s CPUs, Lua 5.4.4, median of %d runs\n' "$(date +%F)" "$(uname -srm)" "$(nproc)" "$runs"
printf '%-46s %9s %8s %9s %8s\n' variant "lua ms" "x" "wall ms" "x"
plain=$(run "$out/plain/src/lua" "$script")
row "untraced (-O2 -g)" "$plain" "$plain"
row "probe function_graph, in-process" "$plain" "$(run bin/probe run --ring-size 65536 -o /dev/null --tracer function_graph -- "$out/plain/src/lua" "$script")"
row "probe function_graph --no-inprocess" "$plain" "$(run bin/probe run --no-inprocess -o /dev/null --tracer function_graph -- "$out/plain/src/lua" "$script")"
row "probe record function_graph" "$plain" "$(run bin/probe record -o "$out/probe.rec" --tracer function_graph -- "$out/plain/src/lua" "$script")"
# The -pg build: probe hooks its functions past their calls of mcount
# (issue 38), uftrace through them.
pg=$(run "$out/pg/src/lua" "$script")
row "untraced (-O2 -g -pg)" "$pg" "$pg"
row "probe function_graph, in-process (-pg build)" "$pg" "$(run bin/probe run --ring-size 65536 -o /dev/null --tracer function_graph -- "$out/pg/src/lua" "$script")"
row "probe record function_graph (-pg build)" "$pg" "$(run bin/probe record -o "$out/probe.rec" --tracer function_graph -- "$out/pg/src/lua" "$script")"
if command -v uftrace >/dev/null; then
	row "uftrace record (-pg build)" "$pg" "$(run uftrace record -d "$out/uftrace.data" "$out/pg/src/lua" "$script")"
else
	echo "# uftrace not installed: its row left out"
fi
