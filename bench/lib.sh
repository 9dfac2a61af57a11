# Shared by the bench scripts: source it after setting $out (a directory).

# wall CMD...: the wall time of one run of CMD in milliseconds; its stdout
# in $out/last and its stderr in $out/last.err.
wall() {
	local t0 t1
	t0=$(date +%s%N)
	"$@" >"$out/last" 2>"$out/last.err"
	t1=$(date +%s%N)
	echo $(((t1 - t0) / 1000000))
}

# median N...: the median of the numbers.
median() { printf '%s\n' "$@" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
