#!/usr/bin/env bash
# Builds Lua 5.4.4 from Debian's source package twice, into DIR/plain
# (-O2 -g, for probe) and DIR/pg (-O2 -g -pg, for uftrace), once.
#   bench/build-lua.sh DIR
set -euo pipefail
out=$1
mkdir -p "$out"
tarball=lua5.4_5.4.4.orig.tar.gz
if [ ! -f "$out/$tarball" ]; then
	curl -sSfL -o "$out/$tarball" "http://deb.debian.org/debian/pool/main/l/lua5.4/$tarball"
fi
for v in plain pg; do
	if [ ! -x "$out/$v/src/lua" ]; then
		rm -rf "$out/$v" && mkdir -p "$out/$v"
		tar xzf "$out/$tarball" -C "$out/$v" --strip-components=1
		flags="-g"
		[ "$v" = pg ] && flags="-g -pg"
		make -s -C "$out/$v/src" linux MYCFLAGS="$flags" MYLDFLAGS="${flags#-g}" >/dev/null 2>&1
	fi
done
