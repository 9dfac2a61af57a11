#!/usr/bin/env bash
# Static probes (issue 40): Debian's python3.11 calling a Python function
# CALLS times (default 200,000) from C (map), its sdt:python:function__return
# probe counted and printed by probe (in the tracee), and counted by perf
# through a kernel uprobe (perf stat -e sdt_python:function__return), in
# the same run. Rows: the median wall time of RUNS runs (default 5), in
# ms, and its ratio to the untraced run; each traced row says how many
# hits it saw.
#   bench/sdt.sh [CALLS [RUNS]]
set -euo pipefail
cd "$(dirname "$0")/.."
calls=${1:-200000}
runs=${2:-5}
make -s build
py=/usr/bin/python3.11
[ -x "$py" ] || { echo "$0: $py is not installed" >&2; exit 2; }
probe=bin/probe
out=bin/bench/sdt
mkdir -p "$out"
printf 'def leaf(x):\n    return x + 1\nprint(sum(map(leaf, range(%d))))\n' "$calls" >"$out/calls.py"

. bench/lib.sh # wall, median
ref=
row() {
	local name=$1 hits=$2 ms=()
	shift 2
	for _ in $(seq "$runs"); do ms+=("$(wall "$@")"); done
	local m
	m=$(median "${ms[@]}")
	[ -z "$ref" ] && ref=$m
	printf '%-52s %8s %10s %8s\n' "$name" "$m" "$(eval "$hits")" "$(awk -v m="$m" -v r="$ref" 'BEGIN { printf "%.1f", m / r }')"
}

printf '# %s, %s, %s CPUs, %d calls, medians of %d runs\n' "$(date +%F)" "$(uname -srm)" "$(nproc)" "$calls" "$runs"
printf '%-52s %8s %10s %8s\n' "" "wall ms" "hits" "x untr."
row "python3.11 untraced" "echo -" "$py" "$out/calls.py"
row "probe: sdt:python:function__return => count" \
	"grep -o '[0-9]* hits' $out/last | head -1" \
	"$probe" run 'sdt:python:function__return => count' -- "$py" "$out/calls.py"
row "probe: ... f=\$arg2:string, each hit printed" \
	"grep -c function__return $out/p.txt" \
	"$probe" run -o "$out/p.txt" 'sdt:python:function__return f=$arg2:string' -- "$py" "$out/calls.py"
row "probe --no-inprocess: ... => count (a stop a hit)" \
	"grep -o '[0-9]* hits' $out/last | head -1" \
	"$probe" run --no-inprocess 'sdt:python:function__return => count' -- "$py" "$out/calls.py"
perf probe -q -d 'sdt_python:*' >/dev/null 2>&1 || true # (one left by an earlier run)
if command -v perf >/dev/null && perf buildid-cache --add "$py" 2>/dev/null &&
	perf probe -q -x "$py" sdt_python:function__return 2>/dev/null; then
	row "perf stat -e sdt_python:function__return (kernel uprobe)" \
		"awk '/function__return/ {print \$1}' $out/last.err" \
		perf stat -e sdt_python:function__return -- "$py" "$out/calls.py"
	perf probe -q -d 'sdt_python:*' 2>/dev/null || true
else
	echo "# perf's sdt event could not be set up here (root and uprobes needed)"
fi
