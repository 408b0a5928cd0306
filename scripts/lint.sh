#!/bin/bash
# make lint: the kernel's own checkers on the kernel-side code, each file or
# build one result in $CLANQ_RESULTS (or just printed when run alone).
#   - checkpatch.pl --strict on driver/, the shared headers, tests/kunit/
#   - the module built with W=1 -Werror for the debug 6.12 kernel (with the
#     KUnit module), for Debian's stock 6.12 headers and for 6.1 headers
#   - sparse (C=2) on the debug build: any warning in our files fails
#   - the man pages (scripts/man-check.sh: groff -ww, lexgrog)
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
results=${CLANQ_RESULTS:-/dev/null}
log=$root/build/lint.log
mkdir -p build
: > "$log"
fails=0

result() {	# result PASS|FAIL name [why]
	echo "$1 lint/$2${3:+: $3}" >> "$results"
	if [ "$1" = PASS ]; then
		printf '  %-44s ok\n' "$2"
	else
		printf '  %-44s FAILED %s\n' "$2" "${3:-}"
		fails=$((fails + 1))
	fi
}

src=$(tests/vm/kernel.sh src) || exit 1
kdir=$(tests/vm/kernel.sh debug) || exit 1

# -- checkpatch --
for f in driver/*.[ch] driver/verbs/*.[ch] include/clanq/*.h lib/ring.h \
	 include/clanq.h tests/kunit/*.c; do
	[ -f "$f" ] || continue
	ignore=SPDX_LICENSE_TAG
	case $f in include/clanq.h | include/clanq/net.h | include/clanq/admin.h | lib/ring.h)
		# the library's own headers: <stdint.h> types, as a C
		# library's interface says (the kernel's are uapi.h, queue.h)
		ignore=$ignore,PREFER_KERNEL_TYPES ;;
	esac
	out=$(perl "$src/scripts/checkpatch.pl" --strict --no-tree --terse \
		--show-types --ignore "$ignore" -f "$f" 2>&1 |
		grep -E '(ERROR|WARNING|CHECK):')
	if [ -z "$out" ]; then
		result PASS "checkpatch/$f"
	else
		echo "$out" | tee -a "$log" | sed 's/^/      /' | head -n 20
		result FAIL "checkpatch/$f" "$(echo "$out" | wc -l) reports"
	fi
done

# -- W=1 -Werror builds against each kernel --
kbuild() {	# kbuild NAME MAKE-TARGET...
	local name=$1
	shift
	if make --no-print-directory "$@" >>"$log" 2>&1; then
		result PASS "build/$name"
	else
		grep -E 'error|warning' "$log" | tail -n 10 | sed 's/^/      /'
		result FAIL "build/$name" "see $log"
	fi
}
kbuild debug-6.12 module-debug
kbuild stock-6.12 module-stock
v61=$(ls -d /usr/src/linux-headers-6.1.0-*-amd64 2>/dev/null | sort -V | tail -n 1)
if [ -n "$v61" ]; then
	kbuild 6.1 module KDIR="$v61" MODNAME=v6.1
else
	result FAIL build/6.1 "no 6.1 headers (make deps)"
fi

# -- sparse on the debug build (C=2 checks every file, built or not) --
for d in driver kunit; do
	out=$(make --no-print-directory -C "$kdir" M="$root/build/mod/debug/$d" \
		CLANQ_ROOT="$root" C=2 CHECK=sparse modules 2>&1)
	echo "$out" >> "$log"
	ours=$(echo "$out" | grep -E ': (warning|error):' | grep -F "$root/")
	if [ -z "$ours" ]; then
		result PASS "sparse/$d"
	else
		echo "$ours" | sed 's/^/      /' | head -n 20
		result FAIL "sparse/$d" "$(echo "$ours" | wc -l) reports"
	fi
done

# -- man pages: groff -ww, lexgrog, .so targets (one result per page) --
man_out=$(scripts/man-check.sh 2>&1)
man_fails=$(echo "$man_out" | grep -c '^FAIL')
echo "$man_out" | grep '^FAIL' | sed 's/^/      /'
echo "  man pages: $(echo "$man_out" | grep -c '^PASS') ok, $man_fails failed"
fails=$((fails + man_fails))

echo "lint: $fails failed (log: $log)"
[ $fails = 0 ]
