#!/usr/bin/env bash
# The per-hit table of bench/run.sh for an older build of probe and this
# tree's, side by side in one run: whether a change made probe slower.
#   bench/compare.sh REV [HITS [RUNS] [ROUNDS]]
# Builds REV (a commit) in a temporary worktree, then runs bench/run.sh
# (without its peers) ROUNDS times (default 2) for each build, taking
# turns, so that the machine's drift falls on both alike. Prints each
# row's us/hit for both, the median over the rounds, and new/old.
set -euo pipefail
cd "$(dirname "$0")/.."
rev=${1:?usage: bench/compare.sh REV [HITS [RUNS [ROUNDS]]]}
hits=${2:-20000}
runs=${3:-5}
rounds=${4:-2}
out=bin/bench
mkdir -p "$out"
old=$out/probe-old
tree=$(mktemp -d)
trap 'git worktree remove --force "$tree" >/dev/null 2>&1 || true; rm -rf "$tree"' EXIT
git worktree add -q --detach "$tree" "$rev"
(cd "$tree" && go build -o "$OLDPWD/$old" ./cmd/probe)
new=$(git rev-parse --short HEAD)$(git diff --quiet HEAD || echo +) # as built
make -s build
for ((r = 0; r < rounds; r++)); do
	PEERS=0 PROBE="$old" bench/run.sh "$hits" "$runs" >"$out/compare-old-$r.txt"
	PEERS=0 PROBE=bin/probe bench/run.sh "$hits" "$runs" >"$out/compare-new-$r.txt"
done
printf '# bench/compare.sh %s: %s (old) against %s (new), us/hit, median of %d rounds of %d runs\n' \
	"$rev" "$(git rev-parse --short "$rev")" "$new" "$rounds" "$runs"
printf '%-44s %10s %10s %8s\n' variant old new new/old
# Rows are "NAME  US/HIT  X_FLOOR  ONCE": the name is all but the last three fields.
awk -v rounds="$rounds" '
	function median(s,   n, a, i, j, t) {
		n = split(s, a, " ")
		for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
		return a[int((n + 1) / 2)]
	}
	FNR == 1 { which = (FILENAME ~ /compare-old/) ? "old" : "new" }
	/^#/ || NF < 4 || $(NF - 2) !~ /^[0-9.]+$/ { next }
	{
		name = $0
		sub(/ +[^ ]+ +[^ ]+ +[^ ]+ *$/, "", name)
		if (!(name in seen)) { seen[name] = 1; order[++rows] = name }
		v[name, which] = v[name, which] " " $(NF - 2)
	}
	END {
		for (r = 1; r <= rows; r++) {
			n = order[r]; o = median(v[n, "old"]); w = median(v[n, "new"])
			printf "%-44s %10.3f %10.3f %8.2f\n", n, o, w, (o > 0 ? w / o : 0)
		}
	}' "$out"/compare-old-*.txt "$out"/compare-new-*.txt
