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
# the calls that take pointers, with the standard integer types a user's
# own variables have: an incompatible pointer is an error in C++, and in C
# with -Werror (GCC 14 makes it one by default)
cat > "$out/stdint.c" <<'EOF2'
#include <stdint.h>
#include <clanq/net.h>
#include <clanq/admin.h>

int clanq_stdint_use(struct clanq_dev *dev, struct clanq_region *r,
		     struct clanq_tw *tw, struct clanq_conn *c);
int clanq_stdint_use(struct clanq_dev *dev, struct clanq_region *r,
		     struct clanq_tw *tw, struct clanq_conn *c)
{
	uint64_t entries = 0, key = 0, cookie = clanq_conn_get_cookie(c);
	const uint64_t *word = (const uint64_t *)r->mem;
	struct clanq_nic_info info;
	uint32_t node = info.node;

	return clanq_ctx_entries(dev, &entries) + clanq_region_export(r, 0, &key) +
	       clanq_tw_wait_change(tw, word, cookie, 0) + (int)node;
}
EOF2
for mode in "gcc -std=c11 -pedantic" "g++ -std=c++17 -x c++"; do
	if msg=$($mode -Wall -Wextra -Werror -Wno-uninitialized -Wno-maybe-uninitialized \
		 -Iinclude -c "$out/stdint.c" -o "$out/t.o" 2>&1); then
		echo "[       OK ] uint64_t * and friends passed to the calls, ${mode%% *}"
	else
		echo "[  FAILED  ] uint64_t * and friends passed to the calls, ${mode%% *}: $(printf '%s\n' "$msg" | grep -m 2 -E 'error|warning' | tr '\n' ' ')"
		fails=$((fails + 1))
	fi
done
[ $fails = 0 ]
