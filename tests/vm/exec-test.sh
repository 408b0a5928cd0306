#!/bin/bash
# make test's check of `vm.sh exec` (make vm-run): its argument handling
# on the host (no VM), then one short boot of the stock kernel running a
# program the way a user would: exec-probe (tests/vm/exec-probe.c),
# linked against the tree's libclanq.so.2, copied in and run by a
# command with quotes and a semicolon in it, opening node 1 and exiting
# 3. Its output must come back exactly: an empty line kept, none added
# at the end (where the guest ends a last line that lacks a newline),
# nothing of the harness's, nor the kernel line the command has the
# kernel print; and 3 must be vm.sh's status. Results go to
# $CLANQ_RESULTS as exec/<check>. Then test_namespace whole on the stock
# kernel (its user-namespace case needs CONFIG_USER_NS).
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root" || exit 1
results=${CLANQ_RESULTS:-$root/build/results.txt}
t=$root/build/exec-test
mkdir -p "$t" "$(dirname "$results")"
failed=0

pass() { echo "PASS exec/$1" | tee -a "$results"; }
fail() { echo "FAIL exec/$1: $2" | tee -a "$results"; failed=$((failed + 1)); }

# expect NAME STATUS PATTERN CMD...: CMD exits STATUS, its stderr says PATTERN
expect() {
	local name=$1 want=$2 pat=$3 rc
	shift 3
	"$@" > "$t/out" 2> "$t/err"
	rc=$?
	if [ $rc != "$want" ]; then
		fail "$name" "exited $rc, not $want: $(head -c 300 "$t/err")"
	elif ! grep -q -- "$pat" "$t/err"; then
		fail "$name" "did not say '$pat': $(head -c 300 "$t/err")"
	else
		pass "$name"
	fi
}

# ---- arguments (no VM is booted: each is refused first) ----
expect "no program, no command" 125 "no program and no command" tests/vm/vm.sh exec
expect "only an empty command" 125 "no program and no command" tests/vm/vm.sh exec -- " "
expect "a program that is not there" 125 "no such program: $t/nothing" tests/vm/vm.sh exec "$t/nothing" -- true
expect "a program that is not executable" 125 "is not executable" tests/vm/vm.sh exec Makefile
expect "a timeout that is no number" 125 "CLANQ_EXEC_TIMEOUT=5s" env CLANQ_EXEC_TIMEOUT=5s tests/vm/vm.sh exec -- true
expect "a kernel that does not exist" 125 "CLANQ_VM_KERNEL=rc: stock or debug" env CLANQ_VM_KERNEL=rc tests/vm/vm.sh exec -- true
expect "make vm-run passes PROG" 2 "no such program: $t/nothing" make --no-print-directory vm-run PROG="$t/nothing"

# ---- one run in the stock-kernel VM ----
if ! { make --no-print-directory -s lib &&
	${CC:-cc} -std=gnu11 -Wall -Wextra -Werror -Iinclude tests/vm/exec-probe.c \
		-L build/lib -l:libclanq.so.2 -o "$t/exec-probe"; } > "$t/build.log" 2>&1; then
	fail "build exec-probe" "$(tail -n 5 "$t/build.log")"
	exit 1
fi
printf '%s\n' 'it said "a;b"' '' 'exec-probe: node 1 of 2 NICs' 'exec-probe: exiting 3' > "$t/want"
t0=$(date +%s)
tests/vm/vm.sh exec "$t/exec-probe" -- 'echo "it said \"a;b\""; echo "<4>exec-test: the kernel" > /dev/kmsg;' \
	'echo; exec-probe 1 3' > "$t/got" 2> "$t/vm.log"
rc=$?
echo "   exec run: $(( $(date +%s) - t0 )) s, status $rc"
if [ $rc = 3 ]; then
	pass "the command's status comes back"
else
	fail "the command's status comes back" "vm.sh exited $rc, not 3: $(tail -n 5 "$t/vm.log")"
fi
if cmp -s "$t/want" "$t/got"; then
	pass "the command's output comes back, and only it"
else
	fail "the command's output comes back, and only it" \
		"$(diff "$t/want" "$t/got" | head -n 10 | tr '\n' '|')"
fi

# ---- test_namespace on the stock kernel ----
# The debug kernel has no CONFIG_USER_NS, so the vm stage skips the
# user-namespace case of test_namespace (a container's root refused the
# NIC's administration, charged as its kernel uid); Debian's kernel has
# it: the whole program runs here, and a skip is a failure.
prog=build/vm/bin/test_namespace
if ! [ -x "$prog" ]; then
	fail "namespace" "$prog is not built (the vm stage builds it)"
else
	t0=$(date +%s)
	tests/vm/vm.sh exec "$prog" -- ./test_namespace > "$t/ns" 2> "$t/ns.log"
	rc=$?
	# QEMU's multi-threaded TCG, now and then, runs the int3 of the
	# guest kernel's own live patching (text_poke_bp: a static key that
	# the test's first memory cgroup turns on) after the patch is done,
	# and the guest dies in core code: one run of about ten (stop 37,
	# "Oops: int3" in kmem_cache_alloc_node under fork). Such a death
	# with no clanq frame in its trace is the emulator's: run once more.
	if [ $rc != 0 ] && grep -q 'Oops: int3' "$t/ns.log" &&
	   ! sed -n '/Call Trace/,/end trace/p' build/vm/exec/console.log | grep -q '\[clanq'; then
		cp build/vm/exec/console.log "$t/ns-int3.console.log"
		echo "   namespace: the guest died of the emulator's int3, not in clanq (build/exec-test/ns-int3.console.log): once more"
		tests/vm/vm.sh exec "$prog" -- ./test_namespace > "$t/ns" 2> "$t/ns.log"
		rc=$?
	fi
	echo "   namespace run: $(( $(date +%s) - t0 )) s, status $rc"
	cases=0
	while read -r verdict name; do
		cases=$((cases + 1))
		case $verdict in
		OK) pass "namespace/$name" ;;
		SKIPPED) fail "namespace/$name" "skipped on the stock kernel: $(grep -m1 -i 'skip' "$t/ns" | head -c 200)" ;;
		*) fail "namespace/$name" "$(grep -B3 -m1 "$name" "$t/ns" | tr '\n' '|' | head -c 300)" ;;
		esac
	done < <(sed -n 's/^\[ *\(OK\|FAILED\|SKIPPED\|ERROR\) *\] \([A-Za-z0-9_]*\)$/\1 \2/p' "$t/ns")
	if [ $cases = 0 ] || [ $rc != 0 ]; then
		fail "namespace" "status $rc, $cases cases: $(tail -n 5 "$t/ns.log" "$t/ns" | tr '\n' '|' | head -c 400)"
	fi
fi
[ $failed = 0 ]
