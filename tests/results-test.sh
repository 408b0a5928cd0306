#!/bin/bash
# make check: tests/results.awk, which counts every test, must not hide a
# failure. A cmocka program whose case setup, case teardown or group
# teardown fails, and one that asserts, are built and run here, framed
# as the VM frames them; each must come out as the failures it is.
# Prints cmocka-style lines (tests/results.awk counts them in turn).
set -u
here=$(cd "$(dirname "$0")" && pwd)
out=$here/../build/results-test
mkdir -p "$out"
fails=0
ok() { echo "[       OK ] $1"; }
bad() { echo "[  FAILED  ] $1: $2"; fails=$((fails + 1)); }

cat > "$out/t.c" <<'C'
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
static int fails(void **s) { (void)s; return -1; }
static void passes(void **s) { (void)s; }
static void asserts(void **s) { (void)s; assert_int_equal(1, 2); }
static void torn(void **s) { (void)s; }
static void unset(void **s) { (void)s; }
int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(passes),
		cmocka_unit_test(asserts),
		cmocka_unit_test_teardown(torn, fails),
		cmocka_unit_test_setup(unset, fails),
	};
	return cmocka_run_group_tests(tests, NULL, fails);
}
C
cc -o "$out/t" "$out/t.c" -lcmocka || { bad "results: build" "cc failed"; exit 1; }
{ echo "CLANQ-BEGIN prog"; "$out/t"; echo "CLANQ-END prog rc=$?"; } > "$out/t.log" 2>&1
got=$(awk -f "$here/results.awk" "$out/t.log" | sed 's/:.*//' | sort | tr '\n' ',')
want="FAIL prog/GROUP TEARDOWN,FAIL prog/asserts,FAIL prog/torn,FAIL prog/unset,PASS prog/passes,"
if [ "$got" = "$want" ]; then
	ok "results: a failed setup, teardown, group teardown and assertion each count"
else
	bad "results: a failed setup, teardown, group teardown and assertion each count" "got $got"
fi
[ $fails = 0 ]
