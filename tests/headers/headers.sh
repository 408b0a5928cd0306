#!/bin/bash
# make check: each installed header compiles alone, as a user would
# include it first, in each mode a user may build in: strict ISO C11,
# GNU C17, and C++17 (the headers say extern "C" themselves), with every
# warning an error. Prints cmocka-style lines (tests/results.awk).
set -u
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root" || exit 1
out=build/headers
mkdir -p "$out"
fails=0

compile() {	# compile NAME HEADER COMPILER ARGS...
	local name=$1 hdr=$2 cc=$3 src
	shift 3
	case $cc in g++) src=$out/t.cc ;; *) src=$out/t.c ;; esac
	printf '#include <%s>\nint clanq_header_test_%s;\n' "$hdr" "$RANDOM" > "$src"
	if msg=$("$cc" "$@" -Wall -Wextra -Werror -Iinclude -c "$src" -o "$out/t.o" 2>&1); then
		echo "[       OK ] $name"
	else
		echo "[  FAILED  ] $name: $(printf '%s\n' "$msg" | grep -m 2 -E 'error|warning' | tr '\n' ' ')"
		fails=$((fails + 1))
	fi
}

for h in clanq.h clanq/net.h clanq/admin.h clanq/uapi.h clanq/queue.h; do
	compile "$h alone, -std=c11" "$h" gcc -std=c11 -pedantic
	compile "$h alone, -std=gnu17" "$h" gcc -std=gnu17
	compile "$h alone, C++17" "$h" g++ -std=c++17
done
[ $fails = 0 ]
