#!/usr/bin/env bash
# --calls against ltrace on whole runs of real programs (issue 39's
# targets): probe run --calls 'libc:*' of /bin/true within 1.5x of
# probe's own start (probe run 'p:libc:malloc'), and of sqlite3's and
# jq's one-query runs within 2x of ltrace's.
#   bench/calls.sh [RUNS]
# Each row is the median wall time of RUNS runs (default 5), in ms, and
# its ratio to the row the target compares it with.
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-5}
make -s build
for tool in ltrace sqlite3 jq; do
	command -v "$tool" >/dev/null || { echo "$0: $tool is not installed" >&2; exit 2; }
done
probe=bin/probe
out=bin/bench/calls
mkdir -p "$out"
echo '{"a":1}' >"$out/in.json"

. bench/lib.sh # wall, median
ms() {
	local xs=()
	for _ in $(seq "$runs"); do xs+=("$(wall "$@")"); done
	median "${xs[@]}"
}
row() { printf '%-48s %8s %8s\n' "$1" "$2" "$3"; }

printf '# %s, %s, medians of %d runs\n' "$(date +%F)" "$(ltrace --version | head -1)" "$runs"
row "" "wall ms" "ratio"
bench() {
	echo "# $*"
	local l m c
	l=$(ms ltrace -o /dev/null "$@")
	m=$(ms "$probe" run -o /dev/null 'p:libc:malloc' -- "$@")
	c=$(ms "$probe" run -o /dev/null --calls 'libc:*' -- "$@")
	row "ltrace -o /dev/null" "$l" "1.00"
	row "probe run 'p:libc:malloc' (probe's start)" "$m" "$(awk -v a="$m" -v b="$l" 'BEGIN{printf "%.2f", a/b}')"
	row "probe run --calls 'libc:*'" "$c" "$(awk -v a="$c" -v b="$l" 'BEGIN{printf "%.2f", a/b}')"
	row "  ... against probe's start" "" "$(awk -v a="$c" -v b="$m" 'BEGIN{printf "%.2f", a/b}')"
}
bench /bin/true
bench sqlite3 :memory: 'select 1;'
bench jq .a "$out/in.json"
